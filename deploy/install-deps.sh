#!/usr/bin/env bash
# Installs every Debian package Mayfly needs to build, run, test and benchmark.
# Idempotent: when everything is already installed it only checks and returns.
# Used by `make`, by CI and by deploy/Dockerfile.
set -euo pipefail

build_packages=(
  build-essential cmake ninja-build pkg-config
  libsnappy-dev libleveldb-dev            # storage (snappy must be named: leveldb's CMake config needs it)
  libjemalloc-dev                         # mayflyd's allocator (common/allocator.h)
  libcapnp-dev capnproto                  # RPC and the wire schemas
  libspdlog-dev libfmt-dev                # logging
  libboost1.81-dev libboost-json1.81-dev  # Boost.Asio driver, Boost.JSON documents (1.81: first Debian Boost with JSON)
  prometheus-cpp-dev                      # metrics
  libgtest-dev libgmock-dev               # tests
  libcli11-dev                            # command-line parsing
  libssl-dev                              # HMAC proofs of the handshake (common/auth), TLS under kj-tls
  openssl                                 # make run and deploy/ generate keys and certificates with it
)
tool_packages=(
  faketime curl ca-certificates procps psmisc
  python3-venv                            # the Cosmos DB SDK tests (tests/gateway): a venv with azure-cosmos from PyPI
  iproute2 iptables                       # the fault campaign (tests/chaos): network namespaces, partitions
  clang-14 libclang-rt-14-dev             # libFuzzer for the query fuzz target (tests/fuzz; skipped without clang)
  debootstrap                             # deploy/make-base-image.sh: the Docker base image without a registry
)

wanted=("${build_packages[@]}" "${tool_packages[@]}")
if [ "${MAYFLY_DEPS_MINIMAL:-0}" = 1 ]; then wanted=("${build_packages[@]}"); fi
label=install-deps
# `install-deps.sh --only LABEL PACKAGE...`: the same check-then-install for other packages (bench/compare uses it).
if [ "${1:-}" = --only ]; then
  label=$2
  shift 2
  wanted=("$@")
fi

missing=()
for p in "${wanted[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "$label: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "$label: done"
