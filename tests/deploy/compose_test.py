#!/usr/bin/env python3
"""The deployment, proven by running it (issue #7): ctest -L integration -R deploy.

Builds the images offline (a Debian bookworm base made with debootstrap and `docker import`, cached by its tag; the
mayfly image; Prometheus from Debian's package), brings up deploy/docker-compose.yml (three mayflyd and Prometheus;
Grafana is behind the `grafana` profile and has no Debian package, so it is not started) keyed with secrets that
deploy/make-secrets.sh makes in the test's temp dir ($MAYFLY_SECRETS), and then, from the host through the published
ports, every CLI call with `--key-file` admin.key and `--tls-ca` ca.crt (the nodes serve TLS only, with certificates
make-secrets.sh makes; a plaintext call must fail; a call without a key must get 401, the readonly key 403 on a write,
and a key added to the keys file must work after `docker-compose up -d mayfly-secrets`; /metrics without credentials
must get 401 while Prometheus, with basic_auth, has every target up):

  1. TTL: writes items with TTLs and watches them expire on all three containers, at every consistency level, and
     the collector delete them on every node;
  2. failover under a steady writer: `docker stop` of the leader, `docker kill` of the next leader, `docker network
     disconnect` of the next one — each time writes resume on a new leader, the node is brought back and catches up, and
     nothing acknowledged is lost (checked on every node); then the procedures of docs/operations.md as written: a
     rolling restart with leadership transfer under the writer; an online backup under the writer (`mayfly backup
     create` inside a node container, `docker cp` out: a follower serves it, no node stops, the file's header, trailer
     and SHA-256 match the JSON summary) restored into new one-node clusters (one-off containers of the image on empty
     volumes, removed afterwards): `mayflyd --restore --dry-run` figures for every TTL mode, then `--ttl preserve` and
     `--ttl rebase`, each holding exactly the acknowledged writes at or below the backup's index (a create's answer
     names the log index it was applied at) — an item whose TTL ran out between backup and restore is gone with preserve
     and back with rebase, `_ts` and `_expiresAt` moved by shiftSeconds; and a fourth node added from
     deploy/docker-compose.node4.yml with `cluster add-member` (then removed);
  3. the GC-backlog alert: a provisioned container's RU/s used up by a load loop while its items expire, so the
     collector is starved; the alert must fire in the Prometheus inside compose, then resolve once RU are given back;
  4. every query of every dashboard panel (and its variables) through Prometheus' HTTP API: each must return data;
     `promtool check rules` / `test rules` on the alert rules, `promtool check config`;
  5. `docker-compose down` + `up` keeps every acknowledged item (persistent volumes), and `down -v` leaves no
     container, network or volume of the test behind.

Options (or environment): --image-mode full|prebuilt ($MAYFLY_DEPLOY_IMAGE_MODE): `full` builds deploy/Dockerfile
(compiles inside Docker; cached layers when the sources did not change), `prebuilt` puts the host-built binaries on
the same runtime stage (deploy/Dockerfile.prebuilt). Neither given: --default-image-mode (ctest passes `prebuilt` in a
normal build, `full` in a sanitizer build; `make test-deploy-full` runs the full build). --keep leaves the cluster up on failure for a post-mortem.

Test-only Prometheus settings (the real files are checked with promtool too): scrape and evaluation every 2 s, and in
the alert rules every `for:` becomes 4s and the GC-backlog threshold 10 s instead of 600 s (written to a temp dir and
mounted through $MAYFLY_PROMETHEUS_CONFIG / $MAYFLY_PROMETHEUS_ALERTS).

Exit status: 0 passed, 1 failed, 77 skipped (no Docker engine answers: `docker info` failed). Cleanup: SIGTERM/SIGINT
and failures end with `docker-compose down -v` (after printing the containers' logs); a run killed outright is cleaned
up by the next one (projects named mayflytest<PID> whose process is gone; the restores' containers and volumes,
made with `docker run` / `docker volume create`, are named mayflytest<PID>_* and labelled
org.mayfly.deploy-test=mayflytest<PID>, removed by the phase itself, by the cleanup and by the next run alike).
Python 3 standard library only. Every wait is bounded and polls for a condition.
"""
import argparse
import base64
import hashlib
import json
import math
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from free_ports import free_ports  # noqa: E402 - tests/free_ports.py, shared with the gateway tests

SKIP = 77
EXTRA_LABEL = "org.mayfly.deploy-test"  # on what the test makes outside compose
BRIEF_TTL = 30  # s: the backup phase's `brief` items outlive the backup and expire before the restores
T0 = time.monotonic()


def log(message):
    print(f"[{time.monotonic() - T0:7.1f}s] {message}", flush=True)


class Failure(Exception):
    pass


class Interrupted(Exception):
    """SIGTERM/SIGINT (ctest's timeout, Ctrl-C): never swallowed by a wait, always cleaned up after."""


def check(condition, message):
    if not condition:
        raise Failure(message)


def run(args, timeout=120, env=None, check_rc=True, input_text=None):
    try:
        result = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env, input=input_text)
    except subprocess.TimeoutExpired:
        raise Failure(f"timed out after {timeout}s: {' '.join(args)}")
    if check_rc and result.returncode != 0:
        raise Failure(f"{' '.join(args)} exited {result.returncode}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result


def wait_until(what, condition, timeout, poll=0.25):
    """Polls condition() (truthy result ends the wait) until timeout seconds; raises Failure with `what` if not."""
    deadline = time.monotonic() + timeout
    last_error = None
    while True:
        try:
            value = condition()
            if value:
                return value
        except Failure as error:  # conditions may fail transiently while the cluster moves
            last_error = error
        if time.monotonic() >= deadline:
            raise Failure(f"timed out after {timeout}s waiting for {what}" + (f" (last error: {last_error})"
                                                                            if last_error else ""))
        time.sleep(poll)


class Cli:
    """The host-built `mayfly` CLI against the published ports (endpoint i = node i), with the admin key (--key-file, as
    docs/operations.md, "Deploy", says) unless key_file=None is passed, and the cluster CA (--tls-ca: the nodes serve
    TLS only) unless tls_ca=None is passed. With container=NAME it is the image's `mayfly` run by `docker exec` in that
    container instead: its own node (MAYFLY_ENDPOINTS), key (MAYFLY_KEY_FILE) and CA (MAYFLY_TLS_CA)."""

    def __init__(self, binary, endpoints, key_file=None, tls_ca=None, container=None):
        self.binary = binary
        self.endpoints = endpoints  # node id -> "127.0.0.1:port"
        self.key_file = key_file
        self.tls_ca = tls_ca
        self.container = container

    def __call__(self, *args, node=None, consistency=None, timeout_ms=10000, key_file="", tls_ca=""):
        if self.container:
            argv = ["docker", "exec", self.container, "mayfly", "--timeout-ms", str(timeout_ms)]
            key_file = tls_ca = None
        else:
            endpoints = self.endpoints[node] if node else ",".join(self.endpoints[n] for n in sorted(self.endpoints))
            argv = [self.binary, "--endpoints", endpoints, "--timeout-ms", str(timeout_ms)]
        key_file = self.key_file if key_file == "" else key_file
        if key_file:
            argv += ["--key-file", key_file]
        tls_ca = self.tls_ca if tls_ca == "" else tls_ca
        if tls_ca:
            argv += ["--tls-ca", tls_ca]
        if consistency:
            argv += ["--consistency", consistency]
        argv += list(args)
        result = run(argv, timeout=timeout_ms / 1000 + 30, check_rc=False)
        try:
            response = json.loads(result.stdout)
        except json.JSONDecodeError:
            response = {"status": -1, "message": (result.stdout + result.stderr).strip()}
        return response

    def ok(self, *args, **kwargs):
        response = self(*args, **kwargs)
        check(0 < response.get("status", -1) < 400, f"mayfly {' '.join(args)}: {response}")
        return response


class Deployment:
    def __init__(self, options):
        self.options = options
        self.source = os.path.abspath(options.source_dir)
        self.deploy = os.path.join(self.source, "deploy")
        self.compose_file = os.path.join(self.deploy, "docker-compose.yml")
        self.project = f"mayflytest{os.getpid()}"
        self.tmp = tempfile.mkdtemp(prefix="mayfly-deploy-test.")
        os.chmod(self.tmp, 0o755)
        self.compose_files = [self.compose_file]
        self.image = options.image
        # Keys and the cluster secret, made by deploy/make-secrets.sh into the temp dir (never deploy/secrets/).
        self.secrets = os.path.join(self.tmp, "secrets")
        self.env = dict(os.environ)
        for name in ("MAYFLY_KEY", "MAYFLY_KEY_FILE", "MAYFLY_TLS_CA"):  # the host CLI: --key-file, --tls-ca only
            self.env.pop(name, None)
            os.environ.pop(name, None)
        self.env.update({
            "MAYFLY_IMAGE": self.image,
            "MAYFLY_PROMETHEUS_IMAGE": options.prometheus_image,
            "MAYFLY_BIND": "127.0.0.1",
            "MAYFLY_CLUSTER": self.project,
            "MAYFLY_PROMETHEUS_CONFIG": os.path.join(self.tmp, "prometheus.yml"),
            "MAYFLY_PROMETHEUS_ALERTS": os.path.join(self.tmp, "alerts.yml"),
            "MAYFLY_SECRETS": self.secrets,
            "COMPOSE_PROJECT_NAME": self.project,
        })
        self.env.pop("COMPOSE_PROFILES", None)
        self.cli = Cli(options.cli, {}, key_file=os.path.join(self.secrets, "admin.key"),
                       tls_ca=os.path.join(self.secrets, "ca.crt"))
        self.pick_ports()
        self.compose_up = False
        self.acked_ledger = []  # ids of shop/ledger writes acknowledged by earlier writers
        self.unknown_ledger = []  # ids of earlier writers' writes with an unknown outcome (in the store or not)
        # Containers and volumes made outside compose (the restores), named PROJECT_..., labelled with this label:
        # removed by the phase, by the cleanup on failure, and by remove_stale_projects after a killed run.
        self.label = f"{EXTRA_LABEL}={self.project}"
        self.extra_containers = []
        self.extra_volumes = []
        self.seen_volumes = set()  # every volume the project's containers mounted before a `down` (see teardown)
        self.started_wall = time.time()
        self.timings = []

    def pick_ports(self):
        ports = free_ports(9)
        self.rpc_ports = {n: ports[n - 1] for n in (1, 2, 3, 4)}
        self.metrics_ports = {n: ports[n + 3] for n in (1, 2, 3, 4)}
        self.prometheus_port = ports[8]
        self.env["PROMETHEUS_PORT"] = str(self.prometheus_port)
        for n in (1, 2, 3, 4):
            self.env[f"MAYFLY{n}_PORT"] = str(self.rpc_ports[n])
            self.env[f"MAYFLY{n}_METRICS_PORT"] = str(self.metrics_ports[n])
        self.cli.endpoints = {n: f"127.0.0.1:{self.rpc_ports[n]}" for n in (1, 2, 3)}

    # ---- docker / compose ---------------------------------------------------------------------------------
    def compose(self, *args, timeout=180):
        files = [arg for f in self.compose_files for arg in ("-f", f)]
        return run(["docker-compose", "-p", self.project, *files, *args], timeout=timeout, env=self.env)

    def container(self, service):
        return f"{self.project}_{service}_1"

    def inspect(self, service, template):
        return run(["docker", "inspect", "-f", template, self.container(service)], timeout=30).stdout.strip()

    def network(self):
        return f"{self.project}_mayfly"

    def extra_container(self, name):
        """The name PROJECT_name for a container made with `docker run`, remembered for the cleanup."""
        full = f"{self.project}_{name}"
        self.extra_containers.append(full)
        return full

    def docker_volume(self, name):
        """A new, empty, labelled volume PROJECT_name, remembered for the cleanup."""
        full = f"{self.project}_{name}"
        self.extra_volumes.append(full)
        run(["docker", "volume", "create", "--label", self.label, full], timeout=60)
        return full

    def remove_extras(self, prefix=""):
        """Removes the containers (then the volumes) made outside compose whose name starts with PROJECT_prefix."""
        start = f"{self.project}_{prefix}"
        for kind, names, remove in (("containers", self.extra_containers, ["docker", "rm", "-f", "-v"]),
                                    ("volumes", self.extra_volumes, ["docker", "volume", "rm", "-f"])):
            chosen = [name for name in names if name.startswith(start)]
            if chosen:
                result = run(remove + chosen, timeout=120, check_rc=False)
                if result.returncode != 0 and "No such" not in result.stderr:
                    raise Failure(f"removing {kind} {chosen}: {result.stderr.strip()}")
            names[:] = [name for name in names if name not in chosen]

    # ---- cluster views ----------------------------------------------------------------------------------------
    def node_status(self, n, timeout_ms=3000):
        """Node n's own entry of `cluster status`, asked of node n (None if it does not answer)."""
        response = self.cli("cluster", "status", node=n, timeout_ms=timeout_ms)
        if response.get("status") != 200 or not isinstance(response.get("body"), dict):
            return None
        for entry in response["body"].get("nodes", []):
            if entry.get("id") == n and "role" in entry:
                return entry
        return None

    def agreed_leader(self, nodes):
        """The leader every node in `nodes` reports (and that reports itself leader), else 0."""
        statuses = {n: self.node_status(n) for n in nodes}
        if any(s is None for s in statuses.values()):
            return 0
        leaders = {s["leader"] for s in statuses.values()}
        if len(leaders) != 1:
            return 0
        leader = leaders.pop()
        if leader not in statuses or statuses[leader]["role"] != "leader":
            return 0
        return leader

    def wait_leader(self, nodes, timeout=60, exclude=None):
        def found():
            leader = self.agreed_leader(nodes)
            return leader if leader and leader != exclude else 0
        return wait_until(f"one leader agreed by nodes {sorted(nodes)}", found, timeout)

    def wait_caught_up(self, n, others, timeout=60):
        """Node n has applied at least what the leader had committed once n was back."""
        leader = self.wait_leader(set(others) | {n}, timeout=timeout)
        target = self.node_status(leader)["commit"]
        wait_until(f"node {n} applying up to index {target}",
                   lambda: (self.node_status(n) or {}).get("applied", 0) >= target, timeout)
        return target

    def scrape(self, n, credentials=True):
        """Node n's /metrics with the basic-auth credentials of secrets/metrics-auth (credentials=False: none)."""
        request = urllib.request.Request(f"http://127.0.0.1:{self.metrics_ports[n]}/metrics")
        if credentials:
            user_password = open(os.path.join(self.secrets, "metrics-auth")).read().strip()
            request.add_header("Authorization", "Basic " + base64.b64encode(user_password.encode()).decode())
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.read().decode()

    def metric(self, n, name, labels):
        """Sum of the samples of `name` on node n whose labels include `labels`."""
        total, seen = 0.0, False
        for line in self.scrape(n).splitlines():
            if not line.startswith(name + "{") and not line.startswith(name + " "):
                continue
            head, _, value = line.rpartition(" ")
            if all(f'{k}="{v}"' in head for k, v in labels.items()):
                total += float(value)
                seen = True
        return total if seen else None

    def prometheus(self, path, **params):
        url = f"http://127.0.0.1:{self.prometheus_port}{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params, doseq=True)
        try:
            with urllib.request.urlopen(url, timeout=15) as response:
                payload = json.loads(response.read().decode())
        except Exception as error:  # noqa: BLE001 - network errors become test failures with the URL
            raise Failure(f"Prometheus {url}: {error}")
        check(payload.get("status") == "success", f"Prometheus {url}: {payload}")
        return payload["data"]

    def firing(self, alertname, **labels):
        alerts = self.prometheus("/api/v1/alerts")["alerts"]
        return [a for a in alerts if a["labels"].get("alertname") == alertname and a["state"] == "firing"
                and all(a["labels"].get(k) == v for k, v in labels.items())]

    # ---- phases -------------------------------------------------------------------------------------------------
    def phase(self, name, function, *args):
        started = time.monotonic()
        log(f"=== {name}")
        result = function(*args)
        seconds = time.monotonic() - started
        self.timings.append((name, seconds))
        log(f"=== {name}: ok ({seconds:.1f} s)")
        return result

    def static_checks(self):
        run([sys.executable, os.path.join(self.deploy, "grafana", "make_dashboard.py"), "--check"])
        dashboard = json.load(open(os.path.join(self.deploy, "grafana", "dashboards", "mayfly.json")))
        metrics_cc = open(os.path.join(self.source, "metrics", "metrics.cc")).read()
        names = set()
        for expr in self.dashboard_queries(dashboard, raw=True):
            names.update(re.findall(r"\b(mayfly_[a-z_]+?)(?:_bucket)?\b(?=[{\[ )])", expr))
        unknown = sorted(n for n in names if f'"{n}"' not in metrics_cc)
        check(not unknown, f"dashboard metrics not defined in metrics/metrics.cc: {unknown}")
        log(f"dashboard uses {len(names)} metric families, all defined in metrics/metrics.cc")
        self.compose("config", "-q")
        for name in ("keys-file", "cluster-secret-file", "tls-cert", "tls-key", "tls-ca", "metrics-auth-file"):
            for compose_file in ("docker-compose.yml", "docker-compose.node4.yml"):
                text = open(os.path.join(self.deploy, compose_file)).read()
                check(f"--{name}" in text, f"{compose_file}: a node without --{name}")
        prometheus_yml = open(os.path.join(self.deploy, "prometheus", "prometheus.yml")).read()
        check("password_file:" in prometheus_yml, "prometheus.yml: the mayfly job scrapes without basic_auth")
        services = self.compose("--profile", "grafana", "config", "--services").stdout.split()
        check("grafana" in services, f"grafana service missing: {services}")

    def build_images(self):
        args = ["bash", os.path.join(self.deploy, "build-images.sh"), "--base", self.options.base_image,
                "--tag", self.image, "--prometheus", "--prometheus-tag", self.options.prometheus_image]
        if self.options.image_mode == "prebuilt":
            args += ["--prebuilt", self.options.build_dir]
        started = time.monotonic()
        result = run(args, timeout=3600)
        sys.stdout.write(result.stderr)
        log(f"images built in {time.monotonic() - started:.1f} s ({self.options.image_mode})")
        user = run(["docker", "image", "inspect", "-f", "{{.Config.User}}", self.image]).stdout.strip()
        check(user and user not in ("0", "root"), f"{self.image} runs as {user!r}, not a non-root user")

    def promtool(self):
        prom_dir = os.path.join(self.deploy, "prometheus")
        image = self.options.prometheus_image

        def promtool(mount_dir, *args):
            return run(["docker", "run", "--rm", "--network", "none", "-v", f"{mount_dir}:/etc/prometheus:ro",
                        "-w", "/etc/prometheus", "--entrypoint", "promtool", image, *args], timeout=120)
        log(promtool(prom_dir, "check", "rules", "alerts.yml").stdout.strip().replace("\n", " | "))
        log(promtool(prom_dir, "test", "rules", "alerts.test.yml").stdout.strip().replace("\n", " | "))
        log(promtool(prom_dir, "check", "config", "prometheus.yml").stdout.strip().replace("\n", " | "))
        log(promtool(self.tmp, "check", "config", "prometheus.yml").stdout.strip().replace("\n", " | "))

    def write_test_prometheus_files(self):
        prom_dir = os.path.join(self.deploy, "prometheus")
        config = open(os.path.join(prom_dir, "prometheus.yml")).read()
        config = re.sub(r"(scrape_interval|evaluation_interval): \S+", r"\1: 2s", config)
        config = re.sub(r"scrape_timeout: \S+", "scrape_timeout: 2s", config)
        alerts = open(os.path.join(prom_dir, "alerts.yml")).read()
        alerts, count = re.subn(r"(mayfly_ttl_gc_oldest_expired_age_seconds\)) > 600", r"\1 > 10", alerts)
        check(count == 1, "alerts.yml: the GC backlog alert's '> 600' threshold was not found")
        alerts = re.sub(r"for: \S+", "for: 4s", alerts)
        for name, text in (("prometheus.yml", config), ("alerts.yml", alerts)):
            with open(os.path.join(self.tmp, name), "w") as f:
                f.write(text)
            os.chmod(os.path.join(self.tmp, name), 0o644)

    def make_secrets(self):
        """deploy/make-secrets.sh into the temp dir: 0600 files; a second run keeps them (idempotent)."""
        script = os.path.join(self.deploy, "make-secrets.sh")
        run(["bash", script, self.secrets], timeout=60)
        files = ("keys", "cluster-secret", "admin.key", "readwrite.key", "readonly.key", "metrics-auth",
                 "prometheus-password", "ca.crt", "ca.key") + tuple(f"mayfly{n}.{ext}" for n in (1, 2, 3, 4)
                                                                for ext in ("crt", "key"))
        for name in files:
            path = os.path.join(self.secrets, name)
            check(os.path.isfile(path), f"make-secrets.sh did not make {name}")
            mode = os.stat(path).st_mode & 0o777
            check(mode == 0o600, f"{name} has mode {mode:o}, not 600")
        roles = {}
        for line in open(os.path.join(self.secrets, "keys")):
            words = line.split()
            if words:
                roles[words[0]] = words[1]
        check(sorted(roles) == ["admin", "readonly", "readwrite"], f"keys file roles: {sorted(roles)}")
        for role, key in roles.items():
            check(open(os.path.join(self.secrets, f"{role}.key")).read().strip() == key, f"{role}.key != keys")
        user, _, password = open(os.path.join(self.secrets, "metrics-auth")).read().strip().partition(":")
        check(user == "prometheus" and len(password) >= 32, "metrics-auth is not prometheus:PASSWORD")
        check(open(os.path.join(self.secrets, "prometheus-password")).read() == password,
              "prometheus-password is not metrics-auth's password")
        for n in (1, 2, 3, 4):
            sans = run(["openssl", "x509", "-in", os.path.join(self.secrets, f"mayfly{n}.crt"), "-noout", "-ext",
                        "subjectAltName"]).stdout
            for san in (f"DNS:mayfly{n}", "DNS:localhost", "DNS:127.0.0.1"):
                check(san in sans, f"mayfly{n}.crt lacks {san}: {sans}")
        before = {name: open(os.path.join(self.secrets, name)).read() for name in files}
        run(["bash", script, self.secrets], timeout=60)
        check(before == {name: open(os.path.join(self.secrets, name)).read() for name in files},
              "make-secrets.sh run again changed existing secrets (it must keep them without --force)")
        log(f"secrets made in {self.secrets} (0600; kept by a second run): keys, certificates for mayfly1..4, "
            "metrics credentials; the CLI uses --key-file admin.key --tls-ca ca.crt")

    def bring_up(self):
        self.compose_up = True
        try:
            self.compose("up", "-d", "--no-build", timeout=300)
        except Failure as error:
            if "already allocated" not in str(error) and "address already in use" not in str(error):
                raise
            log("a published port was taken meanwhile: down, new ports, up again")
            self.compose("down", "-v", "--timeout", "10")
            self.pick_ports()
            self.compose("up", "-d", "--no-build", timeout=300)
        running = self.compose("ps", "--services", "--filter", "status=running").stdout.split()
        check(sorted(running) == ["mayfly1", "mayfly2", "mayfly3", "prometheus"],
              f"running services: {running} (grafana must stay off without its profile)")
        leader = self.wait_leader({1, 2, 3}, timeout=90)
        log(f"leader: node {leader}")
        for n in (1, 2, 3):
            wait_until(f"mayfly{n} healthy", lambda n=n: self.inspect(f"mayfly{n}", "{{.State.Health.Status}}")
                       == "healthy", 90, poll=1)
            check(self.inspect(f"mayfly{n}", "{{.Config.User}}") not in ("", "0", "root"), "node runs as root")
        self.keys_required()
        self.tls_required()
        wait_until("Prometheus up", lambda: self.prometheus("/api/v1/query", query="up"), 60, poll=1)
        wait_until("Prometheus scraping all three nodes",
                   lambda: len([r for r in self.prometheus("/api/v1/query", query='up{job="mayfly"} == 1')["result"]])
                   == 3, 60, poll=1)
        self.metrics_auth_required()
        self.cli.ok("db", "create", "shop")

    def tls_required(self):
        """The nodes serve TLS only: a plaintext CLI call (no --tls-ca) fails; with the CA it answers."""
        for n in (1, 2, 3):
            response = self.cli("cluster", "status", node=n, tls_ca=None, timeout_ms=3000)
            check(response.get("status") != 200 and "role" not in json.dumps(response.get("body", "")),
                  f"plaintext mayfly cluster status against node {n} answered: {response}")
            check(self.node_status(n) is not None, f"node {n} does not answer over TLS with --tls-ca")
        log(f"plaintext CLI calls fail on every node (e.g. {str(response)[:160]}); with --tls-ca ca.crt they answer")

    def metrics_auth_required(self):
        """/metrics refuses a scrape without credentials (401) while Prometheus scrapes every node with them."""
        for n in (1, 2, 3):
            try:
                self.scrape(n, credentials=False)
                raise Failure(f"node {n} served /metrics without credentials")
            except urllib.error.HTTPError as error:
                check(error.code == 401, f"node {n}: /metrics without credentials got {error.code}, want 401")
            check("mayfly_" in self.scrape(n), f"node {n}: /metrics with credentials has no mayfly_ metric")
        up = self.prometheus("/api/v1/targets", state="active")["activeTargets"]
        mayfly = [t for t in up if t["labels"].get("job") == "mayfly"]
        check(len(mayfly) == 3 and all(t["health"] == "up" for t in mayfly),
              f"Prometheus targets of job mayfly: {[(t['scrapeUrl'], t['health'], t['lastError']) for t in mayfly]}")
        log("/metrics without credentials: 401 on every node; with them: served; Prometheus (basic_auth, "
            "password_file) has all three mayfly targets up")

    def keys_required(self):
        """The cluster is keyed: without a key every request is 401; inside the containers the admin key is there."""
        for n in (1, 2, 3):
            response = self.cli("cluster", "status", node=n, key_file=None)
            check(response.get("status") == 401, f"mayfly without a key against node {n}: {response} (want 401)")
        response = self.cli("db", "list", key_file=None)
        check(response.get("status") == 401, f"mayfly db list without a key: {response} (want 401)")
        readonly = self.cli("db", "create", "nope", key_file=os.path.join(self.secrets, "readonly.key"))
        check(readonly.get("status") == 403, f"db create with the readonly key: {readonly} (want 403)")
        inside = run(["docker", "exec", self.container("mayfly1"), "mayfly", "cluster", "status"], timeout=60,
                     check_rc=False)
        check(inside.returncode == 0 and '"status":200' in inside.stdout.replace(" ", ""),
              f"docker exec mayfly1 mayfly cluster status (MAYFLY_KEY_FILE): {inside.stdout}{inside.stderr}")
        for n in (1, 2, 3):
            mode = run(["docker", "exec", self.container(f"mayfly{n}"), "stat", "-c", "%U %a",
                        "/run/secrets/mayfly/keys", "/run/secrets/mayfly/cluster-secret"], timeout=60).stdout.split()
            check(mode == ["mayfly", "600"] * 2, f"mayfly{n}: secret files are {mode}, want mayfly 600")
        log("without a key: 401 on every node; readonly key: 403 on db create; docker exec mayfly uses the admin key; "
            "secrets in the containers are mayfly's, mode 600")
        # docs/operations.md: a new client key = a new line in the keys file, then `docker-compose up -d mayfly-secrets`
        # (copied again; the nodes re-read it, no restart).
        new_key = os.path.join(self.tmp, "rotated.key")
        key = run(["openssl", "rand", "-base64", "32"]).stdout.strip()
        with open(new_key, "w") as f:
            f.write(key + "\n")
        with open(os.path.join(self.secrets, "keys"), "a") as f:
            f.write(f"readonly {key} rotated\n")
        check(self.cli("cluster", "status", node=1, key_file=new_key).get("status") == 401, "new key before rotation")
        started_at = {n: self.inspect(f"mayfly{n}", "{{.State.StartedAt}}") for n in (1, 2, 3)}
        self.compose("up", "-d", "--no-build", "mayfly-secrets")
        for n in (1, 2, 3):
            wait_until(f"node {n} accepting the new key", lambda n=n: self.cli("cluster", "status", node=n,
                       key_file=new_key).get("status") == 200, 30, poll=0.5)
        check(started_at == {n: self.inspect(f"mayfly{n}", "{{.State.StartedAt}}") for n in (1, 2, 3)},
              "a node restarted for the key rotation")
        log("a key added to the keys file is accepted by every node after `docker-compose up -d mayfly-secrets`, "
            "no restart")

    # 1. TTL --------------------------------------------------------------------------------------------------------
    def ttl_expiry(self):
        self.cli.ok("container", "create", "shop", "carts", "--pk", "/user", "--default-ttl", "12")
        items = []
        for i in range(12):
            own_ttl = 8 if i % 3 == 0 else None
            document = {"id": f"c{i}", "user": f"u{i % 4}", "items": ["tea"] * (1 + i % 3)}
            if own_ttl:
                document["ttl"] = own_ttl
            response = self.cli.ok("item", "create", "shop", "carts", json.dumps(document))
            check(response["status"] == 201, f"create: {response}")
            ts = response["body"]["_ts"]
            items.append((document["id"], document["user"], ts + (own_ttl or 12)))
        check(time.time() < min(e for _, _, e in items) - 5, "writes took too long to check items alive first")
        for n in (1, 2, 3):  # alive on every node before expiry
            for item_id, user, expiry in items:
                response = self.cli("item", "read", "shop", "carts", "--pk", user, "--id", item_id, node=n,
                                    consistency="session")
                check(response["status"] == 200 and response["servedBy"] == n or time.time() >= expiry - 0.5,
                      f"{item_id} on node {n} before expiry: {response}")
        check(time.time() < min(e for _, _, e in items), "too slow: reads before expiry ran past the first expiry")
        last_expiry = max(e for _, _, e in items)
        log(f"{len(items)} items alive on all three nodes; they expire by {last_expiry - time.time():.1f} s from now")
        wait_until("the wall clock passing the last expiry instant", lambda: time.time() >= last_expiry,
                   last_expiry - time.time() + 5)
        for n in (1, 2, 3):
            for consistency in ("strong", "session", "eventual"):
                for item_id, user, expiry in items:
                    def gone():
                        response = self.cli("item", "read", "shop", "carts", "--pk", user, "--id", item_id, node=n,
                                            consistency=consistency)
                        check(response["status"] in (200, 404), f"{item_id} on node {n}: {response}")
                        return response["status"] == 404
                    wait_until(f"{item_id} gone on node {n} at {consistency}", gone, 10)
            listing = self.cli.ok("item", "list", "shop", "carts", node=n, consistency="eventual")
            check(listing["body"] == [], f"node {n} still lists expired items: {listing}")
        log("every item reads 404 at strong, session and eventual on all three nodes, and none is listed")
        for n in (1, 2, 3):
            wait_until(f"node {n}'s collector deleting the 12 expired items",
                       lambda n=n: (self.metric(n, "mayfly_ttl_gc_deleted_items_total", {"container": "shop/carts"})
                                    or 0) >= len(items)
                       and self.metric(n, "mayfly_ttl_gc_backlog_items", {"container": "shop/carts"}) == 0, 30, poll=0.5)
        log("each node's collector deleted all 12 (backlog 0 on every node)")

    # 2. failover -----------------------------------------------------------------------------------------------
    class Writer(threading.Thread):
        """Creates items one by one through all endpoints; remembers which were acknowledged (201)."""

        def __init__(self, cli, prefix):
            super().__init__(daemon=True)
            self.cli = cli
            self.prefix = prefix
            self.stop_event = threading.Event()
            self.lock = threading.Lock()
            self.acked = []
            self.tokens = {}  # acknowledged id -> the log index its create was applied at (the answer's sessionToken)
            self.unknown = []
            self.errors = []

        def run(self):
            n = 0
            while not self.stop_event.is_set():
                n += 1
                item_id = f"{self.prefix}{n:06d}"
                response = self.cli("item", "create", "shop", "ledger", json.dumps({"id": item_id, "pk": "w", "n": n}),
                                    timeout_ms=20000)
                with self.lock:
                    if response.get("status") == 201:
                        self.acked.append(item_id)
                        self.tokens[item_id] = int(response.get("sessionToken") or 0)
                    elif response.get("status") in (408, 409, 503) or response.get("status", -1) < 0:
                        self.unknown.append((item_id, response.get("status"), response.get("message", "")[:120]))
                    else:
                        self.errors.append((item_id, response))
                self.stop_event.wait(0.05)

        def acked_count(self):
            with self.lock:
                return len(self.acked)

    def listed_ids(self, n):
        return {d["id"] for d in self.list_items(self.cli, "ledger", pk="w", node=n)}

    def check_nothing_lost(self, writer, nodes, what):
        with writer.lock:
            acked = self.acked_ledger + list(writer.acked)  # this writer's and every earlier one's
        leader = self.wait_leader(set(nodes), timeout=60)
        target = self.node_status(leader)["commit"]
        for n in nodes:
            wait_until(f"node {n} applying up to {target}",
                       lambda n=n: (self.node_status(n) or {}).get("applied", 0) >= target, 60)
            missing = sorted(set(acked) - self.listed_ids(n))
            check(not missing, f"{what}: node {n} lost {len(missing)} acknowledged writes: {missing[:10]}")
        log(f"{what}: all {len(acked)} acknowledged writes present on nodes {sorted(nodes)}")

    def writes_resume(self, writer, since_count, what, timeout=60):
        wait_until(f"writes resuming after {what}", lambda: writer.acked_count() >= since_count + 10, timeout, poll=0.2)

    def outage(self, writer, how):
        """Takes the current leader out (`how`: stop, kill, disconnect), checks the rest, brings it back."""
        leader = self.wait_leader({1, 2, 3}, timeout=60)
        others = {1, 2, 3} - {leader}
        service = f"mayfly{leader}"
        self.wait_writes(writer)
        before = writer.acked_count()
        started = time.monotonic()
        ip = None
        if how == "stop":
            run(["docker", "stop", "-t", "30", self.container(service)], timeout=60)
            check(self.inspect(service, "{{.State.ExitCode}}") == "0", f"{service} did not exit 0 on SIGTERM")
        elif how == "kill":
            run(["docker", "kill", self.container(service)], timeout=60)
            wait_until(f"{service} stopped", lambda: self.inspect(service, "{{.State.Running}}") == "false", 30)
        else:
            ip = self.inspect(service, "{{(index .NetworkSettings.Networks \"%s\").IPAddress}}" % self.network())
            run(["docker", "network", "disconnect", self.network(), self.container(service)], timeout=60)
        log(f"node {leader} (the leader) taken out with docker {'network disconnect' if ip else how}")
        new_leader = self.wait_leader(others, timeout=60)
        self.writes_resume(writer, before, f"docker {how} of node {leader}")
        log(f"new leader node {new_leader} after {time.monotonic() - started:.1f} s; writes resumed "
            f"({writer.acked_count() - before} acknowledged since)")
        if how == "kill":
            wait_until(f"MayflyNodeDown firing for {service}",
                       lambda: self.firing("MayflyNodeDown", instance=f"{service}:9100"), 60, poll=1)
            log(f"Prometheus: MayflyNodeDown firing for {service}:9100")
        self.check_nothing_lost(writer, others, f"with node {leader} out")
        started = time.monotonic()
        if how == "disconnect":
            # Back on the network under its service name (the DNS alias compose gave it); Docker picks an address
            # (the compose network has no fixed subnet, so the old one cannot be asked for): peers re-resolve.
            run(["docker", "network", "connect", "--alias", service, self.network(), self.container(service)],
                timeout=60)
            new_ip = self.inspect(service, "{{(index .NetworkSettings.Networks \"%s\").IPAddress}}" % self.network())
            log(f"node {leader} reconnected (address {ip} before, {new_ip} now)")
        else:
            run(["docker", "start", self.container(service)], timeout=60)
        target = self.wait_caught_up(leader, others, timeout=90)
        log(f"node {leader} back and caught up to index {target} in {time.monotonic() - started:.1f} s")
        self.writes_resume(writer, writer.acked_count(), f"node {leader} came back")
        self.check_nothing_lost(writer, {1, 2, 3}, f"after node {leader} came back")
        return leader

    def wait_writes(self, writer):
        count = writer.acked_count()
        wait_until("the writer making progress", lambda: writer.acked_count() >= count + 5, 60, poll=0.2)

    def failover(self):
        self.cli.ok("container", "create", "shop", "ledger", "--pk", "/pk")
        writer = self.Writer(self.cli, "w")
        writer.start()
        try:
            for how in ("stop", "kill", "disconnect"):
                self.outage(writer, how)
        finally:
            writer.stop_event.set()
            writer.join(timeout=60)
        self.finish_writer(writer)

    def finish_writer(self, writer):
        check(not writer.is_alive(), "the writer did not stop")
        self.check_nothing_lost(writer, {1, 2, 3}, "after the writer stopped")
        check(not writer.errors, f"writer got unexpected errors: {writer.errors[:5]}")
        log(f"writer: {len(writer.acked)} acknowledged, {len(writer.unknown)} with unknown outcome "
            f"{[u[1] for u in writer.unknown][:20]}")
        self.acked_ledger.extend(writer.acked)
        self.unknown_ledger.extend(u[0] for u in writer.unknown)

    # docs/operations.md procedures -------------------------------------------------------------------------------
    def rolling_restart(self):
        """docs/operations.md: followers first (recreated, as for a new image), then leadership moved away and the old
        leader."""
        writer = self.Writer(self.cli, "r")
        writer.start()
        try:
            self.wait_writes(writer)
            leader = self.wait_leader({1, 2, 3})
            followers = sorted({1, 2, 3} - {leader})
            for n in followers + [leader]:
                if n == leader:
                    target = followers[0]
                    run(["docker", "exec", self.container(f"mayfly{target}"), "mayfly", "--endpoints",
                         "mayfly1:7100,mayfly2:7100,mayfly3:7100", "cluster", "transfer-leader", str(target)],
                        timeout=60)
                    check(self.wait_leader({1, 2, 3}, timeout=30) == target, f"leadership did not move to {target}")
                    log(f"leadership transferred from node {leader} to node {target}")
                started = time.monotonic()
                before = writer.acked_count()
                self.compose("up", "-d", "--no-deps", "--no-build", "--force-recreate", f"mayfly{n}", timeout=120)
                wait_until(f"mayfly{n} healthy", lambda n=n: self.inspect(f"mayfly{n}", "{{.State.Health.Status}}")
                           == "healthy", 60, poll=0.5)
                target_index = self.wait_caught_up(n, {1, 2, 3} - {n})
                log(f"node {n} recreated, healthy and caught up (index {target_index}) in "
                    f"{time.monotonic() - started:.1f} s; {writer.acked_count() - before} writes acknowledged meanwhile")
            self.wait_writes(writer)
        finally:
            writer.stop_event.set()
            writer.join(timeout=60)
        self.finish_writer(writer)

    def backup(self):
        """docs/operations.md, "Backup and restore", as written for compose: under the steady writer `mayfly backup
        create` from inside a node container (no node stops), `docker cp` to the host; then the file restored into new
        one-node clusters, one-off containers of the image on fresh volumes: `--dry-run`, `--ttl preserve`, `--ttl
        rebase`."""
        # Items with TTLs: `brief` ones are alive at the backup's replicated time B and expired before the restores,
        # `long` outlives the test.
        self.cli.ok("container", "create", "shop", "kept", "--pk", "/user", "--default-ttl", "-1")  # TTL on, per item
        originals = {}
        for item_id, ttl in (("brief1", BRIEF_TTL), ("brief2", BRIEF_TTL), ("long", 3600)):
            document = {"id": item_id, "user": "t", "ttl": ttl}
            response = self.cli.ok("item", "create", "shop", "kept", json.dumps(document))
            originals[item_id] = response["body"]
        earlier = set(self.acked_ledger)  # every earlier writer's acknowledged writes: applied long before the backup
        writer = self.Writer(self.cli, "b")
        writer.start()
        try:
            self.wait_writes(writer)
            summary, host_file = self.backup_create(writer)
            self.wait_writes(writer)  # acknowledged after the backup's index: these must not be in it
        finally:
            writer.stop_event.set()
            writer.join(timeout=60)
        self.finish_writer(writer)
        index, b_micros = summary["appliedIndex"], summary["appliedTime"]
        expiry = originals["brief1"]["_expiresAt"]
        check(b_micros < expiry * 1_000_000, f"too slow: the brief items (expiry {expiry}) expired before the "
              f"backup's time {b_micros} µs")
        # Exactly which acknowledged writes the backup holds: a create's answer carries the log index it was applied
        # at (sessionToken), and the backup is the state machine at appliedIndex, so the writes at or below it are
        # in the backup and the later ones are not. (The writer is sequential and the cluster calm: no re-sent
        # write whose answer names a later duplicate entry.) Writes with an unknown outcome may be either way.
        check(all(writer.tokens[i] > 0 for i in writer.acked), "a create answered without its log index")
        at_or_below = {i for i in writer.acked if writer.tokens[i] <= index}
        above = {i for i in writer.acked if writer.tokens[i] > index}
        check(at_or_below and above, f"the writer did not run across the backup's index {index}: "
              f"{len(at_or_below)} writes at or below it, {len(above)} above")
        expected_ledger = earlier | at_or_below
        maybe = set(self.unknown_ledger)
        log(f"backup at index {index}: {len(expected_ledger)} acknowledged ledger writes at or below it "
            f"({len(at_or_below)} of this writer's), {len(above)} above; brief items expire "
            f"{expiry - b_micros / 1e6:.1f} s after the backup's time")

        # The file into a volume the image's `mayfly` user can read (the host file is 0600), as docs/operations.md
        # shows.
        backups = self.docker_volume("restore-in")
        run(["docker", "run", "--rm", "--user", "root", "--network", "none", "--label", self.label,
             "-v", f"{host_file}:/in/backup.mfb:ro", "-v", f"{backups}:/out", "--entrypoint", "install", self.image,
             "-o", "mayfly", "-g", "mayfly", "-m", "0600", "/in/backup.mfb", "/out/backup.mfb"], timeout=120)
        wait_until("the wall clock passing the brief items' expiry", lambda: time.time() >= expiry + 1,
                   expiry + 1 - time.time() + 5)

        dry_name = self.extra_container("restore-dry")
        result = run(["docker", "run", "--rm", "--name", dry_name, "--label", self.label, "--network", "none",
                      "-v", f"{backups}:/backup:ro", self.image, "--id", "1", "--listen", "127.0.0.1:7100",
                      "--peers", "1=127.0.0.1:7100", "--data", "/var/lib/mayfly", "--restore",
                      "/backup/backup.mfb", "--dry-run"], timeout=120)
        dry = json.loads(result.stdout)
        modes = {m["mode"]: m for m in dry.get("modes", [])}
        check(dry.get("dryRun") is True and sorted(modes) == ["pause", "preserve", "rebase"], f"dry run: {dry}")
        items = summary["items"]
        for mode, at_once in (("preserve", 2), ("pause", 0), ("rebase", 0)):
            m = modes[mode]
            check(m["backupIndex"] == index and m["backupTime"] == b_micros, f"dry run {mode}: {m} vs {summary}")
            check(m["droppedExpiredAtBackup"]["items"] == 0 and m["expireAtOnce"]["items"] == at_once
                  and m["live"]["items"] == items - at_once,
                  f"dry run {mode}: want 0 dropped, {at_once} expiring at once, {items - at_once} live of the "
                  f"backup's {items} items: {m}")
        log(f"dry run: preserve {modes['preserve']['live']['items']} live + 2 expiring at once, pause and rebase "
            f"{items} live, none expired at B; " + ", ".join(f"{k} shift {v['shiftSeconds']} s" for k, v in
                                                              modes.items()))

        restored = {}
        for mode in ("preserve", "rebase"):
            cli, figures = self.restored_node(mode)
            check(figures["mode"] == mode and figures["backupIndex"] == index and figures["backupTime"] == b_micros,
                  f"restore {mode}: {figures}")
            ledger = self.list_items(cli, "ledger", pk="w")
            kept = {d["id"]: d for d in self.list_items(cli, "kept")}
            ids = {d["id"] for d in ledger}
            check(len(ids) == len(ledger), f"restore {mode}: an id listed twice")
            missing = sorted(expected_ledger - ids)
            extra = sorted(ids & above)
            strange = sorted(ids - expected_ledger - maybe)
            check(not missing and not extra and not strange,
                  f"restore {mode}: {len(missing)} writes at or below index {index} missing {missing[:5]}, "
                  f"{len(extra)} above it present {extra[:5]}, {len(strange)} never written {strange[:5]}")
            check(figures["live"]["items"] == len(ids) + len(kept), f"restore {mode}: figures say "
                  f"{figures['live']['items']} live items, the node lists {len(ids)} + {len(kept)}")
            shift = figures["shiftSeconds"]
            if mode == "preserve":
                check(sorted(kept) == ["long"] and figures["expireAtOnce"]["items"] == 2 and shift == 0,
                      f"restore preserve: want only `long` (the brief items expired while the backup sat on disk), "
                      f"got {sorted(kept)}; {figures}")
            else:
                want_shift = math.ceil((figures["now"] - b_micros) / 1e6)
                check(sorted(kept) == ["brief1", "brief2", "long"] and shift == want_shift
                      and figures["expireAtOnce"]["items"] == 0,
                      f"restore rebase: want brief1, brief2, long and a shift of {want_shift} s: got {sorted(kept)}; "
                      f"{figures}")
                for item_id, original in originals.items():
                    doc = kept[item_id]
                    check(doc["_ts"] == original["_ts"] + shift and doc["_expiresAt"] == original["_expiresAt"] + shift,
                          f"rebase: {item_id} was {original}, restored {doc} (shift {shift} s)")
                    left_at_backup = original["_expiresAt"] - b_micros / 1e6
                    check(doc["_expiresAt"] - figures["now"] / 1e6 >= left_at_backup,
                          f"rebase: {item_id} has less lifetime left than at the backup")
                    read = cli("item", "read", "shop", "kept", "--pk", "t", "--id", item_id, consistency="strong")
                    check(read.get("status") == 200, f"rebase: {item_id} does not read: {read}")
            restored[mode] = len(ids)
            log(f"--ttl {mode}: a new one-node cluster from the backup holds exactly the {len(ids)} ledger writes at "
                f"or below index {index} and {sorted(kept)} of shop/kept (shift {shift} s, "
                f"{figures['expireAtOnce']['items']} expired at once)")
            self.remove_extras(f"restored-{mode}")
        self.remove_extras()
        left = [kind for kind in ("ps -a", "volume ls") if run(["docker", *kind.split(), "-q", "--filter",
                                                                  f"label={self.label}"]).stdout.strip()]
        check(not left, f"the restores left {left} behind")
        log("backup restored with --ttl preserve and --ttl rebase; the containers and volumes made for it removed")

    def backup_create(self, writer):
        """`mayfly backup create` inside mayfly1 (its CLI reaches every node by its in-network name), `docker cp` out.
        Returns the JSON summary and the host file, both checked."""
        before = {n: (self.inspect(f"mayfly{n}", "{{.State.StartedAt}}"),
                      self.inspect(f"mayfly{n}", "{{.RestartCount}}")) for n in (1, 2, 3)}
        leader = self.wait_leader({1, 2, 3})
        acked_before = writer.acked_count()
        container = self.container("mayfly1")
        inside = "/tmp/mayfly-backup.mfb"
        result = run(["docker", "exec", container, "mayfly", "--endpoints", "mayfly1:7100,mayfly2:7100,mayfly3:7100",
                      "backup", "create", "--out", inside], timeout=600)
        during = writer.acked_count() - acked_before
        response = json.loads(result.stdout)
        check(response.get("status") == 200, f"backup create: {response}")
        summary = response["body"]
        host_file = os.path.join(self.tmp, "mayfly.mfb")
        run(["docker", "cp", f"{container}:{inside}", host_file], timeout=120)
        run(["docker", "exec", container, "rm", "-f", inside], timeout=60)
        for key in ("appliedIndex", "appliedTime", "appliedTimeUtc", "items", "itemBytes", "bytes", "sha256",
                    "servedBy", "seconds"):
            check(key in summary, f"backup summary without {key}: {summary}")
        check(summary["servedBy"] in (1, 2, 3) and summary["servedBy"] != leader,
              f"backup served by node {summary['servedBy']}, not a follower (leader {leader})")
        with open(host_file, "rb") as f:
            data = f.read()
        check(len(data) == summary["bytes"], f"backup file has {len(data)} bytes, the summary says {summary['bytes']}")
        magic, version, index, time_micros, node, _created, _zero = struct.unpack(">8sIQqQqI", data[:48])
        tail, body_bytes, items, item_bytes, digest = struct.unpack(">8sQQQ32s", data[-64:])
        check(magic == b"MAYFLYBK" and version == 1 and tail == b"MFBKTAIL", "backup file: bad header or trailer")
        check((index, time_micros, node) == (summary["appliedIndex"], summary["appliedTime"], summary["servedBy"]),
              f"backup header (index {index}, time {time_micros}, node {node}) is not the summary's")
        check((body_bytes, items, item_bytes) == (len(data) - 112, summary["items"], summary["itemBytes"]),
              f"backup trailer ({body_bytes}, {items}, {item_bytes}) is not the file's or the summary's")
        sha = hashlib.sha256(data[:-64]).digest()
        check(sha == digest and sha.hex() == summary["sha256"], "backup checksum: the file's SHA-256 is not the "
              "trailer's or the summary's")
        after = {n: (self.inspect(f"mayfly{n}", "{{.State.StartedAt}}"),
                     self.inspect(f"mayfly{n}", "{{.RestartCount}}")) for n in (1, 2, 3)}
        check(before == after and all(self.inspect(f"mayfly{n}", "{{.State.Running}}") == "true" for n in (1, 2, 3)),
              f"a node stopped or restarted during the backup: {before} -> {after}")
        check(all(self.node_status(n) for n in (1, 2, 3)), "a node does not answer after the backup")
        log(f"backup create (inside mayfly1): node {summary['servedBy']} (a follower; leader {leader}) at index "
            f"{summary['appliedIndex']} ({summary['appliedTimeUtc']}), {summary['items']} items, {len(data)} bytes "
            f"in {summary['seconds']:.2f} s, sha256 checked; no node stopped; {during} writes acknowledged meanwhile")
        return summary, host_file

    def restored_node(self, mode):
        """A new one-node cluster restored from the backup with `--ttl mode`: a one-off container of the image on an
        empty volume, keyed and TLS with the deployment's secrets, no network (the CLI inside talks to it). Returns
        a Cli for it (docker exec) and the restore's figures (its first line of stdout)."""
        name = self.extra_container(f"restored-{mode}")
        data = self.docker_volume(f"restored-{mode}-data")
        secrets = "/run/secrets/mayfly"
        run(["docker", "run", "-d", "--name", name, "--label", self.label, "--hostname", "mayfly1",
             "--network", "none", "-e", f"MAYFLY_KEY_FILE={secrets}/admin.key", "-e", f"MAYFLY_TLS_CA={secrets}/ca.crt",
             "-v", f"{self.project}_restore-in:/backup:ro", "-v", f"{data}:/var/lib/mayfly",
             "-v", f"{self.project}_mayfly-secrets:{secrets}:ro", self.image,
             "--id", "1", "--listen", "0.0.0.0:7100", "--peers", "1=mayfly1:7100", "--data", "/var/lib/mayfly",
             "--cluster", f"{self.project}-restored", "--keys-file", f"{secrets}/keys",
             "--cluster-secret-file", f"{secrets}/cluster-secret", "--tls-cert", f"{secrets}/mayfly1.crt",
             "--tls-key", f"{secrets}/mayfly1.key", "--tls-ca", f"{secrets}/ca.crt",
             "--restore", "/backup/backup.mfb", "--ttl", mode], timeout=120)

        def figures():
            logs = run(["docker", "logs", name], timeout=30)
            check("critical" not in logs.stderr, f"restore {mode}: {logs.stderr[-2000:]}")
            lines = logs.stdout.strip().splitlines()
            return json.loads(lines[0]) if lines else None
        restore = wait_until(f"restore --ttl {mode} printing its figures", figures, 120, poll=0.5)
        cli = Cli(None, {}, container=name)

        def leads():
            response = cli("cluster", "status", timeout_ms=3000)
            nodes = (response.get("body") or {}).get("nodes", []) if isinstance(response.get("body"), dict) else []
            return [n for n in nodes if n.get("id") == 1 and n.get("role") == "leader"]
        wait_until(f"the node restored with --ttl {mode} leading its new cluster", leads, 60, poll=0.5)
        return cli, restore

    def list_items(self, cli, container, pk=None, node=None):
        """Every item of shop/<container> (in partition `pk` if given) as `cli` lists it, page by page."""
        items, continuation = [], None
        for _ in range(100):
            args = ["item", "list", "shop", container, "--max-items", "1000"]
            if pk:
                args += ["--pk", pk]
            if continuation:
                args += ["--continuation", continuation]
            response = cli.ok(*args, node=node, consistency="eventual")
            items.extend(response["body"])
            continuation = response.get("continuation")
            if not continuation:
                return items
        raise Failure("listing did not end after 100 pages")

    def fourth_node(self):
        """docs/operations.md: docker-compose.node4.yml, add-member from inside the network, then remove it again."""
        self.compose_files.append(os.path.join(self.deploy, "docker-compose.node4.yml"))
        self.compose("up", "-d", "--no-build", "mayfly4")
        self.cli.endpoints[4] = f"127.0.0.1:{self.rpc_ports[4]}"
        run(["docker", "exec", self.container("mayfly1"), "mayfly", "--endpoints",
             "mayfly1:7100,mayfly2:7100,mayfly3:7100", "cluster", "add-member", "4", "mayfly4:7100"], timeout=60)
        wait_until("node 4 a follower", lambda: (self.node_status(4) or {}).get("role") == "follower", 60)
        self.wait_caught_up(4, {1, 2, 3})
        missing = sorted(set(self.acked_ledger) - self.listed_ids(4))
        check(not missing, f"node 4 misses {len(missing)} acknowledged writes")
        response = self.cli.ok("item", "create", "shop", "ledger", json.dumps({"id": "four", "pk": "w"}))
        self.acked_ledger.append("four")
        log(f"node 4 joined, caught up with all {len(self.acked_ledger)} writes; a write with 4 members served by "
            f"node {response['servedBy']}")
        self.cli.ok("cluster", "remove-member", "4")
        wait_until("a leader among 1-3 after node 4 left", lambda: self.agreed_leader({1, 2, 3}), 30)
        self.compose("rm", "-sf", "mayfly4")
        del self.cli.endpoints[4]
        log("node 4 removed from the cluster and its container removed (its volume goes with down -v)")

    # 3. the GC-backlog alert -------------------------------------------------------------------------------------
    def gc_starved(self):
        self.cli.ok("container", "create", "shop", "starved", "--pk", "/user", "--default-ttl", "12",
                    "--throughput", "100000")
        expiries = []
        for i in range(30):
            response = self.cli.ok("item", "create", "shop", "starved",
                                   json.dumps({"id": f"s{i}", "user": f"u{i % 5}", "pad": "x" * 200}))
            expiries.append(response["body"]["_ts"] + 12)
        # Starve the collector: 10 RU/s, all of it taken by a load loop (each upsert costs 5 RU, so 2/s fill it).
        self.cli.ok("container", "set", "shop", "starved", "--throughput", "10")
        check(time.time() < min(expiries), "too slow: items expired before the collector was starved")
        stop = threading.Event()
        load_counts = [0, 0]

        def load(k):
            i = 0
            while not stop.is_set():
                i += 1
                self.cli("item", "upsert", "shop", "starved", json.dumps({"id": f"load{k}-{i % 4}", "user": "load"}),
                         timeout_ms=5000)
                load_counts[k] += 1
        loaders = [threading.Thread(target=load, args=(k,), daemon=True) for k in range(2)]
        for t in loaders:
            t.start()
        started = time.monotonic()
        try:
            log(f"30 items expire in {max(expiries) - time.time():.1f} s; load loop on shop/starved (10 RU/s)")
            alert = wait_until("MayflyGcBacklogOld firing for shop/starved",
                               lambda: self.firing("MayflyGcBacklogOld", container="shop/starved"), 150, poll=1)
            log(f"MayflyGcBacklogOld firing after {time.monotonic() - started:.1f} s: "
                f"{[(a['labels']['node'], a['value']) for a in alert]}")
            for n in (1, 2, 3):
                backlog = self.metric(n, "mayfly_ttl_gc_backlog_items", {"container": "shop/starved"})
                spare = self.metric(n, "mayfly_ttl_gc_spare_ru", {"container": "shop/starved"})
                age = self.metric(n, "mayfly_ttl_gc_oldest_expired_age_seconds", {"container": "shop/starved"})
                log(f"node {n}: backlog {backlog} items, oldest expired {age} s, spare RU {spare}")
            throttled = sum(self.metric(n, "mayfly_requests_throttled_total", {"container": "shop/starved"}) or 0
                            for n in (1, 2, 3))
            check(throttled > 0, "the load loop was never throttled: the collector was not starved by RU")
            log(f"throttled requests so far: {throttled:.0f}; load requests: {sum(load_counts)}")
        finally:
            stop.set()
            for t in loaders:
                t.join(timeout=30)
        self.cli.ok("container", "set", "shop", "starved", "--throughput", "100000")
        for n in (1, 2, 3):
            wait_until(f"node {n} collecting shop/starved once RU are back",
                       lambda n=n: self.metric(n, "mayfly_ttl_gc_backlog_items", {"container": "shop/starved"}) == 0,
                       60, poll=0.5)
        wait_until("MayflyGcBacklogOld resolving", lambda: not self.firing("MayflyGcBacklogOld"), 60, poll=1)
        log("backlog collected on every node once RU were given back; the alert resolved")

    # 4. dashboard queries ----------------------------------------------------------------------------------------
    @staticmethod
    def dashboard_queries(dashboard, raw=False):
        queries = []
        for panel in dashboard["panels"]:
            for target in panel.get("targets", []):
                expr = target["expr"]
                if not raw:
                    expr = (expr.replace("$__rate_interval", "1m").replace("$node", ".*")
                            .replace("$container", ".*"))
                queries.append(expr if raw else (panel["title"], target["refId"], expr))
        return queries

    def dashboard(self):
        dashboard = json.load(open(os.path.join(self.deploy, "grafana", "dashboards", "mayfly.json")))
        for variable in dashboard["templating"]["list"]:
            match = re.fullmatch(r"label_values\((\w+), (\w+)\)", variable["definition"])
            check(match, f"variable {variable['name']}: unexpected query {variable['definition']}")
            values = self.prometheus(f"/api/v1/label/{match.group(2)}/values", **{"match[]": match.group(1)})
            check(values, f"variable ${variable['name']} ({variable['definition']}) has no values")
            log(f"variable ${variable['name']}: {values}")
        end = time.time()
        start = self.started_wall
        empty = []
        queries = self.dashboard_queries(dashboard)
        for title, ref, expr in queries:
            data = self.prometheus("/api/v1/query_range", query=expr, start=f"{start:.3f}", end=f"{end:.3f}", step="5")
            finite = [v for series in data["result"] for _, v in series["values"] if math.isfinite(float(v))]
            series = len(data["result"])
            if not finite:
                empty.append(f"{title} [{ref}] {expr}")
            log(f"  {'ok ' if finite else 'NO DATA'} {title} [{ref}]: {series} series, {len(finite)} samples")
        check(not empty, "dashboard queries without data:\n  " + "\n  ".join(empty))
        log(f"all {len(queries)} queries of {len([p for p in dashboard['panels'] if p['type'] != 'row'])} panels "
            "returned data")

    # 5. persistence and teardown ---------------------------------------------------------------------------------
    def recreate(self):
        self.mounted_volumes()
        self.compose("down", "--timeout", "30", timeout=180)
        left = run(["docker", "ps", "-aq", "--filter", f"label=com.docker.compose.project={self.project}"]).stdout
        check(not left.strip(), "containers left after docker-compose down")
        self.compose("up", "-d", "--no-build", "mayfly1", "mayfly2", "mayfly3", "prometheus", timeout=300)
        leader = self.wait_leader({1, 2, 3}, timeout=90)
        target = self.node_status(leader)["commit"]
        for n in (1, 2, 3):
            wait_until(f"node {n} applying up to {target}",
                       lambda n=n: (self.node_status(n) or {}).get("applied", 0) >= target, 60)
            missing = sorted(set(self.acked_ledger) - self.listed_ids(n))
            check(not missing, f"after down/up node {n} lost {len(missing)} acknowledged writes")
        log(f"containers recreated on the same volumes: all {len(self.acked_ledger)} acknowledged writes there "
            f"on every node (leader {leader})")

    def leftovers(self):
        label = f"label=com.docker.compose.project={self.project}"
        found = {
            "containers": run(["docker", "ps", "-aq", "--filter", label]).stdout.split(),
            "networks": run(["docker", "network", "ls", "-q", "--filter", label]).stdout.split(),
            "volumes": run(["docker", "volume", "ls", "-q", "--filter", label]).stdout.split(),
            "named": [line for line in run(["docker", "ps", "-a", "--format", "{{.Names}}"]).stdout.split()
                      + run(["docker", "network", "ls", "--format", "{{.Name}}"]).stdout.split()
                      + run(["docker", "volume", "ls", "--format", "{{.Name}}"]).stdout.split()
                      if line.startswith(self.project)],
        }
        return {k: v for k, v in found.items() if v}

    def mounted_volumes(self):
        """Every volume the project's containers mount, the anonymous ones (an image's VOLUME) included: those carry
        no project label, so leftovers() cannot see them. Remembered in seen_volumes: called before every `down`,
        whose removed containers' anonymous volumes are no one's afterwards."""
        label = f"label=com.docker.compose.project={self.project}"
        ids = run(["docker", "ps", "-aq", "--filter", label]).stdout.split()
        if not ids:
            return self.seen_volumes
        template = '{{range .Mounts}}{{if eq .Type "volume"}}{{.Name}} {{end}}{{end}}'
        self.seen_volumes |= set(run(["docker", "inspect", "-f", template, *ids], timeout=60).stdout.split())
        return self.seen_volumes

    def remove_volumes_left(self, volumes):
        """Which of `volumes` still exist; they are removed (the caller decides whether that is a failure)."""
        left = [v for v in sorted(volumes) if run(["docker", "volume", "inspect", v], check_rc=False).returncode == 0]
        if left:
            run(["docker", "volume", "rm", "-f", *left], timeout=120, check_rc=False)
        return left

    def teardown(self):
        self.remove_extras()
        volumes = self.mounted_volumes()
        self.compose("down", "-v", "--remove-orphans", "--timeout", "30", timeout=180)
        self.compose_up = False
        left = self.leftovers()
        check(not left, f"docker-compose down -v left behind: {left}")
        anonymous = self.remove_volumes_left(volumes)
        check(not anonymous, f"docker-compose down -v left volumes the containers had mounted: {anonymous}")
        log(f"docker-compose down -v: no container, network or volume of the test is left (of the {len(volumes)} "
            "volumes its containers mounted before each down, anonymous ones included, none is left)")

    def emergency_cleanup(self):
        try:
            self.remove_extras()
        except Failure as error:
            log(f"cleanup failed: {error}")
        if self.compose_up:
            log("cleaning up: docker-compose down -v")
            try:
                for service in ("mayfly1", "mayfly2", "mayfly3", "prometheus"):
                    logs = run(["docker", "logs", "--tail", "40", self.container(service)], timeout=30,
                               check_rc=False)
                    print(f"----- {service} (last 40 lines)\n{logs.stdout}{logs.stderr}", flush=True)
                volumes = self.mounted_volumes()
                self.compose("down", "-v", "--remove-orphans", "--timeout", "10", timeout=180)
                self.remove_volumes_left(volumes)
                left = self.leftovers()
                if left:
                    log(f"left behind after cleanup: {left}")
            except Failure as error:
                log(f"cleanup failed: {error}")
        shutil.rmtree(self.tmp, ignore_errors=True)


def remove_stale_projects():
    """Removes what earlier runs of this test left behind when they were killed outright (SIGKILL skips cleanup):
    compose projects named mayflytest<PID> whose process is gone, and the containers and volumes such a run made
    outside compose (labelled org.mayfly.deploy-test=mayflytest<PID>). Only this test makes such projects."""
    kinds = {"container": ["docker", "ps", "-a"], "network": ["docker", "network", "ls"],
             "volume": ["docker", "volume", "ls"]}
    for kind, listing in kinds.items():  # containers first: a volume in use cannot be removed
        for label in ("com.docker.compose.project", EXTRA_LABEL):
            name = "{{.ID}}" if kind != "volume" else "{{.Name}}"
            rows = run(listing + ["--filter", f"label={label}", "--format",
                                  f'{{{{.Label "{label}"}}}} {name}']).stdout.split("\n")
            for row in rows:
                project, _, ident = row.partition(" ")
                match = re.fullmatch(r"mayflytest(\d+)", project)
                if not match or int(match.group(1)) == os.getpid():
                    continue
                try:
                    os.kill(int(match.group(1)), 0)
                    continue  # that run is still going
                except ProcessLookupError:
                    pass
                except PermissionError:
                    continue
                log(f"removing {kind} {ident} left by an earlier run ({project})")
                remove = {"container": ["docker", "rm", "-f", "-v"], "network": ["docker", "network", "rm"],
                          "volume": ["docker", "volume", "rm", "-f"]}[kind]
                run(remove + [ident], timeout=60, check_rc=False)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--source-dir", default=os.path.join(here, "..", ".."))
    parser.add_argument("--build-dir", default=os.environ.get("MAYFLY_BUILD_DIR", "build"))
    parser.add_argument("--cli", help="host-built mayfly CLI (default BUILD_DIR/client/mayfly)")
    parser.add_argument("--default-image-mode", choices=("full", "prebuilt"), default="full",
                        help="the mode when neither --image-mode nor $MAYFLY_DEPLOY_IMAGE_MODE says one")
    parser.add_argument("--image-mode", choices=("full", "prebuilt"),
                        default=os.environ.get("MAYFLY_DEPLOY_IMAGE_MODE") or None)
    parser.add_argument("--image", default="mayfly:test")
    parser.add_argument("--base-image", default="mayfly-base:bookworm")
    parser.add_argument("--prometheus-image", default="mayfly-prometheus:bookworm")
    parser.add_argument("--keep", action="store_true", help="leave the cluster up on failure")
    options = parser.parse_args()
    options.build_dir = os.path.abspath(options.build_dir)
    options.image_mode = options.image_mode or options.default_image_mode
    options.cli = os.path.abspath(options.cli or os.path.join(options.build_dir, "client", "mayfly"))

    info = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True,
                          timeout=60) if shutil.which("docker") else None
    if info is None or info.returncode != 0:
        why = "docker is not installed" if info is None else (info.stderr.strip() or info.stdout.strip())
        print(f"SKIPPED: no Docker engine answers (docker info failed: {why})", flush=True)
        return SKIP
    for ok, why in ((shutil.which("docker-compose"), "docker-compose is not installed (Debian: apt-get install "
                     "docker-compose)"), (os.access(options.cli, os.X_OK), f"{options.cli} is not built")):
        if not ok:
            log(f"FAILED: {why}")
            return 1
    log(f"Docker engine {info.stdout.strip()}, {run(['docker-compose', 'version', '--short']).stdout.strip()} "
        f"compose; image mode {options.image_mode}")

    remove_stale_projects()
    deployment = Deployment(options)

    def on_signal(signum, _frame):
        raise Interrupted(f"interrupted by signal {signum}")
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    passed = False
    try:
        d = deployment
        log(f"project {d.project}: RPC ports {d.rpc_ports}, metrics {d.metrics_ports}, Prometheus {d.prometheus_port}")
        d.phase("static checks (dashboard generator, metric names, compose config)", d.static_checks)
        d.phase("images (base, mayfly, prometheus)", d.build_images)
        d.write_test_prometheus_files()
        d.phase("promtool check rules / test rules / check config", d.promtool)
        d.phase("secrets (deploy/make-secrets.sh)", d.make_secrets)
        d.phase("docker-compose up (3 nodes + Prometheus, keyed)", d.bring_up)
        d.phase("TTL: items expire on all three containers", d.ttl_expiry)
        d.phase("failover: docker stop, docker kill, network disconnect", d.failover)
        d.phase("docs/operations.md: rolling restart with leadership transfer", d.rolling_restart)
        d.phase("docs/operations.md: online backup under the writer, restored into new clusters", d.backup)
        d.phase("docs/operations.md: adding (and removing) a fourth node", d.fourth_node)
        d.phase("GC starved by throughput: the backlog alert fires", d.gc_starved)
        d.phase("every dashboard query returns data", d.dashboard)
        d.phase("docker-compose down + up keeps the data (volumes)", d.recreate)
        d.phase("docker-compose down -v leaves nothing behind", d.teardown)
        passed = True
    except (Failure, Interrupted) as error:
        log(f"FAILED: {error}")
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second signal must not cut the cleanup short
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if not passed and options.keep and deployment.compose_up:
            log(f"--keep: cluster left up (project {deployment.project}); remove with: "
                f"docker-compose -p {deployment.project} -f {deployment.compose_file} down -v")
        else:
            deployment.emergency_cleanup()
    for name, seconds in deployment.timings:
        log(f"  {seconds:6.1f} s  {name}")
    log(("PASSED" if passed else "FAILED") + f" in {time.monotonic() - T0:.1f} s")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
