#!/bin/sh
# Runs before nginx starts (the nginx image runs /docker-entrypoint.d/*.sh):
# makes a self-signed certificate on first start, kept in the gateway-tls
# volume, unless one is there already (mount a real one at /etc/nginx/tls).
set -eu
dir="${TLS_DIR:-/etc/nginx/tls}"
if [ -s "$dir/tls.crt" ] && [ -s "$dir/tls.key" ]; then exit 0; fi
mkdir -p "$dir"
name="${GATEWAY_HOSTNAME:-localhost}"
openssl req -x509 -newkey rsa:2048 -sha256 -nodes -days 365 \
  -keyout "$dir/tls.key" -out "$dir/tls.crt" \
  -subj "/CN=$name" -addext "subjectAltName=DNS:$name,DNS:localhost,IP:127.0.0.1" 2>/dev/null
chmod 600 "$dir/tls.key"
echo "gateway: made a self-signed certificate for $name (replace it with a real one for anything public)"
