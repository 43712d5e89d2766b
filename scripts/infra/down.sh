#!/usr/bin/env bash
# Stops the services started by up.sh (SIGTERM, wait, then SIGKILL) and removes pid files.
#   down.sh          stop, keep data (next up.sh restarts with the same topics/collections)
#   down.sh --wipe   stop and delete the run dir's data and logs
# Honours EVENT_PLATFORM_CACHE / EVENT_PLATFORM_RUN / INFRA_INSTANCE like up.sh (see lib.sh).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

wipe=0
for arg in "$@"; do
  case "$arg" in
    --wipe) wipe=1 ;;
    -h | --help) sed -n '2,5p' "$0"; exit 0 ;;
    *) infra_die "unknown argument: $arg (usage: down.sh [--wipe])" ;;
  esac
done

RUN="$INFRA_RUN"
if [[ ! -d "$RUN" ]]; then
  infra_log "nothing to stop ($RUN does not exist)"
  exit 0
fi
take_run_lock

rm -f "$RUN/services.env" "$RUN/kafka.port" "$RUN/ferretdb.port"
stop_pid "$RUN/ferretdb.pid" "--sqlite-url=file:$RUN/ferretdb-data/" FerretDB 10
stop_pid "$RUN/kafka.pid" "kafka.Kafka $RUN/server.properties" Kafka 30

if ((wipe)); then
  infra_log "wiping data and logs in $RUN"
  rm -rf "$RUN/kafka-data" "$RUN/ferretdb-data" "$RUN"/kafka*.log* "$RUN"/ferretdb*.log "$RUN/kafka.out" \
    "$RUN/server.properties" "$RUN/log4j.properties" "$RUN/ports.last"
fi
infra_log "stopped"
