#!/usr/bin/env bash
# Makes the secrets a keyed Mayfly cluster needs (docs/operations.md, "Deploy"; the nodes refuse to listen on a
# non-loopback address without them), in DIR (default deploy/secrets/, git-ignored: secrets are never committed):
#
#   keys            the nodes' --keys-file: one line per client key, `ROLE KEY NAME` (an admin, a readwrite and a
#                   readonly key)
#   cluster-secret  the nodes' --cluster-secret-file: every member holds it (peers prove it by challenge-response)
#   admin.key readwrite.key readonly.key
#                   each key alone, for the CLI: --key-file FILE or MAYFLY_KEY_FILE=FILE
#   ca.crt ca.key mayfly1..4.crt/.key
#                   TLS between nodes and clients (deploy/make-certs.sh): a CA and one cert per compose node, with
#                   DNS SANs mayflyN, localhost and 127.0.0.1 (host CLI: --tls-ca DIR/ca.crt)
#   metrics-auth    the nodes' --metrics-auth-file (prometheus:PASSWORD); prometheus-password: PASSWORD alone, for
#                   Prometheus' basic_auth password_file
#
#   deploy/make-secrets.sh [--force] [DIR]
#
# Every file is mode 0600 in a 0700 directory (the nodes refuse secret files with group or other bits). Idempotent:
# an existing file is kept (the three keys are taken from an existing `keys` file), so running it again changes
# nothing; --force makes everything anew (then restart or re-provision the cluster: old keys stop working).
# Keys and secrets come from `openssl rand -base64 32`.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
dir="$here/secrets"
force=0
while [ $# -gt 0 ]; do
  case "$1" in
    --force) force=1; shift ;;
    -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "usage: $0 [--force] [DIR]" >&2; exit 2 ;;
    *) dir="$1"; shift ;;
  esac
done

log() { echo "make-secrets: $*"; }
command -v openssl >/dev/null || { echo "make-secrets: openssl is needed (apt-get install openssl)" >&2; exit 1; }

umask 077
mkdir -p "$dir"
chmod 700 "$dir"
dir="$(cd "$dir" && pwd)"
roles=(admin readwrite readonly)
made=()
kept=()

# Writes FILE atomically (mode 0600) with the output of the command that follows, unless it exists (and no --force).
make_file() {
  local file="$1"; shift
  if [ "$force" = 0 ] && [ -s "$dir/$file" ]; then
    kept+=("$file")
    chmod 600 "$dir/$file"
    return 0
  fi
  local tmp="$dir/.$file.tmp"
  "$@" > "$tmp"
  chmod 600 "$tmp"
  mv -f "$tmp" "$dir/$file"
  made+=("$file")
}

new_key() { openssl rand -base64 32; }
keys_file() {
  for role in "${roles[@]}"; do echo "$role $(new_key) deploy-$role"; done
}
make_file keys keys_file
make_file cluster-secret new_key

# Each role's key alone, taken from the keys file (so that the two always agree, also for a keys file made by hand).
key_of() {
  local role="$1" key
  key="$(awk -v role="$1" '$1 == role { print $2; exit }' "$dir/keys")"
  [ -n "$key" ] || { echo "make-secrets: $dir/keys has no $role key (edit it or use --force)" >&2; return 1; }
  echo "$key"
}
for role in "${roles[@]}"; do
  if [ "$force" = 0 ] && [ -s "$dir/$role.key" ] && [ "$(cat "$dir/$role.key")" != "$(key_of "$role")" ]; then
    log "note: $dir/$role.key differs from the $role key in $dir/keys (kept; --force remakes both)"
  fi
  make_file "$role.key" key_of "$role"
done

# Metrics credentials: the nodes' USER:PASSWORD file and the password alone for Prometheus (no newline).
make_file metrics-auth bash -c 'echo "prometheus:$(openssl rand -hex 24)"'
password_of() {
  local password
  password="$(sed -n '1s/^[^:]*://p' "$dir/metrics-auth")"
  [ -n "$password" ] || { echo "make-secrets: $dir/metrics-auth is not USER:PASSWORD (edit it or use --force)" >&2; return 1; }
  printf '%s' "$password"
}
if [ "$force" = 0 ] && [ -s "$dir/prometheus-password" ] && [ "$(cat "$dir/prometheus-password")" != "$(password_of)" ]; then
  log "note: $dir/prometheus-password differs from the password in $dir/metrics-auth (kept; --force remakes both)"
fi
make_file prometheus-password password_of

# TLS: a CA (ca.crt, ca.key) and a certificate per compose node (mayflyN.crt, mayflyN.key), by make-certs.sh; the
# CA is kept (new nodes join), a node's certificate is made only when missing (or with --force).
if [ "$force" = 1 ]; then rm -f "$dir/ca.crt" "$dir/ca.key" "$dir/ca.srl"; fi
for n in 1 2 3 4; do
  if [ "$force" = 0 ] && [ -s "$dir/mayfly$n.crt" ] && [ -s "$dir/mayfly$n.key" ] && [ -s "$dir/ca.crt" ]; then
    kept+=("mayfly$n.crt" "mayfly$n.key")
    chmod 600 "$dir/mayfly$n.crt" "$dir/mayfly$n.key"
    continue
  fi
  bash "$here/make-certs.sh" "$dir" "mayfly$n,localhost,127.0.0.1" >/dev/null
  chmod 600 "$dir/mayfly$n.crt" "$dir/mayfly$n.key"
  made+=("mayfly$n.crt" "mayfly$n.key")
done
chmod 600 "$dir/ca.crt" "$dir/ca.key"

[ ${#made[@]} -eq 0 ] || log "made ${made[*]} in $dir (mode 0600)"
[ ${#kept[@]} -eq 0 ] || log "kept ${kept[*]} (already there; --force makes them anew)"
if [ "$dir" = "$here/secrets" ]; then compose_env=""; else compose_env="MAYFLY_SECRETS=$dir "; fi
cat <<EOT
make-secrets: how to use them
  compose:  cd $here && ${compose_env}docker-compose up -d
            (the mayfly-secrets service installs them, owned by the nodes' user, where every node reads them)
  nodes:    mayflyd ... --keys-file $dir/keys --cluster-secret-file $dir/cluster-secret
            --tls-cert $dir/mayflyN.crt --tls-key $dir/mayflyN.key --tls-ca $dir/ca.crt
            --metrics-auth-file $dir/metrics-auth   (scrape: basic auth, prometheus-password)
  CLI:      mayfly --key-file $dir/admin.key --tls-ca $dir/ca.crt ...
            or   export MAYFLY_KEY_FILE=$dir/admin.key MAYFLY_TLS_CA=$dir/ca.crt
            (readwrite.key: data only; readonly.key: reads only)
Never commit them. A new client key is a new line in keys: the nodes re-read it (with compose, after
docker-compose up -d mayfly-secrets).
EOT
