#!/usr/bin/python3
"""make bench-compare: etcd 3.4, Redis 7 and Mayfly side by side on this machine, in one run (bench/compare/README.md).

Every system runs 3 processes on 127.0.0.1 with fsync on every write, 256 B values, closed-loop clients:
  etcd   3 members (etcd-server), driven by mayfly-compare-load (Go, etcd's clientv3 from golang-etcd-server-dev)
  Redis  1 primary + 2 replicas, appendonly yes, appendfsync always; SET + WAIT 2 (mayfly-compare-load, redigo)
  Mayfly 3 mayflyd started by build/bench/mayfly-bench --start-cluster
Rounds interleave the systems (round 1: etcd, Redis, Mayfly; round 2 the other way round, ...), each system on fresh
data every round. Prints one markdown table (ops/s median (min-max) over rounds, p99, ratios per round and overall),
the CPU each side used, the machine, the versions and the command.

Every process this script starts is stopped by its PID at the end, on an error and on Ctrl-C (SIGINT/SIGTERM);
and every child gets SIGTERM from the kernel if this script dies first (PR_SET_PDEATHSIG).
"""
import argparse
import ctypes
import datetime
import json
import os
import platform
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
GOCODE = "/usr/share/gocode"

# ---- what is measured -----------------------------------------------------------------------------------------------
# A row compares the same client count across systems. `etcd`, `redis`, `mayfly` name each system's workload in its
# own tool (None: that system has no such row).
ROWS = [
    # key, label, what each system does,                                                     etcd, redis, mayfly
    ("write", "write 256 B",
     "etcd put · Redis SET + WAIT 2 (both replicas acked) · Mayfly upsert of an item with its own ttl",
     "put", "set+wait2", "upsert256"),
    ("lease", "write 256 B that expires",
     "etcd lease grant + put with that lease (one lease per key: etcd's only per-key expiry) · Mayfly upsert with "
     "its own ttl (the same Mayfly figures as the row above)",
     "lease-put", None, "upsert256"),
    ("strong", "read, linearizable",
     "etcd get (linearizable, its default) · Mayfly point read at strong consistency; of 2000 keys/items of 256 B "
     "written first, picked at random", "get-linearizable", None, "strong"),
    ("session", "read, local",
     "etcd get with WithSerializable (served by the member that gets it) · Mayfly point read at session "
     "consistency; same data as above", "get-serializable", None, "session"),
    ("feed", "write 256 B, Mayfly change feed on",
     "Mayfly upsert of an item with its own ttl into a container created with its change feed on (mode all: each "
     "write also keeps its images and a time index entry), the Mayfly row of \"write 256 B\" with the feed on; "
     "etcd and Redis have no such row (Mayfly/etcd and Mayfly/Redis compare with their plain writes)",
     None, None, "upsert256-feed"),
]
FULL_POINTS = {"write": [1, 50, 1000], "lease": [50, 1000], "strong": [1000], "session": [1000], "feed": [50]}
QUICK_POINTS = {"write": [1, 50], "lease": [50], "strong": [50], "session": [50], "feed": [50]}
# Rows whose etcd and Redis cells (and ratios) come from another row: the same operation without Mayfly's extra.
COMPARE_WITH = {"feed": "write"}

MAYFLY_LABELS = {  # mayfly-bench's table labels
    "upsert 256 B item, own ttl": "upsert256",
    "point read, strong": "strong",
    "point read, session": "session",
}


def log(message):
    print(f"bench-compare: {message}", file=sys.stderr, flush=True)


class Failure(Exception):
    pass


# ---- processes, by PID ----------------------------------------------------------------------------------------------
_libc = ctypes.CDLL("libc.so.6", use_errno=True)


def _die_with_parent():
    # PR_SET_PDEATHSIG: SIGTERM when this script dies, so nothing outlives it (mayfly-bench then stops its mayflyd).
    _libc.prctl(1, signal.SIGTERM)


class Processes:
    """Every process this script started; stop() ends them by PID (SIGTERM, then SIGKILL after a grace period)."""

    def __init__(self):
        self.running = []  # (name, Popen)

    def start(self, name, argv, log_path):
        out = open(log_path, "ab")
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                preexec_fn=_die_with_parent)
        out.close()
        self.running.append((name, proc))
        return proc

    def stop(self, procs=None, grace=15):
        targets = [(n, p) for n, p in self.running if procs is None or p in procs]
        for _, proc in targets:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        for name, proc in targets:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log(f"{name} (pid {proc.pid}) did not stop after SIGTERM; SIGKILL")
                proc.kill()
                proc.wait()
        self.running = [(n, p) for n, p in self.running if (n, p) not in targets]


def run_tool(processes, name, argv, log_path, timeout):
    """Runs a load tool to completion (bounded by `timeout`), returns its stdout; its stderr goes to log_path."""
    with open(log_path, "ab") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL,
                                preexec_fn=_die_with_parent)
    processes.running.append((name, proc))
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        processes.stop([proc])
        raise Failure(f"{name} did not finish within {timeout:.0f} s (log: {log_path})")
    processes.running = [(n, p) for n, p in processes.running if p is not proc]
    if proc.returncode != 0:
        raise Failure(f"{name} exited with {proc.returncode} (log: {log_path}):\n{tail(log_path)}")
    return out.decode()


def tail(path, lines=15):
    try:
        with open(path, "rb") as f:
            return "\n".join(f.read().decode(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def cpu_seconds(pid):
    """utime + stime of a process (all its threads), from /proc; 0 if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def check_ports_free(ports):
    for port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                raise Failure(f"port {port} on 127.0.0.1 is in use; choose another --base-port")


# ---- the systems ----------------------------------------------------------------------------------------------------
class Settings:
    def __init__(self, args, workdir, load_tool):
        self.args = args
        self.workdir = workdir
        self.load_tool = load_tool
        self.seconds = args.seconds
        self.max_ops = int(args.seconds * 200000)  # far above any rate here: the time bound is the one that acts
        self.base = args.base_port


def measure_point(processes, settings, server_pids, name, argv, log_path):
    before = {pid: cpu_seconds(pid) for pid in server_pids}
    started = time.monotonic()
    out = run_tool(processes, name, argv, log_path, timeout=settings.seconds + 180)
    wall = time.monotonic() - started
    result = json.loads(out.strip().splitlines()[-1])
    used = sum(cpu_seconds(pid) - before[pid] for pid in server_pids)
    # CPU in % of one core over the whole invocation (for gets: the preload included, which is short).
    result["server_cpu_pct"] = 100.0 * used / max(wall, 1e-9)
    result["tool_cpu_pct"] = 100.0 * result.get("load_tool_cpu_s", 0.0) / max(result.get("wall_s", 0.0), 1e-9)
    return result


def run_etcd(processes, settings, round_no, points, results):
    base = settings.base
    client_ports = [base + i for i in range(3)]
    peer_ports = [base + 10 + i for i in range(3)]
    check_ports_free(client_ports + peer_ports)
    cluster = ",".join(f"m{i + 1}=http://127.0.0.1:{peer_ports[i]}" for i in range(3))
    procs = []
    rdir = os.path.join(settings.workdir, f"etcd-round{round_no}")
    os.makedirs(rdir)
    for i in range(3):
        argv = ["etcd", "--name", f"m{i + 1}", "--data-dir", os.path.join(rdir, f"m{i + 1}"),
                "--listen-client-urls", f"http://127.0.0.1:{client_ports[i]}",
                "--advertise-client-urls", f"http://127.0.0.1:{client_ports[i]}",
                "--listen-peer-urls", f"http://127.0.0.1:{peer_ports[i]}",
                "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer_ports[i]}",
                "--initial-cluster", cluster, "--initial-cluster-state", "new",
                "--initial-cluster-token", f"mayfly-bench-compare-{os.getpid()}-{round_no}",
                "--logger", "zap", "--log-outputs", "stderr"]
        procs.append(processes.start(f"etcd m{i + 1}", argv, os.path.join(rdir, f"m{i + 1}.log")))
    try:
        endpoints = ",".join(f"http://127.0.0.1:{p}" for p in client_ports)
        leader = run_tool(processes, "etcd-wait", [settings.load_tool, "etcd-wait", "--endpoints", endpoints],
                          os.path.join(rdir, "load.log"), timeout=60).strip()
        log(f"round {round_no}: etcd cluster up, leader {leader}")
        for key, _, _, workload, _, _ in ROWS:
            if workload is None:  # a Mayfly-only row
                continue
            for clients in points.get(key, []):
                for proc in procs:
                    if proc.poll() is not None:
                        raise Failure(f"an etcd member exited ({proc.returncode}); logs in {rdir}")
                argv = [settings.load_tool, "etcd", "--endpoints", endpoints, "--workload", workload,
                        "--clients", str(clients), "--seconds", str(settings.seconds),
                        "--max-ops", str(settings.max_ops), "--value-size", "256",
                        "--writes-to", settings.args.etcd_writes]
                r = measure_point(processes, settings, [p.pid for p in procs], f"etcd {workload}", argv,
                                  os.path.join(rdir, "load.log"))
                log(f"round {round_no}: etcd {workload} {clients} clients: {r['ops_per_s']:.0f} ops/s, "
                    f"p99 {r['p99_ms']:.1f} ms, errors {r['errors']}")
                results.append(dict(r, system="etcd", row=key, round=round_no))
    finally:
        processes.stop(procs)


def run_redis(processes, settings, round_no, points, results):
    clients_list = points.get("write", [])
    if not clients_list:
        return
    ports = [settings.base + 20 + i for i in range(3)]
    check_ports_free(ports)
    rdir = os.path.join(settings.workdir, f"redis-round{round_no}")
    procs = []
    for i in range(3):
        ddir = os.path.join(rdir, f"r{i + 1}")
        os.makedirs(ddir)
        argv = ["redis-server", "--port", str(ports[i]), "--bind", "127.0.0.1", "--dir", ddir,
                "--daemonize", "no", "--appendonly", "yes", "--appendfsync", "always", "--save", "",
                "--repl-diskless-sync-delay", "0"]
        if i > 0:
            argv += ["--replicaof", "127.0.0.1", str(ports[0])]
        procs.append(processes.start(f"redis r{i + 1}", argv, os.path.join(rdir, f"r{i + 1}.log")))
    try:
        primary = f"127.0.0.1:{ports[0]}"
        run_tool(processes, "redis-wait", [settings.load_tool, "redis-wait", "--addr", primary, "--replicas", "2"],
                 os.path.join(rdir, "load.log"), timeout=60)
        log(f"round {round_no}: redis primary + 2 replicas up")
        for clients in clients_list:
            for proc in procs:
                if proc.poll() is not None:
                    raise Failure(f"a redis-server exited ({proc.returncode}); logs in {rdir}")
            argv = [settings.load_tool, "redis", "--addr", primary, "--clients", str(clients),
                    "--seconds", str(settings.seconds), "--max-ops", str(settings.max_ops), "--value-size", "256",
                    "--replicas", "2", "--wait-timeout-ms", "1000"]
            r = measure_point(processes, settings, [p.pid for p in procs], "redis set+wait2", argv,
                              os.path.join(rdir, "load.log"))
            log(f"round {round_no}: redis SET+WAIT 2 {clients} clients: {r['ops_per_s']:.0f} ops/s, "
                f"p99 {r['p99_ms']:.1f} ms, errors {r['errors']}")
            results.append(dict(r, system="redis", row="write", round=round_no))
    finally:
        processes.stop(procs)


def parse_mayfly(text):
    """mayfly-bench's two tables: {(workload, clients): {...}}."""
    points = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and cells[0] in MAYFLY_LABELS and cells[1].isdigit():
            errors = 0 if cells[5] == "0" else sum(int(n) for n in re.findall(r"(\d+) ×", cells[5]))
            points[(MAYFLY_LABELS[cells[0]], int(cells[1]))] = {
                "ops_per_s": float(cells[2]), "p50_ms": float(cells[3]), "p99_ms": float(cells[4]),
                "errors": errors, "error_text": cells[5]}
        elif len(cells) == 7 and cells[0] in MAYFLY_LABELS and cells[1].isdigit():
            p = points.get((MAYFLY_LABELS[cells[0]], int(cells[1])))
            if p is not None:
                p["tool_cpu_pct"] = float(cells[3])
                p["server_cpu_pct"] = float(cells[4]) + float(cells[6])  # leader + followers
    return points


def run_mayfly(processes, settings, round_no, points, results):
    bench = os.path.join(settings.args.build_dir, "bench", "mayfly-bench")
    rdir = os.path.join(settings.workdir, f"mayfly-round{round_no}")
    os.makedirs(rdir)
    # Writes at every client count, then reads (of 2000 items of 256 B written first) at theirs; one fresh
    # cluster per invocation. The same upsert figures serve the plain-write and the expiring-write rows.
    write_clients = sorted(set(points.get("write", []) + points.get("lease", [])))
    invocations = []  # (workloads, clients, extra flags, row suffix for the parsed workloads)
    if write_clients:
        invocations.append(("upsert256", write_clients, [], ""))
    read_sets = {}
    for key in ("strong", "session"):
        for clients in points.get(key, []):
            read_sets.setdefault(clients, []).append(key)
    for clients, workloads in sorted(read_sets.items()):
        invocations.append((",".join(workloads), [clients], [], ""))
    # The same upserts into a container whose change feed is on, on a fresh cluster of its own: the feed's cost on the
    # write path, next to the plain row of this round.
    if points.get("feed"):
        invocations.append(("upsert256", points["feed"], ["--change-feed", "on"], "-feed"))
    for n, (workloads, clients, extra, suffix) in enumerate(invocations):
        port = settings.base + 30
        check_ports_free([port, port + 1, port + 2])
        argv = [bench, "--start-cluster", "--base-port", str(port), "--seconds", str(settings.seconds),
                "--runs", "1", "--max-requests", str(settings.max_ops), "--clients", ",".join(map(str, clients)),
                "--workloads", workloads, "--preload", "upsert256"] + extra
        # mayfly-bench stops its own mayflyd on SIGTERM (which is what it gets from stop() and PDEATHSIG).
        log_path = os.path.join(rdir, f"bench-{n}.log")
        out = run_tool(processes, "mayfly-bench", argv, log_path,
                       timeout=len(clients) * len(workloads.split(",")) * (settings.seconds + 30) + 120)
        with open(os.path.join(rdir, f"bench-{n}.out"), "w") as f:
            f.write(out)
        parsed = parse_mayfly(out)
        for workload in workloads.split(","):
            for c in clients:
                if (workload, c) not in parsed:
                    raise Failure(f"mayfly-bench printed no {workload} row for {c} clients:\n{out}")
                r = parsed[(workload, c)]
                log(f"round {round_no}: mayfly {workload}{suffix} {c} clients: {r['ops_per_s']:.0f} ops/s, "
                    f"p99 {r['p99_ms']:.1f} ms, errors {r['error_text']}")
                for key, _, _, _, _, mayfly_workload in ROWS:
                    if mayfly_workload == workload + suffix and c in points.get(key, []):
                        results.append(dict(r, system="mayfly", row=key, clients=c, round=round_no))


# ---- Mayfly only: issue #14's TTL targets (3-5) ----------------------------------------------------------------------
def _table_rows(text, header_start):
    """The data rows of the markdown table whose header line starts with `header_start`, as lists of cells."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(header_start):
            rows = []
            for row in lines[i + 2:]:
                if not row.startswith("|"):
                    break
                rows.append([cell.strip() for cell in row.strip().strip("|").split("|")])
            return rows
    return []


def parse_gc_bench(text):
    """mayfly-gc-bench's mass, lateness and foreground figures."""
    out = {}
    mass = _table_rows(text, "| node | invisible after E")
    if mass:
        out["drain"] = [float(r[5]) for r in mass]        # N / (reclaimed - invisible), per node
        out["deleting"] = [float(r[6]) for r in mass]     # N / (all deleted - first delete), per node
        out["reclaimed_s"] = [float(r[4]) for r in mass]
    for r in _table_rows(text, "| load | items expiring"):
        p99 = [float(x) for x in r[5].split(" / ")]
        out["lateness_loaded" if r[0].startswith("50 in-flight") else "lateness_idle"] = p99
    m = re.search(r"p99\(draining\) / p99\(idle, no backlog\): writes ([\d.]+)×, reads ([\d.]+)×; "
                  r"p99\(draining\) / p99\(idle, after the drain\): writes ([\d.]+)×, reads ([\d.]+)×", text)
    if m:
        out["foreground"] = [float(x) for x in m.groups()]
    return out


def run_ttl_targets(processes, settings):
    """mayfly-gc-bench, once: mass expiry of 100,000 items and expiry lateness (idle, under load) with the default
    flags; with --gc-foreground also the foreground phase over a 300,000-item backlog."""
    bench = os.path.join(settings.args.build_dir, "bench", "mayfly-gc-bench")
    phases = "mass,lateness" + (",foreground" if settings.args.gc_foreground else "")
    port = settings.base + 40
    check_ports_free(list(range(port, port + 6)))
    argv = [bench, "--phases", phases, "--runs", "1", "--mass-items", "100000", "--backlog-items", "300000",
            "--lateness-seconds", str(settings.args.lateness_seconds), "--base-port", str(port)]
    log(f"mayfly-gc-bench {' '.join(argv[1:])}")
    log_path = os.path.join(settings.workdir, "gc-bench.log")
    out = run_tool(processes, "mayfly-gc-bench", argv, log_path, timeout=1800)
    with open(os.path.join(settings.workdir, "gc-bench.out"), "w") as f:
        f.write(out)
    parsed = parse_gc_bench(out)
    parsed["command"] = "build/bench/mayfly-gc-bench " + " ".join(argv[1:])
    return parsed


def _median_ops(results, system, row, clients):
    values = [x["ops_per_s"] for x in results if x["system"] == system and x["row"] == row and x["clients"] == clients]
    return statistics.median(values) if values else None


def targets_report(results, ttl):
    """Issue #14's targets, each with its figure from this run and whether it is met."""
    lines = ["", "### Issue #14's targets in this run", "",
             "| target | goal | measured | met |", "|---|---|---|---|"]

    def ratio_row(name, goal, at_least, system, row, clients):
        mayfly, other = _median_ops(results, "mayfly", row, clients), _median_ops(results, system, row, clients)
        if mayfly is None or other is None:
            lines.append(f"| {name} | {goal} | not measured in this run | — |")
            return
        r = mayfly / other
        lines.append(f"| {name} | {goal} | {r:.2f}× ({mayfly:,.0f} / {other:,.0f} ops/s) | "
                     f"{'yes' if r >= at_least else 'no'} |")

    for clients in (50, 1000):
        ratio_row(f"1. durable 256 B writes, {clients} clients", "≥ 3× etcd puts", 3, "etcd", "write", clients)
    ratio_row("1. durable 256 B writes, 50 clients", "≥ Redis SET + WAIT 2", 1, "redis", "write", 50)
    ratio_row("2. session reads, 1000 clients", "≥ 3× etcd serializable gets", 3, "etcd", "session", 1000)
    ratio_row("2. strong reads, 1000 clients", "≥ 3× etcd linearizable gets", 3, "etcd", "strong", 1000)
    if ttl is None:
        lines.append("| 3–5. expiry lateness, mass reclaim, GC and foreground p99 | | not run (`--no-ttl-targets`) | — |")
        return lines
    for key, what in (("lateness_idle", "idle"), ("lateness_loaded", "under 50 in-flight upserts")):
        p99 = ttl.get(key)
        if p99:
            lines.append(f"| 3. expiry lateness p99 per replica, {what} | ≤ 5 ms on every replica | "
                         f"{' / '.join(f'{x:.1f}' for x in p99)} ms | {'yes' if max(p99) <= 5 else 'no'} |")
    if ttl.get("deleting"):
        low = min(ttl["deleting"])
        lines.append(f"| 4. mass reclaim, defaults, 100,000 items | ≥ 100,000 items/s per node | "
                     f"{' / '.join(f'{x:,.0f}' for x in ttl['deleting'])} items/s deleting "
                     f"({' / '.join(f'{x:,.0f}' for x in ttl['drain'])} to backlog 0) | "
                     f"{'yes' if low >= 100000 else 'no'} |")
    fg = ttl.get("foreground")
    if fg:
        lines.append(f"| 5. foreground p99, 300,000 expired draining, 50 + 50 clients | ≤ 1.1× idle | writes "
                     f"{fg[0]:.2f}×, reads {fg[1]:.2f}× the windows before the backlog; {fg[2]:.2f}× / {fg[3]:.2f}× "
                     f"the windows after the drain | {'yes' if max(fg[0], fg[1]) <= 1.1 else 'no'} |")
    else:
        lines.append("| 5. foreground p99 with a backlog draining | ≤ 1.1× idle | not run (add `--gc-foreground`, "
                     "~5 min) | — |")
    lines += ["", f"Targets 3–5: `{ttl['command']}` (fresh 3-node clusters, default flags; docs/benchmarks.md, \"Garbage "
              "collection\" explains each figure)."]
    return lines


# ---- the report -----------------------------------------------------------------------------------------------------
def fmt_ops(values):
    values = sorted(values)
    med = statistics.median(values)
    if len(values) == 1:
        return f"{med:,.0f}"
    return f"{med:,.0f} ({values[0]:,.0f}–{values[-1]:,.0f})"


def fmt_ms(values):
    values = sorted(values)
    med = statistics.median(values)
    if len(values) == 1:
        return f"{med:.1f}"
    return f"{med:.1f} ({values[0]:.1f}–{values[-1]:.1f})"


def fmt_ratio(mayfly, other, rounds):
    per_round = []
    for r in rounds:
        m = [x["ops_per_s"] for x in mayfly if x["round"] == r]
        o = [x["ops_per_s"] for x in other if x["round"] == r]
        if m and o and o[0] > 0:
            per_round.append(f"{m[0] / o[0]:.2f}")
        else:
            per_round.append("—")
    mo = [x["ops_per_s"] for x in mayfly]
    oo = [x["ops_per_s"] for x in other]
    if not mo or not oo or statistics.median(oo) <= 0:
        return "—", "—"
    return " / ".join(per_round), f"**{statistics.median(mo) / statistics.median(oo):.2f}×**"


def version(argv, pattern=None):
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    line = out.strip().splitlines()[0] if out.strip() else "?"
    if pattern:
        m = re.search(pattern, out)
        return m.group(1) if m else line
    return line


def report(args, results, rounds, points, command, started, finished, load_start, load_end, ttl=None):
    lines = []
    add = lines.append
    add(f"## Mayfly vs etcd vs Redis — `make bench-compare`, {started:%Y-%m-%d %H:%M} UTC")
    add("")
    add(f"{len(rounds)} round(s) of {args.seconds:g} s per point, systems interleaved per round; ops/s = successful "
        "operations per second, median over rounds (min–max); p99 ms over every sample of a run, median over "
        "rounds (min–max); Mayfly/X = Mayfly's ops/s over X's, per round (round 1 / round 2 / ...) and of the "
        "medians (bold).")
    add("")
    add("| what | clients | etcd ops/s | etcd p99 ms | Redis ops/s | Redis p99 ms | Mayfly ops/s | Mayfly p99 ms "
        "| Mayfly/etcd per round | Mayfly/etcd | Mayfly/Redis per round | Mayfly/Redis |")
    add("|---|---|---|---|---|---|---|---|---|---|---|---|")
    cpu_lines = []
    error_notes = []
    legend = []
    feed_notes = []
    for key, label, meaning, _, _, _ in ROWS:
        if points.get(key):
            legend.append(f"- *{label}*: {meaning}")
        for clients in points.get(key, []):
            other_key = COMPARE_WITH.get(key, key)
            by = {s: [x for x in results if x["system"] == s and x["row"] == (key if s == "mayfly" else other_key)
                      and x["clients"] == clients]
                  for s in ("etcd", "redis", "mayfly")}
            if other_key != key:
                plain = [x for x in results if x["system"] == "mayfly" and x["row"] == other_key
                         and x["clients"] == clients]
                per_round, overall = fmt_ratio(by["mayfly"], plain, rounds)
                if overall != "—":
                    plain_label = next(r[1] for r in ROWS if r[0] == other_key)
                    feed_notes.append(f"- Mayfly \"{label}\" / \"{plain_label}\", {clients} clients: {overall} "
                                      f"(per round {per_round}; both on fresh clusters in the same round)")
            cells = []
            for s in ("etcd", "redis", "mayfly"):
                if by[s]:
                    cells += [fmt_ops([x["ops_per_s"] for x in by[s]]), fmt_ms([x["p99_ms"] for x in by[s]])]
                else:
                    cells += ["—", "—"]
            re_, ro = fmt_ratio(by["mayfly"], by["etcd"], rounds)
            rr, rro = fmt_ratio(by["mayfly"], by["redis"], rounds)
            if other_key != key:  # the etcd and Redis figures (CPU, errors) of the row compared with are not repeated
                cells[:4] = ["—"] * 4
                by = dict(by, etcd=[], redis=[])
            add(f"| {label} | {clients} | " + " | ".join(cells) + f" | {re_} | {ro} | {rr} | {rro} |")
            cpu = []
            for s in ("etcd", "redis", "mayfly"):
                if by[s] and all("server_cpu_pct" in x for x in by[s]):
                    cpu.append(f"{statistics.median(x['server_cpu_pct'] for x in by[s]):.0f} / "
                               f"{statistics.median(x.get('tool_cpu_pct', 0) for x in by[s]):.0f}")
                else:
                    cpu.append("—")
            cpu_lines.append(f"| {label} | {clients} | " + " | ".join(cpu) + " |")
            for s in ("etcd", "redis", "mayfly"):
                for x in by[s]:
                    if x["errors"]:
                        kinds = x.get("error_kinds") or x.get("error_text")
                        error_notes.append(f"- {s}, {label}, {clients} clients, round {x['round']}: "
                                           f"{x['errors']} errors of {x.get('issued', '?')} requests: {kinds}")
    add("")
    lines += legend
    if feed_notes:
        add("")
        lines += feed_notes
    add("")
    add("CPU during each point, in % of one core (median over rounds): the 3 server processes together / the load "
        "tool. etcd and Redis: the whole load-tool invocation (for gets, the preload of 2000 keys included); "
        "Mayfly: mayfly-bench's own CPU table (leader + followers / bench).")
    add("")
    add("| what | clients | etcd servers / tool | Redis servers / tool | Mayfly servers / tool |")
    add("|---|---|---|---|---|")
    lines += cpu_lines
    add("")
    if error_notes:
        add("Errors (counted, not in ops/s; in the latency samples):")
        lines += error_notes
    else:
        add("Errors: none in any run.")
    add("")
    try:
        cpu_model = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                         if line.startswith("model name"))
    except (OSError, StopIteration):
        cpu_model = "?"
    commit = subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"], capture_output=True,
                            text=True).stdout.strip() or "?"
    add(f"- date: {started:%Y-%m-%d %H:%M:%S} – {finished:%H:%M:%S} UTC")
    add(f"- machine: {os.cpu_count()} CPUs ({cpu_model}), kernel {platform.release()}, "
        f"load average {load_start} at the start, {load_end} at the end")
    etcd_version = version(["etcd", "--version"], r"etcd Version: (\S+)")
    client_version = version(["dpkg-query", "-W", "-f=${Version}", "golang-etcd-server-dev"])
    go_version = version(["go", "version"], r"go version (\S+)")
    redis_version = version(["redis-server", "--version"], r"v=(\S+)")
    add(f"- etcd {etcd_version} (Debian etcd-server), 3 members, default settings (fsync per write); load: "
        f"mayfly-compare-load with clientv3 from golang-etcd-server-dev {client_version}, {go_version}; writes sent "
        f"to {'the leader' if args.etcd_writes == 'leader' else 'every member (followers forward)'}, gets spread "
        "over the members; min(clients, 4) clientv3 clients")
    add(f"- Redis {redis_version} (Debian redis-server): primary + 2 "
        "replicas, appendonly yes, appendfsync always on all three, RDB snapshots off (save \"\"); one connection "
        "per client, SET + WAIT 2 1000 pipelined, counted only when WAIT reports both replicas")
    add(f"- Mayfly {commit}: build/bench/mayfly-bench --start-cluster (3 mayflyd, fsync on; N clients = N requests "
        "in flight over min(N, 4) connections from one thread); items of 256 B with their own ttl; reads of 2000 "
        "items written first" + ("; the change feed row: the same upserts into a container created with "
                                 "--change-feed on" if points.get("feed") else ""))
    add(f"- command: `{command}`")
    if "mayfly" in args.systems.split(","):
        lines += targets_report(results, ttl)
    return "\n".join(lines)


# ---- main -----------------------------------------------------------------------------------------------------------
def build_load_tool(build_dir):
    out_dir = os.path.join(build_dir, "bench-compare")
    os.makedirs(out_dir, exist_ok=True)
    binary = os.path.join(out_dir, "mayfly-compare-load")
    env = dict(os.environ, GO111MODULE="off", GOPATH=GOCODE, GOPROXY="off", GOFLAGS="",
               GOCACHE=os.path.join(out_dir, "gocache"))
    # Offline, GOPATH mode: every import resolves under Debian's /usr/share/gocode.
    subprocess.run(["go", "build", "-o", binary, "./bench/compare/loadtool"], cwd=REPO, env=env, check=True)
    return binary


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--quick", action="store_true", help="smoke run: 1 round, 3 s, 1 and 50 clients")
    parser.add_argument("--systems", default="etcd,redis,mayfly")
    parser.add_argument("--build-dir", default=os.path.join(REPO, "build"))
    parser.add_argument("--base-port", type=int, default=24100,
                        help="etcd P..P+2 (peers P+10..), Redis P+20..P+22, Mayfly P+30..P+32")
    parser.add_argument("--etcd-writes", choices=["leader", "all"], default="leader",
                        help="etcd puts and lease grants to the leader (default, as Mayfly's client does) or spread "
                             "over all members (clientv3's default with every endpoint; followers forward)")
    parser.add_argument("--out", help="also write the report here (default: BUILD/bench-compare/report-DATE.md)")
    parser.add_argument("--keep-data", action="store_true", help="keep the data and log directories")
    parser.add_argument("--no-ttl-targets", action="store_true",
                        help="skip mayfly-gc-bench (issue #14's targets 3-5: expiry lateness, mass reclaim)")
    parser.add_argument("--lateness-seconds", type=float, default=30,
                        help="mayfly-gc-bench --lateness-seconds (about this many expiry instants, minus 3)")
    parser.add_argument("--gc-foreground", action="store_true",
                        help="also target 5: foreground p99 over a 300,000-item backlog draining (~5 min more)")
    args = parser.parse_args()
    command = " ".join(shlex.quote(a) for a in ["bench/compare/run.py"] + sys.argv[1:])
    if os.environ.get("MAKELEVEL") and "BENCH_COMPARE_ARGS" in os.environ:  # run by `make bench-compare`
        make_args = os.environ["BENCH_COMPARE_ARGS"].strip()
        command = "make bench-compare" + (f" BENCH_COMPARE_ARGS={shlex.quote(make_args)}" if make_args else "") + \
            f" (ran {command})"
    if args.quick:
        args.rounds, args.seconds = 1, min(args.seconds, 3)
        args.lateness_seconds = min(args.lateness_seconds, 10)
    points = QUICK_POINTS if args.quick else FULL_POINTS
    systems = args.systems.split(",")
    if args.rounds < 1 or args.seconds <= 0 or not set(systems) <= {"etcd", "redis", "mayfly"}:
        parser.error("--rounds and --seconds must be positive; --systems among etcd,redis,mayfly")
    args.build_dir = os.path.abspath(args.build_dir)
    for tool in ("etcd", "redis-server", "go"):
        if shutil.which(tool) is None:
            raise SystemExit(f"bench-compare: {tool} not found: run bench/compare/install-deps.sh")
    if "mayfly" in systems and not os.access(os.path.join(args.build_dir, "bench", "mayfly-bench"), os.X_OK):
        raise SystemExit(f"bench-compare: {args.build_dir}/bench/mayfly-bench not built")

    processes = Processes()

    def on_signal(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    workdir = tempfile.mkdtemp(prefix="mayfly-bench-compare-")
    results = []
    started = datetime.datetime.now(datetime.timezone.utc)
    load_start = " ".join(open("/proc/loadavg").read().split()[:3])
    try:
        load_tool = build_load_tool(args.build_dir)
        settings = Settings(args, workdir, load_tool)
        runners = {"etcd": run_etcd, "redis": run_redis, "mayfly": run_mayfly}
        log(f"{args.rounds} round(s), {args.seconds:g} s per point, data and logs in {workdir}")
        for round_no in range(1, args.rounds + 1):
            order = systems if round_no % 2 == 1 else list(reversed(systems))
            for system in order:
                runners[system](processes, settings, round_no, points, results)
        ttl = None
        if "mayfly" in systems and not args.no_ttl_targets:
            ttl = run_ttl_targets(processes, settings)
    except KeyboardInterrupt:
        log("interrupted: stopping what was started")
        processes.stop()
        print(f"bench-compare: interrupted; data and logs in {workdir}", file=sys.stderr)
        return 130
    except (Failure, subprocess.CalledProcessError) as e:
        processes.stop()
        print(f"bench-compare: FAILED: {e}\ndata and logs kept in {workdir}", file=sys.stderr)
        return 1
    finally:
        processes.stop()
    finished = datetime.datetime.now(datetime.timezone.utc)
    load_end = " ".join(open("/proc/loadavg").read().split()[:3])
    text = report(args, results, list(range(1, args.rounds + 1)), points, command, started, finished, load_start,
                  load_end, ttl)
    print(text)
    out = args.out or os.path.join(args.build_dir, "bench-compare", f"report-{started:%Y%m%dT%H%M%S}.md")
    with open(out, "w") as f:
        f.write(text + "\n")
        f.write("\n<!-- raw results -->\n")
        for r in results:
            f.write(json.dumps(r) + "\n")
    log(f"report written to {out}")
    if not args.keep_data:
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        log(f"data and logs kept in {workdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
