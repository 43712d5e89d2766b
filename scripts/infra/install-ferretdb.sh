#!/usr/bin/env bash
# Builds FerretDB (SQLite backend) from the Go module source into <cache>/ferretdb-<version>/ferretdb.
# A plain `go install` yields a binary that panics at start (build/version/version.txt is not part
# of the module zip), so the source is copied, version.txt written, our patches applied
# (scripts/infra/ferretdb-patches, each explained in its own header), then built. Idempotent.
# See lib.sh for locations.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ferretdb_installed && exit 0

command -v go >/dev/null || infra_die "go not found (Go is required to build FerretDB)"

mkdir -p "$INFRA_CACHE"
exec 8>"$INFRA_CACHE/.install-ferretdb.lock"
flock -w 900 8 || infra_die "timed out waiting for another FerretDB build"
ferretdb_installed && exit 0 # built by a concurrent run while we waited

infra_log "building FerretDB $FERRETDB_VERSION into $FERRETDB_BIN (go build, ~1-2 min cold) ..."
start=$SECONDS
tmp="$(mktemp -d "${TMPDIR:-/tmp}/ferretdb-build.XXXXXX")"
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT

json="$(go mod download -json "github.com/FerretDB/FerretDB@$FERRETDB_VERSION")" \
  || { echo "$json" >&2; infra_die "go mod download failed"; }
dir="$(printf '%s' "$json" | node -e '
  let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => {
    const j = JSON.parse(s);
    if (j.Error || !j.Dir) { console.error(j.Error || "no Dir in go mod download output"); process.exit(1); }
    console.log(j.Dir);
  });')" || infra_die "could not parse go mod download output"

cp -R "$dir" "$tmp/src"
chmod -R u+w "$tmp/src"
printf '%s\n' "$FERRETDB_VERSION" >"$tmp/src/build/version/version.txt"
for p in "$FERRETDB_PATCHES"/*.patch; do
  [[ -e "$p" ]] || continue
  patch -s -p1 -d "$tmp/src" <"$p" || infra_die "could not apply $(basename "$p") to FerretDB $FERRETDB_VERSION"
done

mkdir -p "$FERRETDB_HOME"
out="$FERRETDB_BIN.tmp.$$"
build() { (cd "$tmp/src" && CGO_ENABLED=0 go build -trimpath -o "$out" ./cmd/ferretdb); }
if ! build 2>"$tmp/build.log"; then
  cat "$tmp/build.log" >&2
  infra_log "build with $(go env GOVERSION) failed; retrying with GOTOOLCHAIN=go1.24.3"
  GOTOOLCHAIN=go1.24.3 build || { rm -f "$out"; infra_die "FerretDB build failed"; }
fi
"$out" --version >/dev/null 2>&1 || { rm -f "$out"; infra_die "built FerretDB binary does not run"; }
mv -f "$out" "$FERRETDB_BIN"
infra_log "FerretDB $FERRETDB_VERSION built ($((SECONDS - start))s)"
