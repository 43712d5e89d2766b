#!/usr/bin/env bash
# Installs the Apache Kafka jars (broker + tools) into <cache>/kafka-<version>/lib via Maven,
# using scripts/infra/kafka-pom.xml. Idempotent: a stamp file (holding the pom's hash) makes
# later runs instant. See lib.sh for locations.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

kafka_installed && exit 0

command -v mvn >/dev/null || infra_die "mvn not found (Maven 3.x and Java 17 are required for Kafka)"
command -v java >/dev/null || infra_die "java not found (Java 17 is required for Kafka)"

mkdir -p "$INFRA_CACHE"
exec 8>"$INFRA_CACHE/.install-kafka.lock"
flock -w 900 8 || infra_die "timed out waiting for another Kafka install"
kafka_installed && exit 0 # installed by a concurrent run while we waited

infra_log "installing Kafka $KAFKA_VERSION jars into $KAFKA_LIB (Maven) ..."
tmp="$KAFKA_HOME.tmp.$$"
rm -rf "$tmp"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp"
start=$SECONDS
if ! mvn -q -B -f "$KAFKA_POM" dependency:copy-dependencies \
  -DoutputDirectory="$tmp/lib" -DincludeScope=runtime >"$tmp/mvn.log" 2>&1; then
  cat "$tmp/mvn.log" >&2
  infra_die "Maven failed to fetch the Kafka jars"
fi
ls "$tmp/lib"/kafka_2.13-"$KAFKA_VERSION".jar >/dev/null 2>&1 || infra_die "kafka_2.13-$KAFKA_VERSION.jar missing after Maven run"

mkdir -p "$KAFKA_HOME"
rm -rf "$KAFKA_LIB" "$KAFKA_STAMP"
mv "$tmp/lib" "$KAFKA_LIB"
kafka_pom_hash >"$KAFKA_STAMP.tmp" && mv "$KAFKA_STAMP.tmp" "$KAFKA_STAMP"
infra_log "Kafka $KAFKA_VERSION installed ($(ls "$KAFKA_LIB" | wc -l) jars, $((SECONDS - start))s)"
