#!/usr/bin/env python3
"""Memory per node while the store grows (issue #31, the quick form).

Starts 3 mayflyd on 127.0.0.1 (fresh data in a temporary directory), loads --first 1 KB items with mayfly-bench
(upsert1k, each with a 1 h ttl, so all stay live), lets the cluster settle, then loads --second more into a second
container, sampling every node's VmRSS every 0.5 s throughout. Prints per node: the settled RSS after the first load,
the peak during the second load (and the settle after it) and the difference — the figure the issue bounds at
128 MB — plus the snapshot exports each node logged. Stops only the processes it started.

With --restart it then stops node 2 with SIGTERM and starts it again, then with SIGKILL, and times each start until
the node applied the commit index it had when it stopped (the log after the state's checkpoint is replayed).

With --backup-restore it then takes an online backup from node 1 (`mayfly backup create`) and restores it with
`mayflyd --restore FILE --ttl preserve` into a new one-node cluster, timing both and sampling the RSS of node 1 during
the backup and of the restoring process until it serves the restored index.

With --catch-up SECONDS it then stops node 3, wipes its data directory and starts it again while 256 B upserts go
on for SECONDS against nodes 1 and 2: the leader streams it a snapshot of the whole store. It prints the time until
node 3 applied what the leader had committed at its restart, the write throughput before / during / after, and the
peak RSS of every node meanwhile above its settled RSS (node 3: above the others' settled RSS).

    bench/memory_bench.py [--build build] [--first 100000] [--second 200000] [--base-port 27600]
                          [--flags "--checkpoint-interval-entries 20000"] [--restart] [--catch-up 60]
                          [--backup-restore]
"""
import argparse
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request


RSS_FIELD = "VmRSS"


def rss_mb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(RSS_FIELD + ":"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return None


class Sampler(threading.Thread):
    def __init__(self, pids):
        super().__init__(daemon=True)
        self.pids = pids
        self.phase = "start"
        self.samples = []  # (time, phase, [rss per node])
        self.stopping = threading.Event()

    def run(self):
        while not self.stopping.is_set():
            self.samples.append((time.time(), self.phase, [rss_mb(p) for p in self.pids]))
            self.stopping.wait(0.5)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build")
    parser.add_argument("--mayflyd", default=None, help="default: BUILD/mayflyd/mayflyd")
    parser.add_argument("--first", type=int, default=100000)
    parser.add_argument("--second", type=int, default=200000)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--settle-seconds", type=float, default=15.0)
    parser.add_argument("--base-port", type=int, default=27600)
    parser.add_argument("--flags", default="", help="extra mayflyd flags")
    parser.add_argument("--keep", action="store_true", help="keep the data directory")
    parser.add_argument("--catch-up", type=float, default=0.0, help="seconds of writes while node 3 catches up")
    parser.add_argument("--restart", action="store_true",
                        help="then restart node 2 after SIGTERM and after SIGKILL, timing each")
    parser.add_argument("--backup-restore", action="store_true",
                        help="then back up node 1 and restore the backup into a new one-node cluster, timing both")
    parser.add_argument("--rss", choices=["VmRSS", "RssAnon"], default="VmRSS",
                        help="what to sample: VmRSS (everything resident) or RssAnon (the process's own memory: "
                             "VmRSS counts the pages of LevelDB's memory-mapped table files too, page cache the "
                             "kernel reclaims)")
    args = parser.parse_args()
    global RSS_FIELD
    RSS_FIELD = args.rss
    mayflyd = args.mayflyd or os.path.join(args.build, "mayflyd", "mayflyd")
    bench = os.path.join(args.build, "bench", "mayfly-bench")
    for path in (mayflyd, bench):
        if not os.access(path, os.X_OK):
            sys.exit(f"{path} is not built")
    print("command: " + " ".join(shlex.quote(a) for a in sys.argv), flush=True)
    print(f"mayflyd: {mayflyd}; sampling {RSS_FIELD}", flush=True)

    root = tempfile.mkdtemp(prefix="mayfly-memory-")
    ports = [args.base_port + i for i in range(3)]
    metrics_ports = [args.base_port + 10 + i for i in range(3)]
    endpoints = ",".join(f"127.0.0.1:{p}" for p in ports)
    peers = ",".join(f"{i + 1}=127.0.0.1:{p}" for i, p in enumerate(ports))
    processes = []

    def start(i, mode="w"):
        log = open(os.path.join(root, f"node{i + 1}.log"), mode)
        command = [mayflyd, "--id", str(i + 1), "--listen", f"127.0.0.1:{ports[i]}", "--peers", peers,
                   "--data", os.path.join(root, f"node{i + 1}"), "--metrics", f"127.0.0.1:{metrics_ports[i]}"]
        return subprocess.Popen(command + shlex.split(args.flags), stdout=log, stderr=subprocess.STDOUT)

    def gauge(i, name):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{metrics_ports[i]}/metrics", timeout=2) as r:
                for line in r.read().decode().splitlines():
                    if line.startswith(name + "{") or line.startswith(name + " "):
                        return float(line.rsplit(" ", 1)[1])
        except OSError:
            pass
        return None

    try:
        for i in range(3):
            processes.append(start(i))
        time.sleep(3)  # an election; the client library retries until there is a leader
        sampler = Sampler([p.pid for p in processes])
        sampler.start()

        def load(container, count, workload="upsert1k", seconds=3600, targets=endpoints):
            command = [bench, "--endpoints", targets, "--workloads", workload, "--clients", str(args.clients),
                       "--seconds", str(seconds), "--max-requests", str(count), "--runs", "1", "--container",
                       container, "--ttl", "3600"]
            started = time.time()
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode != 0:
                sys.exit(f"load failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
            elapsed = time.time() - started
            rate = re.search(r"^\| upsert[^|]*\| *%d *\| *([0-9.]+) " % args.clients, done.stdout, re.M)
            print(f"{workload}: {container} in {elapsed:.1f} s"
                  + (f", {rate.group(1)} writes/s" if rate else f" ({count} requests at most)"), flush=True)
            for p in processes:
                if p.poll() is not None and p is not processes[2]:
                    sys.exit(f"a node exited (see {root})")
            return float(rate.group(1)) if rate else None

        sampler.phase = "first"
        load("m1", args.first)
        sampler.phase = "settle"
        time.sleep(args.settle_seconds)
        settle_end = time.time()
        sampler.phase = "second"
        load("m2", args.second)
        sampler.phase = "after"
        time.sleep(args.settle_seconds)
        catch_up = None
        if args.catch_up > 0:
            settled_all = [statistics.median([s[2][n] for s in sampler.samples[-10:] if s[2][n] is not None])
                           for n in range(3)]
            two = ",".join(f"127.0.0.1:{p}" for p in ports[:2])
            before = load("m3", 10**9, "upsert256", 10, two)
            processes[2].send_signal(signal.SIGTERM)
            processes[2].wait(timeout=30)
            subprocess.run(["rm", "-rf", os.path.join(root, "node3")], check=True)
            target = max(filter(None, [gauge(0, "mayfly_raft_commit_index"), gauge(1, "mayfly_raft_commit_index")]))
            restarted = time.time()
            processes[2] = start(2, "a")
            sampler.pids[2] = processes[2].pid
            sampler.phase = "catch-up"
            caught = {}

            def watch():
                while time.time() - restarted < 3600 and processes[2].poll() is None:
                    applied = gauge(2, "mayfly_raft_applied_index")
                    if applied is not None and applied >= target:
                        caught["seconds"] = time.time() - restarted
                        return
                    time.sleep(0.25)

            watcher = threading.Thread(target=watch, daemon=True)
            watcher.start()
            during = load("m3", 10**9, "upsert256", args.catch_up, two)
            watcher.join()
            sampler.phase = "caught-up"
            after = load("m3", 10**9, "upsert256", 10, two)
            catch_up = (settled_all, target, caught.get("seconds"), before, during, after)
        restarts = []
        if args.restart:
            for how in (signal.SIGTERM, signal.SIGKILL):
                target = max(filter(None, [gauge(0, "mayfly_raft_commit_index"), gauge(2, "mayfly_raft_commit_index")]))
                processes[1].send_signal(how)
                processes[1].wait(timeout=60)
                started = time.time()
                processes[1] = start(1, "a")
                sampler.pids[1] = processes[1].pid
                seconds = None
                while time.time() - started < 600 and processes[1].poll() is None:
                    applied = gauge(1, "mayfly_raft_applied_index")
                    if applied is not None and applied >= target:
                        seconds = time.time() - started
                        break
                    time.sleep(0.05)
                restarts.append((signal.Signals(how).name, target, seconds))
        backup_restore = None
        if args.backup_restore:
            cli = os.path.join(args.build, "client", "mayfly")
            backup_file = os.path.join(root, "backup.mfb")
            sampler.phase = "backup"
            started = time.time()
            done = subprocess.run([cli, "--endpoints", endpoints, "backup", "create", "--out", backup_file, "--node",
                                   "1"], capture_output=True, text=True, timeout=7200)
            backup_seconds = time.time() - started
            if done.returncode != 0:
                sys.exit(f"backup failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
            backup_index = int(re.search(r'"appliedIndex":\s*(\d+)', done.stdout).group(1))
            sampler.phase = "restore"
            restore_port = args.base_port + 20
            log = open(os.path.join(root, "restore.log"), "w")
            restoring = subprocess.Popen(
                [mayflyd, "--id", "1", "--listen", f"127.0.0.1:{restore_port}", "--peers",
                 f"1=127.0.0.1:{restore_port}", "--data", os.path.join(root, "restored"), "--metrics",
                 f"127.0.0.1:{restore_port + 1}", "--restore", backup_file, "--ttl", "preserve"],
                stdout=log, stderr=subprocess.STDOUT)
            started = time.time()
            peak = 0.0
            serving = None
            while time.time() - started < 7200 and restoring.poll() is None:
                peak = max(peak, rss_mb(restoring.pid) or 0.0)
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{restore_port + 1}/metrics", timeout=2) as r:
                        for line in r.read().decode().splitlines():
                            if line.startswith("mayfly_raft_applied_index") and float(line.rsplit(" ", 1)[1]) >= \
                                    backup_index:
                                serving = time.time() - started
                except OSError:
                    pass
                if serving is not None:
                    break
                time.sleep(0.2)
            restoring.send_signal(signal.SIGTERM)
            restoring.wait(timeout=60)
            backup_restore = (backup_index, os.path.getsize(backup_file), backup_seconds, serving, peak)
        sampler.stopping.set()
        sampler.join()

        def column(node, phases, since=None):
            return [s[2][node] for s in sampler.samples
                    if s[1] in phases and s[2][node] is not None and (since is None or s[0] >= since)]

        print()
        print(f"| node | peak while loading {args.first} (MB) | settled after it (MB) | peak while loading "
              f"{args.second} more, and after (MB) | peak − settled (MB) | end (MB) | snapshot exports |")
        print("|---|---|---|---|---|---|---|")
        worst = 0.0
        for node in range(3):
            settled = statistics.median(column(node, {"settle"}, since=settle_end - 5))
            peak_first = max(column(node, {"first"}))
            peak_second = max(column(node, {"second", "after"}))
            end = column(node, {"after"})[-1]
            with open(os.path.join(root, f"node{node + 1}.log")) as f:
                text = f.read()
            exports = text.count("exporting the state") + text.count("taking a snapshot")
            worst = max(worst, peak_second - settled)
            print(f"| {node + 1} | {peak_first:.0f} | {settled:.0f} | {peak_second:.0f} | {peak_second - settled:+.0f} | "
                  f"{end:.0f} | {exports} |")
        print(f"\nworst peak above the settled RSS: {worst:+.0f} MB (issue #31's bound: +128 MB)")
        for name, target, seconds in restarts:
            print(f"node 2 after {name}: started, opened and applied index {target:.0f} (the commit index when it "
                  f"stopped) in " + (f"{seconds:.2f} s" if seconds is not None else "NEVER (600 s)"))
        if catch_up:
            settled_all, target, seconds, before, during, after = catch_up
            print(f"\nnode 3 wiped and restarted: applied the leader's commit index at its restart ({target:.0f}) "
                  + (f"after {seconds:.1f} s" if seconds else "NEVER (within the run)"))
            print(f"256 B writes/s against nodes 1 and 2: before {before}, during {during}, after {after}")
            print("| node | settled before (MB) | peak during the catch-up (MB) | above settled (MB) |")
            print("|---|---|---|---|")
            for node in range(3):
                peak = max(column(node, {"catch-up", "caught-up"}))
                base = settled_all[node] if node < 2 else max(settled_all[:2])
                print(f"| {node + 1} | {base:.0f} | {peak:.0f} | {peak - base:+.0f} |")
        if backup_restore:
            index, size, backup_seconds, serving, peak = backup_restore
            settled_1 = statistics.median(column(0, {"after"})[-10:] or [0])
            peak_1 = max(column(0, {"backup"}) or [0])
            print(f"\nbackup of node 1 at index {index}: {size / 2**20:.0f} MB in {backup_seconds:.1f} s; node 1's RSS "
                  f"peaked at {peak_1:.0f} MB during it ({peak_1 - settled_1:+.0f} MB above its RSS before)")
            print("restored into a new one-node cluster (--ttl preserve): serving the restored index after "
                  + (f"{serving:.1f} s" if serving is not None else "NEVER (within 2 h)")
                  + f"; the restoring process's RSS peaked at {peak:.0f} MB")
    finally:
        for p in processes:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in processes:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if args.keep:
            print(f"data and logs kept in {root}")
        else:
            subprocess.run(["rm", "-rf", root])


if __name__ == "__main__":
    main()
