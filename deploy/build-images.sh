#!/usr/bin/env bash
# Builds the images docker-compose.yml runs, without any registry:
#   mayfly:latest              deploy/Dockerfile (multi-stage: compiled inside Docker with deploy/install-deps.sh)
#   mayfly-prometheus:bookworm deploy/prometheus/Dockerfile (Debian's prometheus package), with --prometheus
# on a base image made locally from Debian's packages (deploy/make-base-image.sh, cached by its tag), unless --base
# names one that can be pulled (e.g. debian:bookworm-slim).
#
#   deploy/build-images.sh [--base mayfly-base:bookworm] [--tag mayfly:latest] [--prometheus]
#                          [--prometheus-tag mayfly-prometheus:bookworm] [--prebuilt BUILD_DIR]
#
# --prebuilt BUILD_DIR: fast path; instead of compiling inside Docker, puts BUILD_DIR/mayflyd/mayflyd and
# BUILD_DIR/client/mayfly (built on this Debian 12 host) on the Dockerfile's `runtime-base` stage
# (deploy/Dockerfile.prebuilt). Same runtime image otherwise. Every build uses Docker's layer cache.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
base=mayfly-base:bookworm
tag=mayfly:latest
prometheus=0
prometheus_tag=mayfly-prometheus:bookworm
prebuilt=""
while [ $# -gt 0 ]; do
  case "$1" in
    --base) base="$2"; shift 2 ;;
    --tag) tag="$2"; shift 2 ;;
    --prometheus) prometheus=1; shift ;;
    --prometheus-tag) prometheus_tag="$2"; shift 2 ;;
    --prebuilt) prebuilt="$2"; shift 2 ;;
    *) echo "usage: $0 [--base IMAGE] [--tag NAME:TAG] [--prometheus] [--prometheus-tag NAME:TAG] [--prebuilt BUILD_DIR]" >&2
       exit 2 ;;
  esac
done

log() { echo "build-images: $*" >&2; }
elapsed() { echo "$(( $(date +%s) - $1 )) s"; }

# The classic builder and BuildKit both work; the classic one is what Debian's docker.io 20.10 runs by default.
if ! docker image inspect "$base" >/dev/null 2>&1; then
  if [ "$base" = mayfly-base:bookworm ] || [[ "$base" == mayfly-base:* ]]; then
    bash "$here/make-base-image.sh" --tag "$base"
  else
    log "$base is not here; docker will try to pull it"
  fi
fi

# Replaces TAG, then removes the image TAG named before if nothing uses it any more (keeps rebuilds from piling up).
build_tagged() {
  local tag_name="$1"; shift
  local before after
  before="$(docker image inspect -f '{{.Id}}' "$tag_name" 2>/dev/null || true)"
  local build_log
  build_log="$(mktemp /tmp/mayfly-docker-build.XXXXXX.log)"
  if ! docker build -t "$tag_name" "$@" >"$build_log" 2>&1; then
    tail -60 "$build_log" >&2
    log "docker build of $tag_name failed (whole log: $build_log)"
    return 1
  fi
  rm -f "$build_log"
  after="$(docker image inspect -f '{{.Id}}' "$tag_name")"
  if [ -n "$before" ] && [ "$before" != "$after" ]; then
    docker image rm "$before" >/dev/null 2>&1 || true
  fi
}

case "$tag" in *:*) ;; *) tag="$tag:latest" ;; esac
started=$(date +%s)
if [ -n "$prebuilt" ]; then
  for binary in "$prebuilt/mayflyd/mayflyd" "$prebuilt/client/mayfly"; do
    [ -x "$binary" ] || { log "$binary is not built"; exit 1; }
  done
  runtime_base="${tag%%:*}-runtime-base:${tag##*:}"
  context="$(mktemp -d /tmp/mayfly-image-context.XXXXXX)"
  trap 'rm -rf "$context"' EXIT
  log "runtime-base stage of deploy/Dockerfile -> $runtime_base (BASE=$base)"
  build_tagged "$runtime_base" --target runtime-base --build-arg BASE="$base" -f "$here/Dockerfile" "$context"
  strip -o "$context/mayflyd" "$prebuilt/mayflyd/mayflyd"
  strip -o "$context/mayfly" "$prebuilt/client/mayfly"
  log "$tag from host binaries in $prebuilt (deploy/Dockerfile.prebuilt)"
  build_tagged "$tag" --build-arg RUNTIME_BASE="$runtime_base" -f "$here/Dockerfile.prebuilt" "$context"
else
  log "$tag from deploy/Dockerfile (BASE=$base; compiles inside Docker unless the layers are cached)"
  build_tagged "$tag" --build-arg BASE="$base" -f "$here/Dockerfile" "$root"
  # Each source change leaves the previous build stage behind as an untagged image (label org.mayfly.stage=build).
  # Remove those older than this build: the newest stays as the cache, shared dependency layers stay with it.
  for image in $(docker images -q --no-trunc -f dangling=true -f label=org.mayfly.stage=build); do
    created="$(date -d "$(docker image inspect -f '{{.Created}}' "$image")" +%s 2>/dev/null || echo "$started")"
    if [ "$created" -lt "$started" ]; then docker image rm "$image" >/dev/null 2>&1 || true; fi
  done
fi
log "$tag ready in $(elapsed "$started")"

if [ "$prometheus" = 1 ]; then
  started=$(date +%s)
  build_tagged "$prometheus_tag" --build-arg BASE="$base" "$here/prometheus"
  log "$prometheus_tag ready in $(elapsed "$started")"
fi
