#!/usr/bin/env bash
# Builds Docker Compose v2 from its Go module (no Docker engine needed: `config` only reads the
# file), cached under the infra cache keyed by version. Prints the binary's path on stdout.
#   go mod download -json github.com/docker/compose/v2@<version>, then go build ./cmd in a
#   writable copy of that folder (the module cache is read-only).
# With --path it only prints where the binary is (or will be), building nothing.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
COMPOSE_VERSION=${COMPOSE_VERSION:-v2.40.3}
HOME_DIR="$INFRA_CACHE/compose-$COMPOSE_VERSION"
BIN="$HOME_DIR/docker-compose"
if [[ "${1:-}" == "--path" || -x "$BIN" ]]; then echo "$BIN"; exit 0; fi
command -v go >/dev/null || infra_die "Go is needed to build Docker Compose (apt-get install golang, or set COMPOSE_BIN)"
mkdir -p "$HOME_DIR"
exec 9>"$HOME_DIR/.lock"; flock 9
if [[ -x "$BIN" ]]; then echo "$BIN"; exit 0; fi
infra_log "building Docker Compose $COMPOSE_VERSION from its Go module (first time only, a few minutes) ..."
started=$(date +%s)
dir=$(go mod download -json "github.com/docker/compose/v2@$COMPOSE_VERSION" | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p')
[[ -d "$dir" ]] || infra_die "go mod download did not give the module's folder"
src="$HOME_DIR/src"
rm -rf "$src"; cp -r "$dir" "$src"; chmod -R u+w "$src"
(cd "$src" && go build -o "$BIN.tmp" ./cmd) >&2
mv "$BIN.tmp" "$BIN"; rm -rf "$src"
infra_log "Docker Compose $COMPOSE_VERSION built ($(( $(date +%s) - started )) s)"
echo "$BIN"
