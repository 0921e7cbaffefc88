#!/usr/bin/env python3
"""A black-box fair-share run (issue #28) against `make run`'s cluster, as an outsider would attack it.

Start the cluster in one terminal (`make run`), then in another:

    python3 tests/blackbox/fair_share.py [--build-dir build] [--seconds 60]

While the attacks run, a readwrite client (the victim) upserts an item every 200 ms through each node in turn, and
every node's metrics are scraped once a second. The attackers hold a readonly key or no key at all:
  - readonly: two pathological LIKE / CONTAINS queries at a time on node 1 (finding 1);
  - readonly: session reads with a made-up token (2^64-1) at the leader and a follower, 16 at a time (finding 2);
  - readonly: 30 clients listing items in a loop on node 2;
  - no key: 1,100 silent TCP sockets on node 2's RPC port, reopened when closed (findings 7, 10);
  - no key: at the leader, two threads opening connections that send a few random bytes and close, two that send
    the Raft transport's peer preamble and then random bytes, and 200 silent sockets that sent only the preamble,
    reopened when closed (finding 10: Raft has a thread of its own, which takes 16 unproved connections at a time);
  - no key: 300 slow sockets on node 3's gateway, one byte every 2 s (finding 8);
  - no key: a half-sent request on every metrics port, reopened when closed (finding 9).
At the end it prints the victim's writes (ok / failed, with the first failures), the scrapes (answered / not), each
node's RSS before, at its peak and after, and each node's Raft term before and after, and exits 1 if any victim write
or scrape failed, a node's RSS grew by more than --rss-growth-mb, or a term moved (an election happened). Every loop is bounded by --seconds; every socket and process it opens is closed at the end.
Run it with nothing else loading the machine.
"""
import argparse
import base64
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
import urllib.request

RPC = [7101, 7102, 7103]
METRICS = [9101, 9102, 9103]
HTTP = [8081, 8082, 8083]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build-dir", default="build")
    p.add_argument("--data", default=None, help="the cluster's data directory (default BUILD/cluster-data)")
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--rss-growth-mb", type=float, default=512, help="fail when a node's RSS grows more than this")
    p.add_argument("--seed", type=int, default=None)
    return p.parse_args()


class Run:
    def __init__(self, args):
        self.args = args
        self.cli = os.path.join(args.build_dir, "client", "mayfly")
        data = args.data or os.path.join(args.build_dir, "cluster-data")
        self.secrets = os.path.join(data, "secrets")
        self.deadline = time.monotonic() + args.seconds
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.victim = {"ok": 0, "failed": 0, "first_failures": []}
        self.scrapes = {"ok": 0, "failed": 0, "first_failures": []}
        self.attacks = {}

    def mayfly(self, role, *argv, endpoint=None, timeout=30):
        env = dict(os.environ, MAYFLY_KEY_FILE=os.path.join(self.secrets, role + ".key"))
        if endpoint:
            env["MAYFLY_ENDPOINTS"] = endpoint
        try:
            out = subprocess.run([self.cli, "-o", "json", *argv], env=env, capture_output=True, text=True,
                                 timeout=timeout)
        except subprocess.TimeoutExpired:
            return None, "timed out after %d s" % timeout
        line = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""
        try:
            return json.loads(line), line
        except ValueError:
            return None, (out.stdout + out.stderr)[-300:]

    def count(self, name, n=1):
        with self.lock:
            self.attacks[name] = self.attacks.get(name, 0) + n

    def running(self):
        return not self.stop.is_set() and time.monotonic() < self.deadline


def leader_of(run):
    status, text = run.mayfly("admin", "cluster", "status")
    if not status:
        sys.exit("cluster status failed (is `make run` up?): " + text)
    leader = status.get("body", status).get("leader") if isinstance(status.get("body", status), dict) else None
    return int(leader) if leader else 1


def node_pids():
    """The mayflyd PIDs listening on the RPC ports, by port (from /proc, no extra tools)."""
    inodes = {}
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            parts = line.split()
            port = int(parts[1].split(":")[1], 16)
            if parts[3] == "0A" and port in RPC:
                inodes[parts[9]] = port
    pids = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            for fd in os.listdir("/proc/%s/fd" % pid):
                target = os.readlink("/proc/%s/fd/%s" % (pid, fd))
                if target.startswith("socket:[") and target[8:-1] in inodes:
                    pids[inodes[target[8:-1]]] = int(pid)
        except OSError:
            continue
    return pids


def rss_mb(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def victim(run):
    i = 0
    while run.running():
        node = i % 3
        i += 1
        body = json.dumps({"id": "v%d" % i, "pk": "victim", "n": i})
        result, text = run.mayfly("readwrite", "item", "upsert", "fairshare", "c", body,
                                  endpoint="127.0.0.1:%d" % RPC[node], timeout=15)
        ok = result is not None and int(result.get("status", 0)) < 300
        with run.lock:
            run.victim["ok" if ok else "failed"] += 1
            if not ok and len(run.victim["first_failures"]) < 5:
                run.victim["first_failures"].append("node %d: %s" % (node + 1, text[:300]))
        time.sleep(0.2)


def scraper(run):
    auth = os.path.join(run.secrets, "metrics-auth")
    headers = {}
    if os.path.exists(auth):
        headers["Authorization"] = "Basic " + base64.b64encode(open(auth).read().strip().encode()).decode()
    while run.running():
        for port in METRICS:
            try:
                request = urllib.request.Request("http://127.0.0.1:%d/metrics" % port, headers=headers)
                with urllib.request.urlopen(request, timeout=5) as answer:
                    answer.read()
                ok, why = True, ""
            except Exception as e:  # noqa: BLE001 - any failure is a failed scrape
                ok, why = False, str(e)
            with run.lock:
                run.scrapes["ok" if ok else "failed"] += 1
                if not ok and len(run.scrapes["first_failures"]) < 5:
                    run.scrapes["first_failures"].append("port %d: %s" % (port, why))
        time.sleep(1)


def like_attack(run):
    # A pattern of 20,000 `_` and a CONTAINS of a 100,000-character needle over the 1.9 MB item.
    pattern = "%" + "_" * 20000 + "x%"
    needle = "a" * 100000 + "b"
    while run.running():
        run.mayfly("readonly", "query", "fairshare", "big",
                   "SELECT c.id FROM c WHERE c.text LIKE @p OR CONTAINS(c.text, @n)",
                   "--param", "@p=" + json.dumps(pattern), "--param", "@n=" + json.dumps(needle),
                   endpoint="127.0.0.1:%d" % RPC[0], timeout=20)
        run.count("like queries")


def token_flood(run, node):
    while run.running():
        run.mayfly("readonly", "--session-token", str(2 ** 64 - 1), "item", "read", "fairshare", "c", "--pk",
                   "victim", "--id", "v1", endpoint="127.0.0.1:%d" % RPC[node], timeout=15)
        run.count("made-up token reads")


def sessions_hog(run):
    # 30 readonly clients listing items on node 2 in a loop, each a process of its own (a session each).
    procs = []
    env = dict(os.environ, MAYFLY_KEY_FILE=os.path.join(run.secrets, "readonly.key"),
               MAYFLY_ENDPOINTS="127.0.0.1:%d" % RPC[1])
    script = "while :; do %s -o json item list fairshare c --max-items 1 >/dev/null 2>&1; sleep 1; done" % run.cli
    for _ in range(30):
        procs.append(subprocess.Popen(["bash", "-c", script], env=env, start_new_session=True))
    run.count("readonly listing clients", len(procs))
    while run.running():
        time.sleep(0.5)
    for p in procs:
        os.killpg(p.pid, 15)
        p.wait()


def silent_sockets(run, port, count, name, trickle=False, first=b""):
    socks = []
    while run.running():
        while len(socks) < count and run.running():
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=2)
                if first:
                    s.send(first)
                if trickle:
                    s.send(b"G")
                socks.append(s)
                run.count(name)
            except OSError:
                time.sleep(0.05)
                break
        alive = []
        for s in socks:
            try:
                s.setblocking(False)
                if trickle:
                    s.send(b"E")
                data = s.recv(1, socket.MSG_PEEK)
                if data == b"":
                    s.close()
                    continue
            except BlockingIOError:
                pass
            except OSError:
                s.close()
                continue
            alive.append(s)
        socks = alive
        time.sleep(2 if trickle else 0.5)
    for s in socks:
        s.close()


PEER_PREAMBLE = b"\xf5mfR"  # common/peer_preamble.h


def connect_churn(run, port, preamble, name):
    """Connections that send a few random bytes (after the peer preamble, with `preamble`) and close, back to back."""
    while run.running():
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=2)
            s.send((PEER_PREAMBLE if preamble else b"") + random.randbytes(32))
            s.close()
            run.count(name)
        except OSError:
            time.sleep(0.01)


def terms(run):
    """Each node's Raft term, by node id, from `cluster status` (every "term" of an object with an "id")."""
    status, text = run.mayfly("admin", "cluster", "status")
    found = {}

    def walk(value):
        if isinstance(value, dict):
            if "id" in value and "term" in value:
                found[int(value["id"])] = int(value["term"])
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)
    walk(status)
    return found


def half_sent_metrics(run):
    socks = []
    while run.running():
        for port in METRICS:
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=2)
                s.send(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
                socks.append(s)
                run.count("half-sent metrics requests")
            except OSError:
                pass
        time.sleep(3)
        for s in socks:
            s.close()
        socks = []


def main():
    args = parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    random.seed(seed)
    print("fair-share black-box run, seed %d, %g s (python3 %s --seconds %g --seed %d)" % (
        seed, args.seconds, sys.argv[0], args.seconds, seed))
    run = Run(args)
    # Setup as the admin: a container for the victim and one with a 1.9 MB text item for the LIKE attack.
    run.mayfly("admin", "db", "create", "fairshare")
    run.mayfly("admin", "container", "create", "fairshare", "c", "--pk", "/pk")
    run.mayfly("admin", "container", "create", "fairshare", "big", "--pk", "/pk")
    big = json.dumps({"id": "big", "pk": "p", "text": "a" * 1_900_000})
    path = "/tmp/fairshare-big-%d.json" % os.getpid()
    with open(path, "w") as f:
        f.write(big)
    result, text = run.mayfly("admin", "item", "upsert", "fairshare", "big", "@" + path)
    os.unlink(path)
    if not result or int(result.get("status", 0)) >= 300:
        sys.exit("setup failed: " + text)
    leader = leader_of(run)
    follower = 1 + (leader % 3)
    terms_before = terms(run)
    pids = node_pids()
    before = {port: rss_mb(pid) for port, pid in pids.items()}
    peak = dict(before)
    print("leader node %d; RSS before: %s" % (leader, ", ".join("node %d %.0f MB" % (RPC.index(p) + 1, m)
                                                                 for p, m in sorted(before.items()))))
    run.deadline = time.monotonic() + args.seconds
    threads = [threading.Thread(target=victim, args=(run,)), threading.Thread(target=scraper, args=(run,)),
               threading.Thread(target=like_attack, args=(run,)), threading.Thread(target=like_attack, args=(run,)),
               threading.Thread(target=sessions_hog, args=(run,)),
               threading.Thread(target=silent_sockets, args=(run, RPC[1], 1100, "silent RPC sockets")),
               threading.Thread(target=silent_sockets, args=(run, HTTP[2], 300, "slow gateway sockets", True)),
               threading.Thread(target=half_sent_metrics, args=(run,)),
               threading.Thread(target=silent_sockets, args=(run, RPC[leader - 1], 200, "silent preamble sockets",
                                                             False, PEER_PREAMBLE))]
    for preamble in (False, True):
        for _ in range(2):
            threads.append(threading.Thread(target=connect_churn, args=(
                run, RPC[leader - 1], preamble, "preamble connections" if preamble else "churned connections")))
    for node in (leader - 1, follower - 1):
        for _ in range(8):
            threads.append(threading.Thread(target=token_flood, args=(run, node)))
    for t in threads:
        t.start()
    try:
        while any(t.is_alive() for t in threads):
            for port, pid in pids.items():
                peak[port] = max(peak[port], rss_mb(pid))
            time.sleep(0.5)
    except KeyboardInterrupt:
        run.stop.set()
    for t in threads:
        t.join()
    time.sleep(2)
    after = {port: rss_mb(pid) for port, pid in pids.items()}
    print("attacks:", ", ".join("%s %d" % kv for kv in sorted(run.attacks.items())))
    print("victim writes: %d ok, %d failed %s" % (run.victim["ok"], run.victim["failed"], run.victim["first_failures"]))
    print("scrapes: %d answered, %d not %s" % (run.scrapes["ok"], run.scrapes["failed"], run.scrapes["first_failures"]))
    worst = 0.0
    for port in sorted(pids):
        growth = peak[port] - before[port]
        worst = max(worst, growth)
        print("node %d RSS: %.0f MB before, %.0f MB peak (+%.0f), %.0f MB after" % (
            RPC.index(port) + 1, before[port], peak[port], growth, after[port]))
    terms_after = terms(run)
    print("terms before: %s, after: %s" % (terms_before, terms_after))
    moved = not terms_before or terms_before != terms_after
    failed = run.victim["failed"] > 0 or run.scrapes["failed"] > 0 or worst > args.rss_growth_mb or moved
    print("RESULT:", "FAIL" if failed else "PASS")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
