"""The quickstart of the official Rust Cosmos DB SDK (azure_data_cosmos 1.1.0-beta.1, crates.io) against the cluster:
tests/gateway/rust_quickstart is built with cargo (debug) and run against node 1's gateway; it checks every answer
itself (database and container creation, create/read/upsert, replace with an ETag precondition and a stale one's
412, queries with parameters, patch, an item's own ttl expiring, delete) and exits non-zero on a mismatch.

Without cargo it fails (MAYFLY_SKIP_RUST_SDK=1 skips it on purpose). The build goes to $MAYFLY_RUST_TARGET_DIR, else build/rust-target (next to
the mayflyd binary's directory), so a second run reuses it; the first build of the SDK takes minutes."""
import os
import shutil
import subprocess
import time

import pytest

from conftest import MAYFLYD, TIME_SCALE, unique

CRATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rust_quickstart")
BUILD_TIMEOUT_S = 1200  # a cold build compiles the SDK and its ~220 dependencies
RUN_TIMEOUT_S = 180 * TIME_SCALE


def text(output):
    """TimeoutExpired carries the output read so far as bytes, even with text=True."""
    return output.decode(errors="replace") if isinstance(output, bytes) else (output or "")


def find_cargo():
    for cargo in (shutil.which("cargo"), os.path.expanduser("~/.cargo/bin/cargo"), "/root/.cargo/bin/cargo"):
        if cargo and os.access(cargo, os.X_OK):
            return cargo
    return None


def target_dir():
    return os.environ.get("MAYFLY_RUST_TARGET_DIR") or os.path.normpath(
        os.path.join(os.path.dirname(os.path.abspath(MAYFLYD)), "..", "rust-target"))


def build(cargo):
    """Builds the crate (offline from cargo's cache first, else fetching from crates.io); returns the binary's path."""
    env = dict(os.environ, CARGO_TARGET_DIR=target_dir())
    env["PATH"] = os.path.dirname(cargo) + os.pathsep + env.get("PATH", "")  # rustc next to a rustup cargo
    deadline = time.monotonic() + BUILD_TIMEOUT_S
    outputs = []
    for offline in (["--offline"], []):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        argv = [cargo, "build", "--locked", *offline]
        try:
            run = subprocess.run(argv, cwd=CRATE, env=env, capture_output=True, text=True, timeout=remaining)
        except subprocess.TimeoutExpired as timeout:
            raise AssertionError(f"{' '.join(argv)} did not finish within {BUILD_TIMEOUT_S} s:\n"
                                 f"{text(timeout.stderr)[-6000:]}")
        if run.returncode == 0:
            return os.path.join(target_dir(), "debug", "rust_quickstart")
        outputs.append(f"$ {' '.join(argv)} -> exit {run.returncode}\n{run.stderr[-6000:]}")
    raise AssertionError("cargo build of tests/gateway/rust_quickstart failed:\n" + "\n".join(outputs))


# run_pytest.sh gives every test 180 s (pytest-timeout); a cold cargo build alone may take longer.
@pytest.mark.timeout(BUILD_TIMEOUT_S + RUN_TIMEOUT_S + 60)
def test_rust_sdk_quickstart(cluster):
    cargo = find_cargo()
    if cargo is None:
        if os.environ.get("MAYFLY_SKIP_RUST_SDK") == "1":
            pytest.skip("MAYFLY_SKIP_RUST_SDK=1: the Rust SDK quickstart is skipped on purpose")
        pytest.fail("cargo is not installed (not on PATH, nor in ~/.cargo/bin): install Rust's cargo (rustup) to build "
                    "the Rust SDK quickstart, or set MAYFLY_SKIP_RUST_SDK=1 to skip it deliberately")
    binary = build(cargo)
    database = unique("rust-quickstart")
    argv = [binary, cluster.url(1), cluster.cosmos_key("readwrite"), database]
    started = time.monotonic()
    try:
        run = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                             env=dict(os.environ, MAYFLY_TEST_TIME_SCALE=str(TIME_SCALE)))
    except subprocess.TimeoutExpired as timeout:
        raise AssertionError(f"rust_quickstart did not finish within {RUN_TIMEOUT_S} s; its output so far:\n"
                             f"{text(timeout.stdout)}\n{text(timeout.stderr)}")
    output = f"--- stdout ---\n{run.stdout}--- stderr ---\n{run.stderr}"
    print(f"rust_quickstart ran {time.monotonic() - started:.1f} s\n{output}")
    assert run.returncode == 0, f"rust_quickstart exited {run.returncode}:\n{output}"
    assert "OK: all steps passed" in run.stdout, output
