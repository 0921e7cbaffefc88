#!/usr/bin/env bash
# Installs what `make bench-compare` needs beyond deploy/install-deps.sh, all from Debian's archive:
#   etcd-server (3.4, the etcd binary), redis-server (7.0), golang-go with golang-etcd-server-dev (etcd's Go clientv3
#   source) and golang-github-gomodule-redigo-dev (a Redis client), which the load tool in bench/compare/loadtool
#   builds against offline, in GOPATH mode; python3 (the orchestrator, bench/compare/run.py).
# Idempotent: when everything is already installed it only checks and returns.
set -euo pipefail

wanted=(etcd-server golang-go golang-etcd-server-dev golang-github-gomodule-redigo-dev redis-server python3)

# Recommends stay out and only missing packages are installed (deploy/install-deps.sh); the benchmark starts its own
# etcd and Redis processes on its own ports, never the packages' system services.
exec bash "$(dirname "$0")/../../deploy/install-deps.sh" --only bench-compare "${wanted[@]}"
