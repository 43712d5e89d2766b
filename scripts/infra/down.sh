#!/usr/bin/env bash
# Stops the services started by up.sh (SIGTERM, wait, then SIGKILL) and removes pid files.
#   down.sh          stop, keep data (next up.sh restarts with the same topics/collections)
#   down.sh --wipe   stop and delete the run dir's data and logs
#   down.sh --only kafka|kafka-N|ferretdb
#                    stop just that service, keeping its data and port (fault tests stop one
#                    dependency of a private INFRA_INSTANCE); the next up.sh starts it again on
#                    the same port. kafka is every Kafka node; kafka-N only node N of a cluster
#                    (INFRA_KAFKA_NODES, lib.sh). Not combinable with --wipe.
# Honours EVENT_PLATFORM_CACHE / EVENT_PLATFORM_RUN / INFRA_INSTANCE like up.sh (see lib.sh).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage="usage: down.sh [--wipe | --only kafka|kafka-N|ferretdb]"
wipe=0 only=""
while (($# > 0)); do
  case "$1" in
    --wipe) wipe=1 ;;
    --only)
      shift
      [[ "${1:-}" =~ ^(kafka|kafka-[1-5]|ferretdb)$ ]] || infra_die "--only takes kafka, kafka-N or ferretdb ($usage)"
      only=$1
      ;;
    -h | --help) sed -n '2,11p' "$0"; exit 0 ;;
    *) infra_die "unknown argument: $1 ($usage)" ;;
  esac
  shift
done
((wipe == 0)) || [[ -z "$only" ]] || infra_die "--wipe and --only do not combine ($usage)"

RUN="$INFRA_RUN"
if [[ ! -d "$RUN" ]]; then
  infra_log "nothing to stop ($RUN does not exist)"
  exit 0
fi
take_run_lock
NODES=$(kafka_recorded_nodes)
# The nodes of a cluster stop together: stopped one after the other, the last ones lose their
# controller quorum and wait out their whole timeout in a controlled shutdown that cannot finish.
stop_kafka_nodes() { # NODE...
  local n
  for n in "$@"; do
    rm -f "$(kafka_portfile "$n")"
    stop_pid "$(kafka_pidfile "$n")" "$(kafka_marker "$n")" "Kafka node $n" 30 &
  done
  wait
}

if [[ -n "$only" ]]; then
  # services.env goes (it would advertise a stopped service); ports.last keeps the port for up.sh
  rm -f "$RUN/services.env"
  if [[ "$only" == kafka ]]; then
    # shellcheck disable=SC2046
    stop_kafka_nodes $(seq 1 "$NODES")
  elif [[ "$only" == kafka-* ]]; then
    ((${only#kafka-} <= NODES)) || infra_die "$RUN runs $NODES Kafka node(s)"
    stop_kafka_nodes "${only#kafka-}"
  else
    rm -f "$RUN/ferretdb.port"
    stop_pid "$RUN/ferretdb.pid" "--sqlite-url=file:$RUN/ferretdb-data/" FerretDB 10
  fi
  infra_log "stopped $only"
  exit 0
fi

rm -f "$RUN/services.env" "$RUN/ferretdb.port"
stop_pid "$RUN/ferretdb.pid" "--sqlite-url=file:$RUN/ferretdb-data/" FerretDB 10
# shellcheck disable=SC2046
stop_kafka_nodes $(seq 1 "$NODES")

if ((wipe)); then
  infra_log "wiping data and logs in $RUN"
  rm -rf "$RUN"/kafka-data "$RUN"/kafka-data-* "$RUN/ferretdb-data" "$RUN"/kafka*.log* "$RUN"/ferretdb*.log "$RUN"/kafka*.out \
    "$RUN"/server*.properties "$RUN"/log4j*.properties "$RUN/ports.last" "$RUN/kafka.nodes" "$RUN/kafka.cluster-id"
fi
infra_log "stopped"
