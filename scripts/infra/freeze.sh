#!/usr/bin/env bash
# Freezes one service of an instance (SIGSTOP): it keeps its port and its connections but answers
# nothing, as a hung or partitioned server would. Fault tests use it on a private INFRA_INSTANCE.
#   freeze.sh kafka|ferretdb          stop the process in place
#   freeze.sh --thaw kafka|ferretdb   let it run again (SIGCONT)
# Only signals the process recorded in the run dir's pid file, after checking its command line.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage="usage: freeze.sh [--thaw] kafka|ferretdb"
signal=STOP service=""
for arg in "$@"; do
  case "$arg" in
    --thaw) signal=CONT ;;
    kafka | ferretdb) service=$arg ;;
    -h | --help) sed -n '2,6p' "$0"; exit 0 ;;
    *) infra_die "unknown argument: $arg ($usage)" ;;
  esac
done
[[ -n "$service" ]] || infra_die "$usage"

RUN="$INFRA_RUN"
if [[ "$service" == kafka ]]; then
  pid=$(pid_alive "$RUN/kafka.pid" "kafka.Kafka $RUN/server.properties") || infra_die "Kafka is not running in $RUN"
else
  pid=$(pid_alive "$RUN/ferretdb.pid" "--sqlite-url=file:$RUN/ferretdb-data/") || infra_die "FerretDB is not running in $RUN"
fi
kill -"$signal" "$pid"
infra_log "$([[ $signal == STOP ]] && echo froze || echo thawed) $service (pid $pid)"
