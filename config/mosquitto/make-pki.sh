#!/usr/bin/env bash
# Example PKI for a table network: one CA, one broker certificate, one client certificate
# per table (CN = table id, which the broker's ACL uses as the user name) and one for the
# game server. For production use your casino's CA and keep the CA key offline; this script
# shows the exact certificate profile the broker config and the daemon expect.
#
#   make-pki.sh OUTDIR BROKER_HOST CLIENT_CN...
#   e.g. make-pki.sh /etc/mosquitto/pki broker.casino.internal T01 T02 game-server
#
# BROKER_HOST goes into the broker certificate's subjectAltName (DNS name, or IP address if
# it looks like one): the daemon verifies it (TLS host name check is on by default).
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 OUTDIR BROKER_HOST CLIENT_CN..." >&2
  exit 2
fi
out=$1; host=$2; shift 2
mkdir -p "$out"
umask 077
days=825

if [ ! -f "$out/ca.key" ]; then
  openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650 \
    -keyout "$out/ca.key" -out "$out/ca.crt" -subj "/CN=baccarat-edge example CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
fi

if [[ $host =~ ^[0-9.]+$ ]]; then san="IP:$host"; else san="DNS:$host"; fi
openssl req -newkey rsa:2048 -nodes -sha256 -keyout "$out/broker.key" -out "$out/broker.csr" \
  -subj "/CN=$host" 2>/dev/null
openssl x509 -req -in "$out/broker.csr" -CA "$out/ca.crt" -CAkey "$out/ca.key" -CAcreateserial \
  -days "$days" -sha256 -out "$out/broker.crt" \
  -extfile <(printf "subjectAltName=%s\nextendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\n" "$san") 2>/dev/null

for cn in "$@"; do
  openssl req -newkey rsa:2048 -nodes -sha256 -keyout "$out/$cn.key" -out "$out/$cn.csr" \
    -subj "/CN=$cn" 2>/dev/null
  openssl x509 -req -in "$out/$cn.csr" -CA "$out/ca.crt" -CAkey "$out/ca.key" -CAcreateserial \
    -days "$days" -sha256 -out "$out/$cn.crt" \
    -extfile <(printf "extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\n") 2>/dev/null
done
rm -f "$out"/*.csr
# The broker reads its key as the mosquitto user; tables read theirs as baccarat-edge.
chmod 644 "$out"/*.crt
echo "PKI written to $out: ca.crt, broker.crt/key, client certs for: $*"
