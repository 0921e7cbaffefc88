#!/usr/bin/env bash
# Starts a 3-node Mayfly cluster on 127.0.0.1 (no Docker) and keeps it in the foreground; Ctrl-C (or SIGTERM)
# stops every node cleanly. Used by `make run`.
#
#   deploy/local-cluster.sh [--build-dir build] [--data DIR] [--nodes 3] [--base-port 7101] [--metrics-base-port 9101]
#                           [--http-base-port 8081] [--virtual-clock]
# Every node also serves the Cosmos DB REST API (--http) on 127.0.0.1:8081, 8082, ... (8081 is the emulator's port).
#
# --virtual-clock: every node runs with --clock virtual (docs/ttl.md, "Virtual clock"); its data goes to
# build/cluster-data-virtual by default, since a data directory keeps the clock mode it was created with.
set -euo pipefail

build_dir=build
data_dir=""
nodes=3
base_port=7101
metrics_base_port=9101
http_base_port=8081
virtual_clock=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build_dir="$2"; shift 2 ;;
    --data) data_dir="$2"; shift 2 ;;
    --nodes) nodes="$2"; shift 2 ;;
    --base-port) base_port="$2"; shift 2 ;;
    --metrics-base-port) metrics_base_port="$2"; shift 2 ;;
    --http-base-port) http_base_port="$2"; shift 2 ;;
    --virtual-clock) virtual_clock=1; shift ;;
    *) echo "usage: $0 [--build-dir DIR] [--data DIR] [--nodes N] [--base-port PORT] [--metrics-base-port PORT]" \
            "[--http-base-port PORT] [--virtual-clock]" >&2
       exit 2 ;;
  esac
done
clock_flags=()
if [ "$virtual_clock" = 1 ]; then
  clock_flags=(--clock virtual)
  data_dir="${data_dir:-$build_dir/cluster-data-virtual}"
fi
data_dir="${data_dir:-$build_dir/cluster-data}"
mayflyd="$build_dir/mayflyd/mayflyd"
mayfly="$build_dir/client/mayfly"
[ -x "$mayflyd" ] || { echo "local-cluster: $mayflyd is not built (run make)" >&2; exit 1; }

peers=""
endpoints=""
metrics=""
gateways=""
for i in $(seq 1 "$nodes"); do
  port=$((base_port + i - 1))
  peers="${peers:+$peers,}$i=127.0.0.1:$port"
  endpoints="${endpoints:+$endpoints,}127.0.0.1:$port"
  metrics="${metrics:+$metrics }http://127.0.0.1:$((metrics_base_port + i - 1))/metrics"
  gateways="${gateways:+$gateways }http://127.0.0.1:$((http_base_port + i - 1))/"
done

mkdir -p "$data_dir"
# Keys and the cluster secret (docs/security.md), made once and kept with the data: an admin, a readwrite and a
# readonly key, each also alone in its own file for the CLI's --key-file / $MAYFLY_KEY_FILE.
secrets="$data_dir/secrets"
if [ ! -s "$secrets/keys" ] || [ ! -s "$secrets/cluster-secret" ]; then
  command -v openssl >/dev/null || { echo "local-cluster: openssl is needed to make keys (make deps)" >&2; exit 1; }
  mkdir -p "$secrets"
  chmod 700 "$secrets"
  (
    umask 077
    : > "$secrets/keys"
    for role in admin readwrite readonly; do
      key=$(openssl rand -base64 32)
      echo "$role $key local-$role" >> "$secrets/keys"
      echo "$key" > "$secrets/$role.key"
    done
    openssl rand -base64 32 > "$secrets/cluster-secret"
  )
fi
pids=()
stop() {
  trap - INT TERM EXIT
  echo
  echo "stopping the cluster..."
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  echo "stopped. Data is kept in $data_dir (delete it to start afresh)."
  exit 0
}
trap stop INT TERM EXIT

for i in $(seq 1 "$nodes"); do
  port=$((base_port + i - 1))
  "$mayflyd" --id "$i" --listen "127.0.0.1:$port" --peers "$peers" --data "$data_dir/node$i" \
    --metrics "127.0.0.1:$((metrics_base_port + i - 1))" \
    --keys-file "$secrets/keys" --cluster-secret-file "$secrets/cluster-secret" "${clock_flags[@]}" \
    --http "127.0.0.1:$((http_base_port + i - 1))" \
    >"$data_dir/node$i.log" 2>&1 &
  pids+=($!)
done

# Wait until the cluster has a leader (bounded).
for attempt in $(seq 1 100); do
  if MAYFLY_ENDPOINTS="$endpoints" MAYFLY_KEY_FILE="$secrets/admin.key" "$mayfly" cluster status 2>/dev/null | grep -q '"leader":[1-9]'; then break; fi
  for pid in "${pids[@]}"; do
    kill -0 "$pid" 2>/dev/null || { echo "local-cluster: a node exited; see $data_dir/node*.log" >&2; exit 1; }
  done
  sleep 0.1
done

cat <<EOT
Mayfly: $nodes nodes running on 127.0.0.1.
  endpoints  $endpoints        (the mayfly CLI uses these by default)
  metrics    $metrics
  data       $data_dir           (logs: $data_dir/node*.log)

  keys       $secrets/{admin,readwrite,readonly}.key (roles as named; the nodes read $secrets/keys)

  Cosmos DB SDKs (docs/cosmos.md):
    URL      $gateways
    key      $(tr -d '\n' < "$secrets/readwrite.key" | base64 -w0)
             (the Cosmos key of a Mayfly key K is base64(K); this one is readwrite.key's)

A tour (in another terminal; the CLI reads its key from \$MAYFLY_KEY_FILE, or --key-file):
  export MAYFLY_KEY_FILE=$secrets/admin.key
  $mayfly db create demo && $mayfly container create demo sessions --pk /user --default-ttl 10
  $mayfly item create demo sessions '{"id":"s1","user":"ana"}'
  $mayfly item read demo sessions --pk ana --id s1     # 200 now; 404 from _ts + 10 s, on every node

Ctrl-C stops every node cleanly.
EOT
if [ "$virtual_clock" = 1 ]; then
  cat <<EOT

VIRTUAL CLOCK: replicated time stands still (every node runs --clock virtual). s1 above stays until you say:
  $mayfly cluster advance-clock 10s                     # then s1 is 404 on every node
EOT
fi
wait -n "${pids[@]}" || true
echo "local-cluster: a node exited; see $data_dir/node*.log" >&2
