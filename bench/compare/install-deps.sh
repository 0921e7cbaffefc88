#!/usr/bin/env bash
# Installs what `make bench-compare` needs beyond deploy/install-deps.sh, all from Debian's archive:
#   etcd-server (3.4, the etcd binary), redis-server (7.0), golang-go with golang-etcd-server-dev (etcd's Go clientv3
#   source) and golang-github-gomodule-redigo-dev (a Redis client), which the load tool in bench/compare/loadtool
#   builds against offline, in GOPATH mode; python3 (the orchestrator, bench/compare/run.py).
# Idempotent: when everything is already installed it only checks and returns.
set -euo pipefail

wanted=(etcd-server golang-go golang-etcd-server-dev golang-github-gomodule-redigo-dev redis-server python3)

missing=()
for p in "${wanted[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "bench-compare: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# Recommends stay out (as in deploy/install-deps.sh); the benchmark starts its own etcd and Redis processes on its
# own ports, never the packages' system services.
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "bench-compare: done"
