#!/usr/bin/env bash
# make-certs.sh DIR [NAME[,ALIAS...]]...: TLS material for a Mayfly cluster (docs/security.md), with openssl.
#
#   DIR/ca.crt, DIR/ca.key        the cluster CA (made once; reused when DIR already has it, so new nodes join)
#   DIR/NAME.crt, DIR/NAME.key    one certificate and key per NAME, signed by the CA
#
# Each certificate names NAME and its aliases as subject alternative names: a DNS entry for each, and an IP entry too
# for each that is an IP address. Nodes and clients check the certificate against the host they dial (the host part
# of --peers / --endpoints), as a DNS name even when it is an IP address, so 127.0.0.1 gets DNS:127.0.0.1 and
# IP:127.0.0.1. Keys are mode 0600. Without NAMEs: one certificate "node" for localhost,127.0.0.1.
#
#   deploy/make-certs.sh certs mayfly1,10.0.0.1 mayfly2,10.0.0.2 mayfly3,10.0.0.3
#   mayflyd ... --tls-cert certs/mayfly1.crt --tls-key certs/mayfly1.key --tls-ca certs/ca.crt
#   mayfly --tls-ca certs/ca.crt ...
set -euo pipefail

if [[ $# -lt 1 || $1 == -h || $1 == --help ]]; then
  sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
dir=$1
shift
names=("$@")
[[ ${#names[@]} -gt 0 ]] || names=("node,localhost,127.0.0.1")
days=${MAYFLY_CERT_DAYS:-825}

umask 077
mkdir -p "$dir"
if [[ ! -s $dir/ca.crt || ! -s $dir/ca.key ]]; then
  openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 -sha256 -days "$days" \
    -subj "/CN=mayfly cluster CA" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
fi

is_ip() { [[ $1 =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ || $1 == *:* ]]; }

for spec in "${names[@]}"; do
  IFS=, read -r -a hosts <<<"$spec"
  name=${hosts[0]}
  [[ -n $name && $name != */* ]] || { echo "make-certs.sh: bad name '$spec'" >&2; exit 2; }
  sans=""
  for host in "${hosts[@]}"; do
    [[ -n $host ]] || continue
    sans+="${sans:+,}DNS:$host"
    if is_ip "$host"; then sans+=",IP:$host"; fi
  done
  ext=$(mktemp)
  trap 'rm -f "$ext" "$dir/$name.csr"' EXIT
  printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=%s\n' \
    "$sans" >"$ext"
  openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 -sha256 -subj "/CN=$name" \
    -keyout "$dir/$name.key" -out "$dir/$name.csr" 2>/dev/null
  openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial -sha256 \
    -days "$days" -extfile "$ext" -out "$dir/$name.crt" 2>/dev/null
  rm -f "$ext" "$dir/$name.csr"
  trap - EXIT
  chmod 600 "$dir/$name.key"
  chmod 644 "$dir/$name.crt"
  echo "$dir/$name.crt ($sans)"
done
chmod 600 "$dir/ca.key"
chmod 644 "$dir/ca.crt"
