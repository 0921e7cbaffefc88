"""A real 3-node Mayfly cluster for the Cosmos DB SDK tests: three mayflyd processes on 127.0.0.1 with keys, a
cluster secret and the Cosmos DB gateway (--http, --emulator-key) on ports found free. Only the PIDs started here
are ever signalled. Every wait is a bounded poll for a condition. On a failure the nodes' log tails are printed."""
import base64
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest
from azure.cosmos import CosmosClient, exceptions
from azure.cosmos.documents import SSLConfiguration

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from free_ports import free_ports  # noqa: E402 - tests/free_ports.py, shared with the deploy test

MAYFLYD = os.environ.get("MAYFLY_MAYFLYD", "")
# The mayfly CLI, for what the Cosmos API cannot say (e.g. turning a container's change feed on): $MAYFLY_CLI, else
# next to mayflyd in the build tree (build/mayflyd/mayflyd -> build/client/mayfly).
MAYFLY_CLI = os.environ.get("MAYFLY_CLI") or os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(MAYFLYD))),
                                                           "client", "mayfly")
MAKE_CERTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "deploy", "make-certs.sh")
# How many times longer every wait is: 4 when the nodes are the sanitized build's (make sanitize sets it, like
# tests/env.h's time_scale for the C++ tests), 1 otherwise.
TIME_SCALE = max(1.0, float(os.environ.get("MAYFLY_TEST_TIME_SCALE", "1") or "1"))
# The first line of each report a sanitizer (ASan, LSan, UBSan) writes into a node's log.
SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", ": runtime error: ")
EMULATOR_KEY = "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="


def wait_until(condition, timeout_s, poll_s=0.05, what="condition"):
    """Polls `condition` until it returns a true value (returned) or `timeout_s` (scaled by TIME_SCALE) ran out
    (AssertionError)."""
    timeout_s *= TIME_SCALE
    deadline = time.monotonic() + timeout_s
    last_error = None
    while time.monotonic() < deadline:
        try:
            value = condition()
            if value:
                return value
        except Exception as error:  # noqa: BLE001 - the condition may fail while the cluster settles
            last_error = error
        time.sleep(poll_s)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what} (last error: {last_error!r})")


class Cluster:
    def __init__(self, nodes=3, extra_flags=(), auth=True, tls=False):
        """tls: certificates from deploy/make-certs.sh (CA in self.ca_file); the nodes serve RPC and the gateway over
        TLS only (https), the gateway on 127.0.0.2 — the Python SDK never checks certificates of localhost or
        127.0.0.1 (its emulator shortcut), so the check is only real on another address — without --emulator-key."""
        if not MAYFLYD or not os.access(MAYFLYD, os.X_OK):
            raise RuntimeError("set MAYFLY_MAYFLYD to the mayflyd binary (run_pytest.sh does)")
        self.dir = tempfile.mkdtemp(prefix="mayfly-gateway-")
        self.nodes = nodes
        self.scheme = "https" if tls else "http"
        self.http_host = "127.0.0.2" if tls else "127.0.0.1"
        self.ca_file = None
        extra_flags = list(extra_flags)
        if tls:
            certs = os.path.join(self.dir, "certs")
            subprocess.run(["bash", MAKE_CERTS, certs, "node,localhost,127.0.0.1,127.0.0.2"], check=True, timeout=60)
            self.ca_file = os.path.join(certs, "ca.crt")
            extra_flags += ["--tls-cert", os.path.join(certs, "node.crt"), "--tls-key", os.path.join(certs, "node.key"),
                            "--tls-ca", self.ca_file]
        ports = free_ports(2 * nodes)
        self.rpc_ports, self.http_ports = ports[:nodes], ports[nodes:]
        # Mayfly keys; the Cosmos key of a Mayfly key K is base64(K).
        self.keys = {role: secrets.token_urlsafe(32) for role in ("admin", "readwrite", "readonly", "compliance")}
        keys_file = os.path.join(self.dir, "keys")
        with open(os.open(keys_file, os.O_WRONLY | os.O_CREAT, 0o600), "w") as out:
            for role, key in self.keys.items():
                out.write(f"{role} {key} test-{role}\n")
        secret_file = os.path.join(self.dir, "cluster-secret")
        with open(os.open(secret_file, os.O_WRONLY | os.O_CREAT, 0o600), "w") as out:
            out.write(secrets.token_urlsafe(32) + "\n")
        peers = ",".join(f"{i + 1}=127.0.0.1:{p}" for i, p in enumerate(self.rpc_ports))
        self.procs = []
        for i in range(nodes):
            log = open(os.path.join(self.dir, f"node{i + 1}.log"), "w")
            argv = [MAYFLYD, "--id", str(i + 1), "--listen", f"127.0.0.1:{self.rpc_ports[i]}", "--peers", peers,
                    "--data", os.path.join(self.dir, f"node{i + 1}"), "--tick-ms", "10",
                    "--election-timeout-ticks", "30", "--heartbeat-ticks", "5",
                    "--http", f"{self.http_host}:{self.http_ports[i]}", *extra_flags]
            if not tls:
                argv.append("--emulator-key")
            if auth:  # else the node runs open (no keys, no cluster secret), as on a loopback dev machine
                argv += ["--keys-file", keys_file, "--cluster-secret-file", secret_file]
            self.procs.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT))
            log.close()
        self.failed = False

    def url(self, node):
        """The gateway URL of node 1..N."""
        return f"{self.scheme}://{self.http_host}:{self.http_ports[node - 1]}/"

    def cosmos_key(self, role="readwrite"):
        return base64.b64encode(self.keys[role].encode()).decode()

    def client(self, node=1, role="readwrite", key=None, **kwargs):
        if self.ca_file and "ssl_config" not in kwargs:
            kwargs["ssl_config"] = SSLConfiguration()
            kwargs["ssl_config"].SSLCaCerts = self.ca_file
        return CosmosClient(self.url(node), credential=key or self.cosmos_key(role), **kwargs)

    def wait_ready(self, timeout_s=30):
        for node in range(1, self.nodes + 1):
            port = self.http_ports[node - 1]
            wait_until(lambda: socket.create_connection((self.http_host, port), timeout=1).close() or True,
                       timeout_s, what=f"node {node}'s gateway to listen")
        # A write needs a leader: retried until one is elected.
        client = self.client(1, role="admin")
        wait_until(lambda: client.create_database_if_not_exists("ready") is not None, timeout_s,
                   what="a leader (a database create through node 1)")

    def cli(self, *args, role="admin", timeout_s=30):
        """Runs the mayfly CLI against this cluster's RPC endpoints with the key of `role` (in the environment, not the
        arguments); returns the completed process (AssertionError with its output unless it exits 0)."""
        if not os.access(MAYFLY_CLI, os.X_OK):
            raise RuntimeError(f"the mayfly CLI is not at {MAYFLY_CLI} (build the mayfly target, or set MAYFLY_CLI)")
        argv = [MAYFLY_CLI, "--endpoints", ",".join(f"127.0.0.1:{p}" for p in self.rpc_ports), "-o", "json", *args]
        if self.ca_file:
            argv[1:1] = ["--tls-ca", self.ca_file]
        env = dict(os.environ, MAYFLY_KEY=self.keys[role])
        run = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout_s * TIME_SCALE)
        assert run.returncode == 0, f"{argv[3:]} exited {run.returncode}: {run.stdout} {run.stderr}"
        return run

    def alive(self):
        return all(p.poll() is None for p in self.procs)

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=15 * TIME_SCALE)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)
        # A sanitizer's report in any node's log (during the tests, or LeakSanitizer's at the node's exit) fails.
        reports = []
        for i in range(self.nodes):
            with open(os.path.join(self.dir, f"node{i + 1}.log"), errors="replace") as log:
                reports += [f"node {i + 1}: {line.strip()}" for line in log if any(m in line for m in SANITIZER_MARKERS)]
        if reports:
            self.failed = True
        if self.failed:
            for i in range(self.nodes):
                path = os.path.join(self.dir, f"node{i + 1}.log")
                with open(path, errors="replace") as log:
                    lines = log.readlines()
                print(f"----- {path} (last 40 of {len(lines)} lines) -----")
                print("".join(lines[-40:]))
            print(f"kept {self.dir}")
        else:
            shutil.rmtree(self.dir, ignore_errors=True)
        if reports:
            raise AssertionError("sanitizer reports in the nodes' logs:\n" + "\n".join(reports))


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    for name in ("cluster", "tls_cluster"):  # keep and print that cluster's node logs
        if report.failed and name in item.fixturenames:
            item.funcargs[name].failed = True


def running_cluster(**options):
    """A started Cluster(**options), ready for SDK calls, stopped afterwards (a generator for fixtures)."""
    c = Cluster(**options)
    try:
        c.wait_ready()
    except Exception:
        c.failed = True
        c.stop()
        raise
    yield c
    c.stop()


@pytest.fixture(scope="session")
def cluster():
    yield from running_cluster()


def unique(prefix):
    return f"{prefix}-{secrets.token_hex(4)}"


def status_of(call):
    """The HTTP status of a CosmosHttpResponseError raised by `call` (AssertionError when it does not raise)."""
    try:
        call()
    except exceptions.CosmosHttpResponseError as error:
        return error.status_code
    raise AssertionError("expected a CosmosHttpResponseError")
