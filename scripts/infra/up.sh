#!/usr/bin/env bash
# Starts (or reuses) the local Kafka (KRaft, single node) and FerretDB (SQLite) services.
#
# stdout is exactly two lines (everything else goes to stderr):
#   KAFKA_BROKERS=127.0.0.1:<port>            (one entry per node: 127.0.0.1:<p1>,127.0.0.1:<p2>,...)
#   MONGO_URL=mongodb://127.0.0.1:<port>/
# The same lines are written to <run>/services.env. Usage: eval "$(bash scripts/infra/up.sh)"
#
# - If KAFKA_BROKERS and MONGO_URL are both already set (and INFRA_INSTANCE is not), nothing is
#   started and they are echoed back (external services, e.g. CI).
# - Idempotent: running services (live pid + answering port) are reused; this takes ~50 ms.
# - A dead/hung service is restarted; Kafka keeps its data dir unless the restart fails, then it
#   is wiped and reformatted once (dev data).
# - Concurrent runs are serialised with flock on <run>/.lock.
# - INFRA_KAFKA_NODES=3 (with INFRA_INSTANCE, on an instance's first start) runs a KRaft cluster of
#   three combined broker+controller nodes instead of one, with the production replication settings:
#   default.replication.factor 3, min.insync.replicas 2, internal topics replicated 3 times. Only a
#   node that is down is (re)started, on its recorded ports (a killed broker rejoins the cluster).
#   A cluster's node whose start fails is not wiped and reformatted: that would drop a voter's log.
# See lib.sh for locations, INFRA_INSTANCE and ports.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if [[ -z "${INFRA_INSTANCE:-}" && -n "${KAFKA_BROKERS:-}" && -n "${MONGO_URL:-}" ]]; then
  infra_log "KAFKA_BROKERS and MONGO_URL already set; not starting anything"
  printf 'KAFKA_BROKERS=%s\nMONGO_URL=%s\n' "$KAFKA_BROKERS" "$MONGO_URL"
  exit 0
fi

KAFKA_TIMEOUT=${INFRA_KAFKA_TIMEOUT:-120}
FERRETDB_TIMEOUT=${INFRA_FERRETDB_TIMEOUT:-30}

RUN="$INFRA_RUN"
# Per Kafka node N (lib.sh: node 1 keeps the single node's names):
#   kafka_data N, kafka_props N, kafka_log4j N, kafka_pidfile N, kafka_marker N, kafka_log N, kafka_out N,
#   kafka_portfile N: "<port> <controller port>", written only once that node is ready
kafka_data() { echo "$RUN/kafka-data$(kafka_sfx "$1")"; }
kafka_log4j() { echo "$RUN/log4j$(kafka_sfx "$1").properties"; }
kafka_log() { echo "$RUN/kafka$(kafka_sfx "$1").log"; }
kafka_out() { echo "$RUN/kafka$(kafka_sfx "$1").out"; }
FDB_DATA="$RUN/ferretdb-data"
FDB_PIDFILE="$RUN/ferretdb.pid"
FDB_PORTFILE="$RUN/ferretdb.port" # written only once FerretDB is ready
FDB_MARKER="--sqlite-url=file:$FDB_DATA/"
# SQLite in WAL mode with synchronous=NORMAL and a bounded WAL file: lib.sh, ferretdb_sqlite_url.
FDB_URL="$(ferretdb_sqlite_url "$FDB_DATA")"
FDB_CMD="$FERRETDB_BIN --handler=sqlite --sqlite-url=$FDB_URL"

# --- installs (stamp checks are instant once done) ---------------------------------------------
kafka_installed || bash "$INFRA_DIR/install-kafka.sh"
ferretdb_installed || bash "$INFRA_DIR/install-ferretdb.sh"

if [[ "$RUN" =~ [^A-Za-z0-9/._~@+-] ]]; then
  infra_die "run dir '$RUN' contains spaces/special characters; set EVENT_PLATFORM_RUN to a plain path"
fi

take_run_lock

# --- how many Kafka nodes ------------------------------------------------------------------------
NODES=$(kafka_recorded_nodes)
if [[ -n "${INFRA_KAFKA_NODES:-}" ]]; then
  [[ "$INFRA_KAFKA_NODES" =~ ^[1-5]$ ]] || infra_die "INFRA_KAFKA_NODES must be 1 to 5 (got '$INFRA_KAFKA_NODES')"
  if [[ "$INFRA_KAFKA_NODES" != "$NODES" && -d "$(kafka_data 1)" ]]; then
    infra_die "$RUN runs $NODES Kafka node(s), not $INFRA_KAFKA_NODES: wipe it first (INFRA_INSTANCE=${INFRA_INSTANCE:-} bash scripts/infra/down.sh --wipe)"
  fi
  NODES=$INFRA_KAFKA_NODES
fi
if [[ -z "${INFRA_INSTANCE:-}" && "$NODES" != 1 ]]; then
  infra_die "a Kafka cluster (INFRA_KAFKA_NODES=$NODES) runs only in a named INFRA_INSTANCE, never in the shared one"
fi

# --- reuse check ----------------------------------------------------------------------------
# running = live pid with the right command line + port file (=ready) + port answering
running_port() { # PIDFILE MARKER PORTFILE -> prints the port
  local port
  pid_alive "$1" "$2" >/dev/null || return 1
  [[ -s "$3" ]] || return 1
  read -r port _ <"$3"
  port_open "$port" || return 1
  echo "$port"
}

# kafka_ports[N]: the port of node N when it runs and answers, else empty; kafka_missing: nodes to start
declare -A kafka_ports=()
kafka_missing=()
for ((n = 1; n <= NODES; n++)); do
  kafka_ports[$n]=$(running_port "$(kafka_pidfile "$n")" "$(kafka_marker "$n")" "$(kafka_portfile "$n")") || kafka_ports[$n]=""
  [[ -n "${kafka_ports[$n]}" ]] || kafka_missing+=("$n")
done
fdb_port=""
fdb_port=$(running_port "$FDB_PIDFILE" "$FDB_MARKER" "$FDB_PORTFILE") || fdb_port=""
# A FerretDB of ours started from another build or with other settings (an older checkout's
# up.sh) is restarted with this one's: same data directory, same port.
if [[ -n "$fdb_port" ]] && fdb_pid=$(pid_alive "$FDB_PIDFILE" "$FDB_MARKER") \
  && [[ "$(tr '\0' ' ' <"/proc/$fdb_pid/cmdline")" != "$FDB_CMD "* ]]; then
  infra_log "FerretDB (pid $fdb_pid) runs another build or settings; restarting it as $FERRETDB_BIN"
  stop_pid "$FDB_PIDFILE" "$FDB_MARKER" FerretDB 10
  rm -f "$FDB_PORTFILE"
  fdb_port=""
fi

# --- start helpers ------------------------------------------------------------------------------
# launch PIDFILE LOGFILE CMD...: runs CMD detached (own session, survives this shell), stdin from
# /dev/null, stdout+stderr to LOGFILE, lock fd closed; waits for the pid file.
launch() {
  local pidfile=$1 logfile=$2 i
  shift 2
  rm -f "$pidfile"
  # shellcheck disable=SC2016
  setsid bash -c 'echo $$ >"$0.tmp" && mv "$0.tmp" "$0" && exec "$@"' "$pidfile" "$@" \
    </dev/null >>"$logfile" 2>&1 9>&- &
  for ((i = 0; i < 100; i++)); do
    [[ -s "$pidfile" ]] && return 0
    sleep 0.05
  done
  infra_die "process for $pidfile did not start"
}

# The replication settings: one node replicates nothing; a cluster of three or more runs the
# production layout (docs/operations.md, "A production cluster"): every partition on three nodes, an
# acknowledged write (acks=all) on at least two, so one node can die without losing one.
if ((NODES >= 3)); then KAFKA_RF=3 KAFKA_MIN_ISR=2; else KAFKA_RF=$NODES KAFKA_MIN_ISR=1; fi

write_kafka_config() { # NODE PORT CTRL_PORT VOTERS
  cat >"$(kafka_props "$1")" <<EOF
# generated by scripts/infra/up.sh -- overwritten on every (re)start
process.roles=broker,controller
node.id=$1
controller.quorum.voters=$4
listeners=PLAINTEXT://127.0.0.1:$2,CONTROLLER://127.0.0.1:$3
advertised.listeners=PLAINTEXT://127.0.0.1:$2
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$(kafka_data "$1")
default.replication.factor=$KAFKA_RF
offsets.topic.replication.factor=$KAFKA_RF
offsets.topic.num.partitions=10
transaction.state.log.replication.factor=$KAFKA_RF
transaction.state.log.min.isr=$KAFKA_MIN_ISR
transaction.state.log.num.partitions=10
min.insync.replicas=$KAFKA_MIN_ISR
unclean.leader.election.enable=false
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
num.partitions=1
log.retention.hours=168
# after a crash (kill -9) the old broker registration blocks re-registration until its session
# expires (default 9 s); a shorter session makes crash-restarts (fault tests) ~5 s faster
broker.session.timeout.ms=4000
broker.heartbeat.interval.ms=1000
EOF
  cat >"$(kafka_log4j "$1")" <<EOF
# generated by scripts/infra/up.sh
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.RollingFileAppender
log4j.appender.file.File=$(kafka_log "$1")
log4j.appender.file.MaxFileSize=20MB
log4j.appender.file.MaxBackupIndex=2
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.kafka.network.RequestChannel\$=WARN
log4j.logger.state.change.logger=WARN
log4j.logger.kafka.authorizer.logger=WARN
log4j.logger.org.apache.kafka.clients=WARN
EOF
}

kafka_cluster_uuid() { # Kafka Uuid string: 16 random bytes, base64url without padding, not starting with '-'
  local id
  while :; do
    id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')
    [[ ${#id} -eq 22 && "$id" != -* ]] && break
  done
  echo "$id"
}

# One node formats with a fresh id each time; the nodes of a cluster share one, kept in
# <run>/kafka.cluster-id (all nodes of a new cluster are formatted in the same up.sh run).
format_kafka() { # NODE
  local id
  if ((NODES > 1)); then
    [[ -s "$RUN/kafka.cluster-id" ]] || kafka_cluster_uuid >"$RUN/kafka.cluster-id"
    id=$(<"$RUN/kafka.cluster-id")
  else
    id=$(kafka_cluster_uuid)
  fi
  infra_log "formatting Kafka storage of node $1 (cluster id $id)"
  rm -rf "$(kafka_data "$1")"
  java -cp "$KAFKA_CP" -Dlog4j.configuration="file:$(kafka_log4j "$1")" kafka.tools.StorageTool \
    format -t "$id" -c "$(kafka_props "$1")" >>"$(kafka_out "$1")" 2>&1 \
    || { tail -n 20 "$(kafka_out "$1")" >&2; infra_die "kafka-storage format failed"; }
}

start_kafka() { # NODE PORT CTRL_PORT
  local log out
  log=$(kafka_log "$1") out=$(kafka_out "$1")
  infra_log "starting Kafka $KAFKA_VERSION node $1 on 127.0.0.1:$2 (controller :$3), logs: $log"
  # fresh log so the readiness grep cannot see a previous run's "started" line
  rm -f "$log".[0-9]*
  [[ -f "$log" ]] && mv -f "$log" "${log%.log}.prev.log"
  : >"$out"
  [[ -f "$(kafka_data "$1")/meta.properties" ]] || format_kafka "$1"
  launch "$(kafka_pidfile "$1")" "$out" \
    java -Xmx512m -Xms256m -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:+ExitOnOutOfMemoryError \
    -Djava.awt.headless=true -Dlog4j.configuration="file:$(kafka_log4j "$1")" \
    -cp "$KAFKA_CP" kafka.Kafka "$(kafka_props "$1")"
}

stop_kafka() { # NODE TIMEOUT_S
  stop_pid "$(kafka_pidfile "$1")" "$(kafka_marker "$1")" "Kafka node $1" "$2"
}

# Ready = process alive, port accepting, and KafkaRaftServer logged "Kafka Server started" (in
# KRaft mode that is logged only after the controller is active and the broker is unfenced, so
# clients can create topics and produce right away).
# A cluster's node logs it once a quorum of controllers has elected a leader, so a new cluster's
# nodes are all started before any is waited for.
wait_kafka() { # NODE PORT -> 0 ready / 1 died or timed out
  local port=$2 deadline=$((SECONDS + KAFKA_TIMEOUT))
  while ((SECONDS < deadline)); do
    pid_alive "$(kafka_pidfile "$1")" "$(kafka_marker "$1")" >/dev/null || { infra_log "Kafka node $1 exited"; return 1; }
    if grep -qs "Kafka Server started" "$(kafka_log "$1")" && port_open "$port"; then return 0; fi
    sleep 0.2
  done
  infra_log "Kafka node $1 not ready after ${KAFKA_TIMEOUT}s"
  return 1
}

start_ferretdb() { # PORT
  infra_log "starting FerretDB $FERRETDB_VERSION on 127.0.0.1:$1, logs: $RUN/ferretdb.log"
  mkdir -p "$FDB_DATA"
  [[ -f "$RUN/ferretdb.log" ]] && mv -f "$RUN/ferretdb.log" "$RUN/ferretdb.prev.log"
  launch "$FDB_PIDFILE" "$RUN/ferretdb.log" \
    "$FERRETDB_BIN" --handler=sqlite "--sqlite-url=$FDB_URL" "--listen-addr=127.0.0.1:$1" \
    --state-dir=- "--debug-addr=${FERRETDB_DEBUG_ADDR:--}" --telemetry=disable --log-level=warn
}

wait_ferretdb() { # PORT
  local port=$1 deadline=$((SECONDS + FERRETDB_TIMEOUT))
  while ((SECONDS < deadline)); do
    pid_alive "$FDB_PIDFILE" "$FDB_MARKER" >/dev/null || { infra_log "FerretDB process exited"; return 1; }
    port_open "$port" && return 0
    sleep 0.1
  done
  infra_log "FerretDB not ready after ${FERRETDB_TIMEOUT}s"
  return 1
}

# --- start what is missing ---------------------------------------------------------------------
if ((${#kafka_missing[@]} > 0)) || [[ -z "$fdb_port" ]]; then
  t0=$SECONDS
  # clean up leftovers (dead pid files, or alive-but-not-answering processes)
  for n in "${kafka_missing[@]}"; do stop_kafka "$n" 20; rm -f "$(kafka_portfile "$n")"; done
  [[ -n "$fdb_port" ]] || { stop_pid "$FDB_PIDFILE" "$FDB_MARKER" FerretDB 10; rm -f "$FDB_PORTFILE"; }
  rm -f "$RUN/services.env"
  mkdir -p "$RUN"

  # choose ports for what must start: the ports of the previous run (so a restarted service comes
  # back where clients expect it), else the instance defaults; random free ones if taken.
  # ports.last: "<kafka 1> <controller 1> <ferretdb> [<kafka 2> <controller 2> ...]"
  last=()
  if [[ -s "$RUN/ports.last" ]]; then read -ra last <"$RUN/ports.last" || true; fi
  kidx() { if (($1 == 1)); then echo 0; else echo $((3 + 2 * ($1 - 2))); fi; } # NODE -> index in ports.last
  declare -A pref_k=() pref_c=() new_k=() new_c=()
  prefs=()
  for ((n = 1; n <= NODES; n++)); do
    i=$(kidx "$n")
    pref_k[$n]=${last[$i]:-$((KAFKA_PORT_PREF + 2 * (n - 1)))}
    pref_c[$n]=${last[$((i + 1))]:-$((KAFKA_CTRL_PORT_PREF + 2 * (n - 1)))}
  done
  pref_f=${last[2]:-$FERRETDB_PORT_PREF}
  prefs=("${pref_k[1]}" "${pref_c[1]}" "$pref_f")
  for ((n = 2; n <= NODES; n++)); do prefs+=("${pref_k[$n]}" "${pref_c[$n]}"); done
  picked=()
  read -ra picked < <(pick_ports "${prefs[@]}") || true
  ((${#picked[@]} == ${#prefs[@]})) || infra_die "could not pick free ports (is node installed?)"
  new_fport=${picked[2]}
  for ((n = 1; n <= NODES; n++)); do
    i=$(kidx "$n")
    new_k[$n]=${picked[$i]} new_c[$n]=${picked[$((i + 1))]}
    # keep a still-running node's ports in the record
    if [[ -n "${kafka_ports[$n]}" ]]; then read -r "new_k[$n]" "new_c[$n]" _ <"$(kafka_portfile "$n")"; fi
  done
  # A node restarted beside running ones must come back on its ports: the others' controller
  # quorum lists them.
  if ((${#kafka_missing[@]} > 0 && ${#kafka_missing[@]} < NODES)); then
    for n in "${kafka_missing[@]}"; do
      [[ "${new_k[$n]}" == "${pref_k[$n]}" && "${new_c[$n]}" == "${pref_c[$n]}" ]] \
        || infra_die "Kafka node $n cannot come back on its ports ${pref_k[$n]}/${pref_c[$n]} (taken); the cluster lists them: wipe the instance"
    done
  fi
  [[ -z "$fdb_port" ]] || new_fport=$fdb_port
  record="${new_k[1]} ${new_c[1]} $new_fport"
  voters="1@127.0.0.1:${new_c[1]}"
  for ((n = 2; n <= NODES; n++)); do
    record+=" ${new_k[$n]} ${new_c[$n]}"
    voters+=",$n@127.0.0.1:${new_c[$n]}"
  done
  echo "$record" >"$RUN/ports.last"
  if ((NODES > 1)); then echo "$NODES" >"$RUN/kafka.nodes"; fi

  # start everything first, then wait, so FerretDB comes up while the JVMs boot (and the nodes of a
  # cluster find each other)
  for n in "${kafka_missing[@]}"; do
    write_kafka_config "$n" "${new_k[$n]}" "${new_c[$n]}" "$voters"
    start_kafka "$n" "${new_k[$n]}" "${new_c[$n]}"
  done
  [[ -n "$fdb_port" ]] || start_ferretdb "$new_fport"

  if [[ -z "$fdb_port" ]]; then
    if ! wait_ferretdb "$new_fport"; then
      tail -n 30 "$RUN/ferretdb.log" >&2 || true
      stop_pid "$FDB_PIDFILE" "$FDB_MARKER" FerretDB 5
      infra_die "FerretDB failed to start (log: $RUN/ferretdb.log)"
    fi
    echo "$new_fport" >"$FDB_PORTFILE"
    fdb_port=$new_fport
  fi

  for n in "${kafka_missing[@]}"; do
    if ! wait_kafka "$n" "${new_k[$n]}"; then
      tail -n 30 "$(kafka_log "$n")" "$(kafka_out "$n")" >&2 2>/dev/null || true
      if ((NODES > 1)); then
        for m in "${kafka_missing[@]}"; do stop_kafka "$m" 10; done
        infra_die "Kafka node $n failed to start (logs: $(kafka_log "$n"), $(kafka_out "$n"))"
      fi
      stop_kafka "$n" 10
      infra_log "retrying Kafka once with a wiped data dir"
      rm -rf "$(kafka_data "$n")"
      start_kafka "$n" "${new_k[$n]}" "${new_c[$n]}"
      if ! wait_kafka "$n" "${new_k[$n]}"; then
        tail -n 30 "$(kafka_log "$n")" "$(kafka_out "$n")" >&2 2>/dev/null || true
        stop_kafka "$n" 10
        infra_die "Kafka failed to start (logs: $(kafka_log "$n"), $(kafka_out "$n"))"
      fi
    fi
    echo "${new_k[$n]} ${new_c[$n]}" >"$(kafka_portfile "$n")"
    kafka_ports[$n]=${new_k[$n]}
  done
  infra_log "services ready in $((SECONDS - t0))s (run dir: $RUN)"
fi

brokers="127.0.0.1:${kafka_ports[1]}"
for ((n = 2; n <= NODES; n++)); do brokers+=",127.0.0.1:${kafka_ports[$n]}"; done
env_text=$(printf 'KAFKA_BROKERS=%s\nMONGO_URL=mongodb://127.0.0.1:%s/\n' "$brokers" "$fdb_port")
if [[ ! -f "$RUN/services.env" || "$(<"$RUN/services.env")" != "$env_text" ]]; then
  printf '%s\n' "$env_text" >"$RUN/services.env.tmp" && mv -f "$RUN/services.env.tmp" "$RUN/services.env"
fi
printf '%s\n' "$env_text"
