#!/usr/bin/env bash
# Kills one process of an instance with SIGKILL, as a crash or a lost host would: no shutdown, no
# flush, no leadership handed over. Fault tests use it on a private INFRA_INSTANCE.
#   kill.sh kafka|kafka-N|ferretdb    kafka is node 1; kafka-N node N of a cluster (lib.sh)
# Only signals the process recorded in the run dir's pid file, after checking its command line, and
# waits until it is gone. Its port file stays: the next up.sh sees the process dead and starts it
# again on the same ports.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage="usage: kill.sh kafka|kafka-N|ferretdb"
service=${1:-}
RUN="$INFRA_RUN"
case "$service" in
  kafka | kafka-[1-5])
    node=${service#kafka}
    node=${node#-}
    pid=$(pid_alive "$(kafka_pidfile "${node:-1}")" "$(kafka_marker "${node:-1}")") || infra_die "Kafka node ${node:-1} is not running in $RUN"
    ;;
  ferretdb) pid=$(pid_alive "$RUN/ferretdb.pid" "--sqlite-url=file:$RUN/ferretdb-data/") || infra_die "FerretDB is not running in $RUN" ;;
  -h | --help) sed -n '2,8p' "$0"; exit 0 ;;
  *) infra_die "$usage" ;;
esac
kill -KILL "$pid"
for ((i = 0; i < 100; i++)); do [[ -d "/proc/$pid" ]] || break; sleep 0.1; done
[[ ! -d "/proc/$pid" ]] || infra_die "$service (pid $pid) still there 10 s after SIGKILL"
infra_log "killed $service (pid $pid)"
