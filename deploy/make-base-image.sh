#!/usr/bin/env bash
# Makes a Debian bookworm base image locally, for machines where no image can be pulled (no registry):
# a minimal root filesystem built from Debian's packages with debootstrap (minbase variant), imported with
# `docker import` and tagged. The real Dockerfile then builds offline from it:
#
#   deploy/make-base-image.sh                     # -> mayfly-base:bookworm (does nothing if that tag exists)
#   docker build -f deploy/Dockerfile --build-arg BASE=mayfly-base:bookworm -t mayfly:dev .
#
# Options: --tag NAME:TAG (default mayfly-base:bookworm), --mirror URL (default http://deb.debian.org/debian),
#          --suite SUITE (default bookworm), --force (rebuild even if the tag exists).
# Needs root (or sudo) for debootstrap, and the debootstrap package (deploy/install-deps.sh installs it).
# The image is cached by its tag: tests call this script every run and pay for debootstrap only the first time.
set -euo pipefail

tag=mayfly-base:bookworm
mirror=http://deb.debian.org/debian
suite=bookworm
force=0
while [ $# -gt 0 ]; do
  case "$1" in
    --tag) tag="$2"; shift 2 ;;
    --mirror) mirror="$2"; shift 2 ;;
    --suite) suite="$2"; shift 2 ;;
    --force) force=1; shift ;;
    *) echo "usage: $0 [--tag NAME:TAG] [--mirror URL] [--suite SUITE] [--force]" >&2; exit 2 ;;
  esac
done

log() { echo "make-base-image: $*" >&2; }

if [ "$force" = 0 ] && docker image inspect "$tag" >/dev/null 2>&1; then
  log "$tag exists (cached); --force rebuilds it"
  exit 0
fi

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
command -v debootstrap >/dev/null 2>&1 || [ -x /usr/sbin/debootstrap ] || {
  log "debootstrap is not installed (apt-get install debootstrap, or run deploy/install-deps.sh)"
  exit 1
}

# One builder at a time per tag (two test runs starting together must not debootstrap twice).
lock="/tmp/mayfly-make-base-image.$(printf %s "$tag" | tr -c 'a-zA-Z0-9' _).lock"
exec 9>"$lock"
if ! flock -w 1800 9; then log "another build of $tag holds $lock for too long"; exit 1; fi
if [ "$force" = 0 ] && docker image inspect "$tag" >/dev/null 2>&1; then
  log "$tag was made meanwhile by another run"
  exit 0
fi

rootfs="$(mktemp -d /tmp/mayfly-rootfs.XXXXXX)"
cleanup() { $SUDO rm -rf --one-file-system "$rootfs"; }
trap cleanup EXIT

started=$(date +%s)
log "debootstrap --variant=minbase $suite from $mirror into $rootfs (a few minutes)"
$SUDO debootstrap --variant=minbase "$suite" "$rootfs" "$mirror" >"$rootfs.log" 2>&1 || {
  tail -40 "$rootfs.log" >&2
  rm -f "$rootfs.log"
  log "debootstrap failed"
  exit 1
}
rm -f "$rootfs.log"

# What Debian's official slim images do: keep apt lean inside containers, the security archive, no caches.
$SUDO tee "$rootfs/etc/apt/sources.list" >/dev/null <<EOF
deb $mirror $suite main
deb $mirror $suite-updates main
deb http://deb.debian.org/debian-security $suite-security main
EOF
$SUDO tee "$rootfs/etc/apt/apt.conf.d/docker-clean" >/dev/null <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
$SUDO tee "$rootfs/etc/apt/apt.conf.d/docker-no-languages" >/dev/null <<'EOF'
Acquire::Languages "none";
EOF
$SUDO tee "$rootfs/etc/dpkg/dpkg.cfg.d/docker-no-docs" >/dev/null <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
EOF
$SUDO rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb \
  "$rootfs"/usr/share/doc/*/changelog* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/var/log/*.log
$SUDO rm -f "$rootfs/etc/hostname" "$rootfs/etc/resolv.conf"  # Docker provides both at run time

log "importing as $tag"
$SUDO tar --numeric-owner -C "$rootfs" -c . |
  docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' \
    --message "debootstrap --variant=minbase $suite $mirror" \
    - "$tag" >/dev/null
log "$tag ready in $(( $(date +%s) - started )) s ($(docker image inspect -f '{{.Size}}' "$tag" | awk '{printf "%.0f MB", $1/1e6}'))"
