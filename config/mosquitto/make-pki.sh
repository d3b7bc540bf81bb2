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
#
# Adding a site to a central broker (site.conf, central.conf) is one step:
#
#   make-pki.sh site OUTDIR SITE SITE_BROKER_HOST CENTRAL_HOST:PORT CENTRAL_ACL
#   e.g. make-pki.sh site /etc/mosquitto/pki site-b site-b.casino.internal \
#            central.casino.internal:8883 /etc/mosquitto/central-acl
#
# With the CA of OUTDIR (made first by the form above) it writes OUTDIR/site-SITE/: the site
# broker's certificate (site-broker.crt/key, subjectAltName SITE_BROKER_HOST), the bridge's
# client certificate (bridge-SITE.crt/key: its account on the central broker), ca.crt, and
# site.conf: the shipped site.conf with this site's bridge client ids, certificate and central
# address. It appends the bridge account's entry to CENTRAL_ACL (once: a site already there
# is left as it is). Copy OUTDIR/site-SITE/ to the site broker's /etc/mosquitto/pki/ (and
# site.conf to its conf.d), and reload the central broker (SIGHUP rereads the ACL).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

issue() {  # issue CN OUTFILE_BASE EXTENSIONS: a certificate signed by $out/ca
  openssl req -newkey rsa:2048 -nodes -sha256 -keyout "$2.key" -out "$2.csr" -subj "/CN=$1" 2>/dev/null
  openssl x509 -req -in "$2.csr" -CA "$out/ca.crt" -CAkey "$out/ca.key" -CAcreateserial \
    -days 825 -sha256 -out "$2.crt" -extfile <(printf "%b" "$3") 2>/dev/null
  rm -f "$2.csr"
}

if [ "${1:-}" = site ]; then
  if [ $# -ne 6 ]; then
    echo "usage: $0 site OUTDIR SITE SITE_BROKER_HOST CENTRAL_HOST:PORT CENTRAL_ACL" >&2
    exit 2
  fi
  out=$2; site=$3; site_host=$4; central=$5; acl=$6
  if ! [[ $site =~ ^[A-Za-z0-9][A-Za-z0-9_-]{0,47}$ ]]; then
    echo "site name '$site': letters, digits, '-' and '_' only (it names a broker account)" >&2
    exit 2
  fi
  if [ ! -f "$out/ca.key" ]; then
    echo "$out/ca.key missing: make the CA first with $0 OUTDIR BROKER_HOST CLIENT_CN..." >&2
    exit 2
  fi
  if [ ! -f "$acl" ]; then
    echo "central ACL $acl missing (start from the shipped central-acl)" >&2
    exit 2
  fi
  dir="$out/site-$site"
  mkdir -p "$dir"
  umask 077
  if [[ $site_host =~ ^[0-9.]+$ ]]; then san="IP:$site_host"; else san="DNS:$site_host"; fi
  issue "$site_host" "$dir/site-broker" \
    "subjectAltName=$san\nextendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
  issue "bridge-$site" "$dir/bridge-$site" \
    "extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
  cp "$out/ca.crt" "$dir/ca.crt"
  sed -e "s/bridge-site-a/bridge-$site/g" \
      -e "s/^address .*/address $central/" \
      "$here/site.conf" > "$dir/site.conf"
  chmod 644 "$dir"/*.crt "$dir/site.conf"
  if grep -qx "user bridge-$site" "$acl"; then
    echo "$acl already grants bridge-$site"
  else
    {
      echo ""
      echo "# site $site (make-pki.sh site): its bridge writes its tables' topics, reads their commands and acks"
      echo "user bridge-$site"
      for kind in events alerts shoe_certificate state status health cmd/reply cmd/reply/#; do
        echo "topic write baccarat/v1/+/$kind"
      done
      echo "topic read baccarat/v1/+/cmd"
      echo "topic read baccarat/v1/+/ack"
    } >> "$acl"
    echo "$acl: bridge-$site added (reload the central broker: kill -HUP its pid)"
  fi
  echo "site $site written to $dir: site.conf, site-broker.crt/key, bridge-$site.crt/key, ca.crt"
  exit 0
fi

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
