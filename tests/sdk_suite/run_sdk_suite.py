#!/usr/bin/env python3
"""The `make sdk-suite` scorecard: the official azure-cosmos 4.17.1 Python SDK's own emulator test suite (the tests/
folder of its PyPI source distribution, unchanged) against a 3-node Mayfly cluster, one pytest run per test file,
then a table of passed / failed / errors / skipped / excluded per file and the totals (README.md beside this file).

    run_sdk_suite.py [--mayflyd PATH] [--cli PATH] [--build-dir DIR] [--files PATTERN] [--list-failures] [--keep]

The suite treats the account as its emulator only at exactly https://localhost:8081/, so node 1's gateway serves TLS
on 127.0.0.1:8081 (certificates from deploy/make-certs.sh; the SDK does not verify certificates of localhost); the
master key is base64 of the cluster's admin key. Standard library only (the SDK and pytest live in a venv under the
build directory). Only the PIDs started here are ever signalled; every wait is bounded."""
import argparse
import base64
import datetime
import fnmatch
import glob
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import time
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests"))
from free_ports import free_ports  # noqa: E402 - tests/free_ports.py, shared with the gateway and deploy tests

SDK_VERSION = "4.17.1"
SDIST = f"azure_cosmos-{SDK_VERSION}.tar.gz"
ACCOUNT_HOST = "https://localhost:8081/"  # test_config.py's emulator endpoint, exactly
GATEWAY_PORT = 8081
MAKE_CERTS = os.path.join(REPO, "deploy", "make-certs.sh")
REQUIREMENTS = os.path.join(HERE, "requirements.txt")
EXCLUSIONS = os.path.join(HERE, "exclusions.txt")

# Stand-in for devtools_testutils (the Azure SDK repository's test helpers, not published on PyPI) that the suite's
# test_config.py imports: is_live (a function whose `_cache` test_config sets: False for the emulator) and
# get_credential (AAD, only called when the host is not the emulator's). Nothing else of the suite uses it.
DEVTOOLS_SHIM = {
    "__init__.py": "",
    "helpers.py": '''import os


def is_live():
    cached = getattr(is_live, "_cache", None)
    if cached is not None:
        return cached
    return os.environ.get("AZURE_TEST_RUN_LIVE", "").lower() in ("1", "true", "yes")
''',
    "azure_recorded_testcase.py": '''def get_credential(**kwargs):
    raise RuntimeError("AAD credentials are not available here: the suite runs against the emulator endpoint "
                       "https://localhost:8081/ with the master key")
''',
}

# A pytest plugin (loaded with -p) that appends every report to a JSON-lines file at once: the results of a file whose
# pytest was stopped by the per-file timeout (no junit XML then), and the count of deselected (excluded) tests.
PLUGIN = '''import json
import os

_PATH = os.environ["SDK_SUITE_EVENTS"]


def _write(record):
    with open(_PATH, "a") as out:
        out.write(json.dumps(record) + "\\n")


def _first_line(report):
    text = str(report.longrepr or "")
    crash = getattr(getattr(report.longrepr, "reprcrash", None), "message", None)
    return (crash or text).strip().splitlines()[0][:400] if (crash or text).strip() else ""


def pytest_deselected(items):
    for item in items:
        _write({"event": "deselected", "nodeid": item.nodeid})


def pytest_collectreport(report):
    if report.failed:
        _write({"event": "report", "nodeid": report.nodeid, "when": "collect", "outcome": "failed",
                "message": _first_line(report)})


def pytest_runtest_logreport(report):
    _write({"event": "report", "nodeid": report.nodeid, "when": report.when, "outcome": report.outcome,
            "message": _first_line(report) if report.failed else ""})
'''

READY_SCRIPT = '''import sys, time
from azure.cosmos import CosmosClient
host, key, deadline = sys.argv[1], sys.argv[2], time.monotonic() + float(sys.argv[3])
last = None
while time.monotonic() < deadline:
    try:
        client = CosmosClient(host, key, connection_timeout=5)
        client.create_database_if_not_exists("sdk-suite-ready")
        client.delete_database("sdk-suite-ready")
        sys.exit(0)
    except Exception as error:  # the cluster may still be electing a leader
        last = error
        time.sleep(0.5)
print(f"not ready: {last!r}", file=sys.stderr)
sys.exit(1)
'''


def log(message):
    print(f"[sdk-suite] {message}", flush=True)


def run(argv, timeout, **kwargs):
    """subprocess.run in its own process group, the whole group killed when `timeout` runs out (only what we started)."""
    proc = subprocess.Popen(argv, start_new_session=True, **kwargs)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = proc.communicate(timeout=30)
        return subprocess.CompletedProcess(argv, None, out, err)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


# ----- the SDK's source distribution and the venv ------------------------------------------------------------------

def fetch_sdist(work, python):
    cache = os.path.join(work, "cache")
    os.makedirs(cache, exist_ok=True)
    path = os.path.join(cache, SDIST)
    if not os.path.exists(path):
        log(f"downloading the azure-cosmos {SDK_VERSION} source distribution into {cache}")
        done = run([python, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps",
                    "--no-binary", ":all:", f"azure-cosmos=={SDK_VERSION}", "-d", cache], timeout=600)
        if done.returncode != 0 or not os.path.exists(path):
            sys.exit(f"sdk-suite: pip download of azure-cosmos=={SDK_VERSION} failed (exit {done.returncode})")
    # Unpacked afresh on every run, so the suite is the published one, unchanged.
    src = os.path.join(work, "src")
    shutil.rmtree(src, ignore_errors=True)
    os.makedirs(src)
    with tarfile.open(path) as tar:
        tar.extractall(src, filter="data") if hasattr(tarfile, "data_filter") else tar.extractall(src)
    tests = os.path.join(src, f"azure_cosmos-{SDK_VERSION}", "tests")
    if not os.path.isdir(tests):
        sys.exit(f"sdk-suite: {SDIST} has no tests/ folder")
    return tests


def make_venv(work):
    venv = os.path.join(work, "venv")
    py = os.path.join(venv, "bin", "python")
    stamp = os.path.join(venv, ".requirements")
    with open(REQUIREMENTS) as f:
        wanted = f.read()
    current = open(stamp).read() if os.path.exists(stamp) else None
    if not os.access(py, os.X_OK) or current != wanted:
        log(f"making the venv {venv} ({REQUIREMENTS})")
        shutil.rmtree(venv, ignore_errors=True)
        base = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
        if run([base, "-m", "venv", venv], timeout=300).returncode != 0:
            sys.exit("sdk-suite: cannot make a venv (apt-get install python3-venv)")
        done = run([py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r", REQUIREMENTS],
                   timeout=1200)
        if done.returncode != 0:
            sys.exit(f"sdk-suite: pip install -r {REQUIREMENTS} failed (exit {done.returncode})")
        with open(stamp, "w") as f:
            f.write(wanted)
    support = os.path.join(work, "support")
    shutil.rmtree(support, ignore_errors=True)
    os.makedirs(os.path.join(support, "devtools_testutils"))
    for name, text in DEVTOOLS_SHIM.items():
        with open(os.path.join(support, "devtools_testutils", name), "w") as f:
            f.write(text)
    with open(os.path.join(support, "sdk_suite_events.py"), "w") as f:
        f.write(PLUGIN)
    return py, support


# ----- the cluster ---------------------------------------------------------------------------------------------------

def port_taken(port):
    s = socket.socket()
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        return False
    except OSError:
        return True
    finally:
        s.close()


class Cluster:
    """Three mayflyd nodes on 127.0.0.1 with keys, a cluster secret and TLS; node 1's gateway on 127.0.0.1:8081."""

    def __init__(self, mayflyd, cli, data_dir, nodes=3):
        self.dir, self.nodes, self.cli = data_dir, nodes, cli
        os.makedirs(self.dir, exist_ok=True)
        certs = os.path.join(self.dir, "certs")
        subprocess.run(["bash", MAKE_CERTS, certs, "node,localhost,127.0.0.1"], check=True, timeout=60,
                       stdout=subprocess.DEVNULL)
        self.ca_file = os.path.join(certs, "ca.crt")
        ports = [p for p in free_ports(2 * nodes + 2) if p != GATEWAY_PORT]
        self.rpc_ports = ports[:nodes]
        self.http_ports = [GATEWAY_PORT] + ports[nodes:2 * nodes - 1]
        # Mayfly keys; the Cosmos key of a Mayfly key K is base64(K). The suite creates databases: the admin key.
        self.keys = {role: secrets.token_urlsafe(32) for role in ("admin", "readwrite", "readonly")}
        keys_file = os.path.join(self.dir, "keys")
        with open(os.open(keys_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as out:
            for role, key in self.keys.items():
                out.write(f"{role} {key} sdk-suite-{role}\n")
        secret_file = os.path.join(self.dir, "cluster-secret")
        with open(os.open(secret_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as out:
            out.write(secrets.token_urlsafe(32) + "\n")
        peers = ",".join(f"{i + 1}=127.0.0.1:{p}" for i, p in enumerate(self.rpc_ports))
        self.procs = []
        for i in range(nodes):
            with open(os.path.join(self.dir, f"node{i + 1}.log"), "w") as node_log:
                argv = [mayflyd, "--id", str(i + 1), "--listen", f"127.0.0.1:{self.rpc_ports[i]}", "--peers", peers,
                        "--data", os.path.join(self.dir, f"node{i + 1}"), "--tick-ms", "10",
                        "--election-timeout-ticks", "30", "--heartbeat-ticks", "5",
                        "--http", f"127.0.0.1:{self.http_ports[i]}",
                        # As Cosmos DB: the suite deletes, recreates and deletes a database within one second, and
                        # the two deletes are signed alike (docs/operations.md, --http-replay-guard).
                        "--http-replay-guard=false",
                        "--tls-cert", os.path.join(certs, "node.crt"), "--tls-key", os.path.join(certs, "node.key"),
                        "--tls-ca", self.ca_file, "--keys-file", keys_file, "--cluster-secret-file", secret_file]
                self.procs.append(subprocess.Popen(argv, stdout=node_log, stderr=subprocess.STDOUT))

    @property
    def cosmos_key(self):
        return base64.b64encode(self.keys["admin"].encode()).decode()

    def alive(self):
        return all(p.poll() is None for p in self.procs)

    def wait_ready(self, venv_python, timeout_s=90):
        deadline = time.monotonic() + timeout_s
        for node, port in enumerate(self.http_ports, 1):
            while True:
                if not self.alive():
                    raise RuntimeError("a node exited while starting")
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"node {node}'s gateway did not listen on 127.0.0.1:{port} in {timeout_s} s")
                    time.sleep(0.1)
        left = max(5.0, deadline - time.monotonic())
        done = run([venv_python, "-c", READY_SCRIPT, ACCOUNT_HOST, self.cosmos_key, str(left)], timeout=left + 30,
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"no database create through {ACCOUNT_HOST}: {(done.stderr or '').strip()[-500:]}")

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)

    def print_logs(self, lines=40):
        for i in range(self.nodes):
            path = os.path.join(self.dir, f"node{i + 1}.log")
            with open(path, errors="replace") as f:
                tail = f.readlines()[-lines:]
            print(f"----- {path} (last {len(tail)} lines) -----")
            print("".join(tail))


# ----- exclusions, test files, results -----------------------------------------------------------------------------

def read_exclusions():
    """{entry: reason}: a test file (under tests/) or a pytest node id, each line `ENTRY  # reason`."""
    entries = {}
    with open(EXCLUSIONS) as f:
        for line in f:
            entry, _, reason = line.partition("#")
            entry = entry.strip()
            if entry:
                entries[entry] = reason.strip() or "(no reason given)"
    return entries


def test_files(tests_dir, pattern):
    # test_config.py is the suite's configuration module (no tests), not a test file.
    files = sorted(os.path.relpath(p, tests_dir)
                   for p in glob.glob(os.path.join(tests_dir, "**", "test_*.py"), recursive=True)
                   if os.path.basename(p) != "test_config.py")
    if pattern:
        files = [f for f in files if fnmatch.fnmatch(f, pattern) or fnmatch.fnmatch(os.path.basename(f), pattern)
                 or pattern in f]
    return files


def read_events(path):
    events = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                try:
                    events.append(json.loads(line))
                except ValueError:
                    pass  # a line cut by the timeout's kill
    return events


def outcome_from_junit(path, rel):
    """{node id: (outcome, message)} from a junit XML; outcome passed|failed|error|skipped."""
    results = {}
    module = rel[:-3].replace("/", ".")
    root = ET.parse(path).getroot()
    for case in root.iter("testcase"):
        classname = case.get("classname", "")
        inner = classname[len(module) + 1:] if classname.startswith(module + ".") else ""
        name = "::".join(part for part in (rel, inner, case.get("name", "")) if part)
        failure, error, skipped = case.find("failure"), case.find("error"), case.find("skipped")
        if failure is not None:
            outcome, node = "failed", failure
        elif error is not None:
            outcome, node = "error", error
        elif skipped is not None:
            outcome, node = "skipped", skipped
        else:
            outcome, node = "passed", None
        message = ""
        if node is not None:
            message = (node.get("message") or node.text or "").strip()
            message = message.splitlines()[0][:400] if message else ""
        results[name] = (outcome, message)
    return results


def outcome_from_events(events):
    """{nodeid: (outcome, message)} from the plugin's reports (a file stopped by the timeout has no junit XML)."""
    results = {}
    for e in events:
        if e.get("event") != "report":
            continue
        nodeid, when, outcome = e["nodeid"], e["when"], e["outcome"]
        prev = results.get(nodeid, ("passed", ""))
        if when == "collect":
            results[nodeid] = ("error", e.get("message", ""))
        elif when == "call":
            if prev[0] != "error":
                results[nodeid] = ({"passed": "passed", "failed": "failed", "skipped": "skipped"}[outcome],
                                   e.get("message", ""))
        elif outcome == "failed":  # setup or teardown
            results[nodeid] = ("error", e.get("message", ""))
        elif outcome == "skipped" and when == "setup":
            results[nodeid] = ("skipped", e.get("message", ""))
        elif nodeid not in results:
            results[nodeid] = prev
    return results


def run_file(py, support, tests_dir, results_dir, rel, exclusions, env, args):
    """One pytest run for one test file: returns a row dict."""
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", rel)
    junit = os.path.join(results_dir, stem + ".xml")
    events_path = os.path.join(results_dir, stem + ".events")
    out_path = os.path.join(results_dir, stem + ".log")
    row = {"file": rel, "passed": 0, "failed": 0, "errors": 0, "skipped": 0, "excluded": 0, "note": "",
           "failures": []}
    argv = [py, "-m", "pytest", "-p", "no:cacheprovider", "-p", "sdk_suite_events", "-o", "addopts=",
            "-o", "asyncio_default_fixture_loop_scope=function", "-q", "-rN",
            f"--timeout={args.test_timeout}", f"--junitxml={junit}", rel]
    for entry in exclusions:
        if entry.startswith(rel + "::"):
            argv += ["--deselect", entry]
    file_env = dict(env, SDK_SUITE_EVENTS=events_path)
    started = time.monotonic()
    with open(out_path, "w") as out:
        done = run(argv, timeout=args.file_timeout, cwd=tests_dir, env=file_env, stdout=out, stderr=subprocess.STDOUT)
    row["seconds"] = time.monotonic() - started
    events = read_events(events_path)
    row["excluded"] = sum(1 for e in events if e.get("event") == "deselected")
    results = None
    if os.path.exists(junit):
        try:
            results = outcome_from_junit(junit, rel)
        except ET.ParseError:
            results = None
    if results is None:
        results = outcome_from_events(events)
    if done.returncode is None:
        row["note"] = f"stopped after {args.file_timeout} s (partial)"
    elif done.returncode not in (0, 1, 5) and not results:
        row["note"] = f"pytest exit {done.returncode} (see {out_path})"
    for name, (outcome, message) in sorted(results.items()):
        key = {"passed": "passed", "failed": "failed", "error": "errors", "skipped": "skipped"}[outcome]
        row[key] += 1
        if outcome in ("failed", "error"):
            row["failures"].append((name, outcome, message))
    if done.returncode is not None and done.returncode not in (0, 1, 5) and not results:
        row["errors"] += 1
        row["failures"].append((rel, "error", f"pytest exited {done.returncode} with no test result"))
    return row


def count_excluded_file(py, tests_dir, rel, env):
    """A whole excluded file is only collected, to count its tests (a failure to collect counts 0)."""
    done = run([py, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=", "--collect-only", "-q", rel],
               timeout=180, cwd=tests_dir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return sum(1 for line in (done.stdout or "").splitlines() if "::" in line and not line.startswith(" "))


def normalise(message):
    """A failure message with ids, numbers and hex stripped, to group failures by cause."""
    m = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<uuid>", message)
    m = re.sub(r"'[^']{20,}'", "'…'", m)
    m = re.sub(r"\d+", "N", m)
    return m[:160]


def print_table(rows, totals):
    width = max([len("file")] + [len(r["file"]) for r in rows] + [len("TOTAL")])
    cols = ("passed", "failed", "errors", "skipped", "excluded")
    header = f"{'file':<{width}}  " + "  ".join(f"{c:>8}" for c in cols) + "  note"
    print(header)
    print("-" * len(header))
    for r in rows:
        print(f"{r['file']:<{width}}  " + "  ".join(f"{r[c]:>8}" for c in cols) + f"  {r['note']}")
    print("-" * len(header))
    print(f"{'TOTAL':<{width}}  " + "  ".join(f"{totals[c]:>8}" for c in cols))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mayflyd", default=os.environ.get("MAYFLY_MAYFLYD", ""),
                        help="the mayflyd binary (default $MAYFLY_MAYFLYD, else BUILD_DIR/mayflyd/mayflyd)")
    parser.add_argument("--cli", default=os.environ.get("MAYFLY_CLI", ""),
                        help="the mayfly CLI (default $MAYFLY_CLI, else next to mayflyd: ../client/mayfly)")
    parser.add_argument("--build-dir", default=os.path.join(REPO, "build"),
                        help="where the sdist cache, the venv and the results go (under sdk-suite/)")
    parser.add_argument("--files", default="", help="only the test files matching this (glob or substring)")
    parser.add_argument("--list-failures", action="store_true",
                        help="print every failing test id with the first line of its error, and the causes grouped")
    parser.add_argument("--keep", action="store_true", help="keep the cluster's data directory (and node logs)")
    parser.add_argument("--file-timeout", type=int, default=600, help="seconds one test file may run (default 600)")
    parser.add_argument("--test-timeout", type=int, default=180, help="seconds one test may run (pytest-timeout)")
    parser.add_argument("--nice", type=int, default=10, help="niceness of the runner, the nodes and pytest (10)")
    args = parser.parse_args()

    if args.nice:
        os.nice(args.nice)
    build_dir = os.path.abspath(args.build_dir)
    mayflyd = os.path.abspath(args.mayflyd or os.path.join(build_dir, "mayflyd", "mayflyd"))
    cli = os.path.abspath(args.cli or os.path.join(os.path.dirname(os.path.dirname(mayflyd)), "client", "mayfly"))
    if not os.access(mayflyd, os.X_OK):
        sys.exit(f"sdk-suite: no mayflyd at {mayflyd} (build it, or pass --mayflyd / set MAYFLY_MAYFLYD)")
    if port_taken(GATEWAY_PORT):
        sys.exit(f"sdk-suite: port {GATEWAY_PORT} on 127.0.0.1 is taken; the suite only treats "
                 f"{ACCOUNT_HOST} as its emulator, so node 1's gateway needs that port: stop what listens there")
    work = os.path.join(build_dir, "sdk-suite")
    os.makedirs(work, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    results_dir = os.path.join(work, "results", stamp)
    os.makedirs(results_dir)

    py, support = make_venv(work)
    tests_dir = fetch_sdist(work, py)
    files = test_files(tests_dir, args.files)
    if not files:
        sys.exit(f"sdk-suite: no test file matches {args.files!r}")
    exclusions = read_exclusions()
    all_files = set(test_files(tests_dir, ""))
    unknown = [e for e in exclusions if e.split("::")[0] not in all_files]
    if unknown:
        log("exclusions naming no file of the suite: " + ", ".join(unknown))

    data_dir = os.path.join(work, f"cluster-{stamp}")
    log(f"starting 3 nodes ({mayflyd}); gateway {ACCOUNT_HOST} (TLS); data {data_dir}")
    cluster = Cluster(mayflyd, cli, data_dir)
    ok, ok_nodes = False, True
    rows = []
    try:
        try:
            cluster.wait_ready(py)
        except Exception as error:  # noqa: BLE001 - reported with the node logs
            cluster.print_logs()
            sys.exit(f"sdk-suite: the cluster did not become ready: {error}")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AZURE_", "COSMOS_", "ACCOUNT_"))}
        env.update(ACCOUNT_HOST=ACCOUNT_HOST, ACCOUNT_KEY=cluster.cosmos_key, PYTHONDONTWRITEBYTECODE="1",
                   PYTHONPATH=support + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""),
                   MAYFLY_CLI=cli, MAYFLY_SDK_SUITE_CA=cluster.ca_file)
        for n, rel in enumerate(files, 1):
            if not cluster.alive():
                log("a node exited: the remaining files are not run")
                cluster.print_logs()
                for rest in files[n - 1:]:
                    rows.append({"file": rest, "passed": 0, "failed": 0, "errors": 0, "skipped": 0, "excluded": 0,
                                 "note": "not run (a node exited)", "failures": []})
                ok_nodes = False
                break
            if rel in exclusions:
                count = count_excluded_file(py, tests_dir, rel, env)
                rows.append({"file": rel, "passed": 0, "failed": 0, "errors": 0, "skipped": 0, "excluded": count,
                             "note": f"excluded: {exclusions[rel]}", "failures": []})
                log(f"[{n}/{len(files)}] {rel}: excluded ({count} tests)")
                continue
            row = run_file(py, support, tests_dir, results_dir, rel, exclusions, env, args)
            rows.append(row)
            log(f"[{n}/{len(files)}] {rel}: {row['passed']} passed, {row['failed']} failed, {row['errors']} errors, "
                f"{row['skipped']} skipped, {row['excluded']} excluded in {row['seconds']:.0f} s {row['note']}")
        ok = True
    finally:
        cluster.stop()
        if args.keep or not ok or not ok_nodes:
            log(f"kept the cluster's data and logs in {data_dir}")
        else:
            shutil.rmtree(data_dir, ignore_errors=True)

    totals = {c: sum(r[c] for r in rows) for c in ("passed", "failed", "errors", "skipped", "excluded")}
    if args.list_failures:
        print("\nFailing tests (id: first line of the error):")
        causes = {}
        for r in rows:
            for name, outcome, message in r["failures"]:
                print(f"  {name} [{outcome}]: {message}")
                causes.setdefault(normalise(message), []).append(r["file"])
        print("\nFailures grouped by their first line (count, files):")
        for cause, where in sorted(causes.items(), key=lambda kv: -len(kv[1])):
            print(f"  {len(where):>4}  {cause}  [{', '.join(sorted(set(where))[:4])}{', ...' if len(set(where)) > 4 else ''}]")
    print()
    print(f"azure-cosmos {SDK_VERSION} emulator suite against a 3-node Mayfly cluster ({ACCOUNT_HOST})")
    print_table(rows, totals)
    commit = subprocess.run(["git", "-C", REPO, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=30)
    print(f"command: {' '.join(shlex.quote(a) for a in [sys.argv[0]] + sys.argv[1:])}")
    print(f"date:    {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M:%S UTC')}")
    print(f"commit:  {(commit.stdout or '').strip() or 'unknown'}")
    print(f"results: {results_dir} (junit XML and pytest output per file)")
    # The closing line in the plain form: N passed, N failed.
    print(f"sdk-suite: {totals['passed']} passed, {totals['failed'] + totals['errors']} failed, "
          f"{totals['skipped']} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
