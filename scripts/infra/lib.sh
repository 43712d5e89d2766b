# shellcheck shell=bash
# Shared settings and helpers for the local dev/test infrastructure (Kafka + FerretDB).
# Sourced by install-kafka.sh, install-ferretdb.sh, up.sh and down.sh; not meant to be run.
#
# No Docker: Kafka runs as a plain JVM (jars fetched from Maven Central), FerretDB is built
# from source with Go and uses its SQLite backend. Nothing is written inside the git clone.
#
# Locations
#   Cache (downloads/builds, keyed by version; shared by every checkout on the machine):
#     $EVENT_PLATFORM_CACHE, default ${XDG_CACHE_HOME:-$HOME/.cache}/event-platform
#       <cache>/kafka-3.9.1/lib/*.jar          Kafka broker + tools classpath (install-kafka.sh)
#       <cache>/ferretdb-v1.24.2/ferretdb      FerretDB binary (install-ferretdb.sh)
#   Run dir (data, logs, pid files, services.env):
#     $EVENT_PLATFORM_RUN, default <cache>/run
#     With INFRA_INSTANCE=<name> the run dir is "<run dir>-<name>" (default <cache>/run-<name>)
#     and the preferred ports are shifted, so e.g. a fault test can have a private broker it
#     is free to kill. By default all checkouts share ONE running pair of services; tests
#     isolate themselves by topic / database names.
#       <run>/services.env                     KAFKA_BROKERS=... / MONGO_URL=... (written by up.sh)
#       <run>/server.properties, log4j.properties, kafka-data/, kafka.log, kafka.out, kafka.pid
#       <run>/ferretdb-data/, ferretdb.log, ferretdb.pid
#       <run>/.lock                            flock: serialises up.sh / down.sh
#
# Ports (127.0.0.1 only): default instance prefers Kafka 19092 (controller 19093) and
# FerretDB 27027; a named instance prefers the same plus a per-name offset. If a preferred
# port is taken, a random free port is used instead (see services.env / up.sh output).

KAFKA_VERSION=3.9.1
FERRETDB_VERSION=v1.24.2

INFRA_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
INFRA_CACHE="${EVENT_PLATFORM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/event-platform}"

KAFKA_HOME="$INFRA_CACHE/kafka-$KAFKA_VERSION"
KAFKA_LIB="$KAFKA_HOME/lib"
KAFKA_CP="$KAFKA_LIB/*"
KAFKA_STAMP="$KAFKA_HOME/.installed"
KAFKA_POM="$INFRA_DIR/kafka-pom.xml"

# Our patches to FerretDB's source (scripts/infra/ferretdb-patches/*.patch); bump the level
# with every change there so the cached binary is rebuilt.
FERRETDB_PATCHES="$INFRA_DIR/ferretdb-patches"
FERRETDB_PATCH_LEVEL=p2
FERRETDB_HOME="$INFRA_CACHE/ferretdb-$FERRETDB_VERSION-$FERRETDB_PATCH_LEVEL"
FERRETDB_BIN="$FERRETDB_HOME/ferretdb"

INFRA_RUN="${EVENT_PLATFORM_RUN:-$INFRA_CACHE/run}"
KAFKA_PORT_PREF=19092
KAFKA_CTRL_PORT_PREF=19093
FERRETDB_PORT_PREF=27027
if [[ -n "${INFRA_INSTANCE:-}" ]]; then
  if [[ ! "$INFRA_INSTANCE" =~ ^[A-Za-z0-9_.-]+$ ]]; then
    echo "[infra] INFRA_INSTANCE must match [A-Za-z0-9_.-]+ (got '$INFRA_INSTANCE')" >&2
    exit 2
  fi
  INFRA_RUN="$INFRA_RUN-$INFRA_INSTANCE"
  # deterministic per-name offset (10..3000, step 10), stays below the ephemeral port range
  _infra_off=$(( ( $(printf '%s' "$INFRA_INSTANCE" | cksum | cut -d' ' -f1) % 300 + 1 ) * 10 ))
  KAFKA_PORT_PREF=$((KAFKA_PORT_PREF + _infra_off))
  KAFKA_CTRL_PORT_PREF=$((KAFKA_CTRL_PORT_PREF + _infra_off))
  FERRETDB_PORT_PREF=$((FERRETDB_PORT_PREF + _infra_off))
  unset _infra_off
fi

# Kafka nodes. By default an instance runs ONE KRaft node (broker and controller in one JVM): the
# dev/test setup. INFRA_KAFKA_NODES=3 (given when the instance is first started) makes it a cluster
# of three combined nodes on 127.0.0.1 instead, as a production cluster is laid out (RF 3,
# min.insync.replicas 2; see up.sh), so a test can kill one broker. The count is recorded in
# <run>/kafka.nodes (absent: 1) and kept until `down.sh --wipe`. Node 1 uses the single node's file
# names; node N>1 the same with "-N" (kafka-2.pid, server-2.properties, kafka-data-2, kafka-2.log).
kafka_sfx() { (($1 == 1)) || printf -- '-%s' "$1"; }
kafka_pidfile() { echo "$INFRA_RUN/kafka$(kafka_sfx "$1").pid"; }
kafka_props() { echo "$INFRA_RUN/server$(kafka_sfx "$1").properties"; }
kafka_marker() { echo "kafka.Kafka $(kafka_props "$1")"; }
kafka_portfile() { echo "$INFRA_RUN/kafka$(kafka_sfx "$1").port"; }
# The node count an instance was started with (1 when nothing was recorded).
kafka_recorded_nodes() {
  if [[ -s "$INFRA_RUN/kafka.nodes" ]]; then cat "$INFRA_RUN/kafka.nodes"; else echo 1; fi
}

# The SQLite URL FerretDB runs with, for the data directory DIR. WAL mode (FerretDB's default) with
# synchronous=NORMAL: a commit survives the FerretDB process dying (what the fault tests do to it),
# not an OS crash; roughly twice the write rate of FULL. journal_size_limit: a WAL file keeps the
# size of its largest run of frames between two resets unless this says otherwise, so SQLite
# truncates it to this many bytes at the first commit after each reset (a reset needs a checkpoint
# that reached the WAL's end with no reader behind it; a long-lived reader postpones it). Per
# database file. INFRA_SQLITE_WAL_LIMIT_BYTES changes it (the WAL test uses a small one).
INFRA_SQLITE_WAL_LIMIT_BYTES=${INFRA_SQLITE_WAL_LIMIT_BYTES:-67108864}
ferretdb_sqlite_url() { # DIR
  [[ "$INFRA_SQLITE_WAL_LIMIT_BYTES" =~ ^[0-9]+$ ]] || infra_die "INFRA_SQLITE_WAL_LIMIT_BYTES must be a number of bytes (got '$INFRA_SQLITE_WAL_LIMIT_BYTES')"
  printf 'file:%s/?_pragma=synchronous(normal)&_pragma=journal_size_limit(%s)' "$1" "$INFRA_SQLITE_WAL_LIMIT_BYTES"
}

infra_log() { echo "[infra${INFRA_INSTANCE:+:$INFRA_INSTANCE}] $*" >&2; }
infra_die() { infra_log "ERROR: $*"; exit 1; }

# sha256 of the pom: part of the Kafka stamp so editing kafka-pom.xml triggers a reinstall
kafka_pom_hash() { sha256sum "$KAFKA_POM" | cut -d' ' -f1; }
kafka_installed() { [[ -f "$KAFKA_STAMP" && "$(cat "$KAFKA_STAMP")" == "$(kafka_pom_hash)" ]]; }
ferretdb_installed() { [[ -x "$FERRETDB_BIN" ]]; }

# port_open PORT: true if something accepts TCP connections on 127.0.0.1:PORT (bash builtin, fast)
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# pid_alive PIDFILE MARKER: prints the pid and succeeds if the process in PIDFILE is alive and
# its command line contains MARKER (guards against pid reuse after a reboot / crash).
pid_alive() {
  local pidfile=$1 marker=$2 pid cmd
  [[ -s "$pidfile" ]] || return 1
  pid=$(<"$pidfile")
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  [[ -r "/proc/$pid/cmdline" ]] || return 1
  cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
  [[ "$cmd" == *"$marker"* ]] || return 1
  echo "$pid"
}

# pick_ports PREF...: prints one free 127.0.0.1 port per argument (the preferred one when it can
# be bound, else a random free one); all results are distinct. PREF 0 = always random.
pick_ports() {
  node -e '
    const net = require("net");
    const bindable = (p) => new Promise((resolve) => {
      const s = net.createServer();
      s.once("error", () => resolve(null));
      s.listen({ port: p, host: "127.0.0.1", exclusive: true }, () => {
        const got = s.address().port;
        s.close(() => resolve(got));
      });
    });
    (async () => {
      const used = new Set(), out = [];
      for (const pref of process.argv.slice(1).map(Number)) {
        let p = pref > 0 && !used.has(pref) ? await bindable(pref) : null;
        while (p === null || used.has(p)) p = await bindable(0);
        used.add(p); out.push(p);
      }
      console.log(out.join(" "));
    })();
  ' "$@"
}

# stop_pid PIDFILE MARKER NAME [TIMEOUT_S]: SIGTERM, wait, then SIGKILL; removes PIDFILE.
stop_pid() {
  local pidfile=$1 marker=$2 name=$3 timeout=${4:-30} pid i
  if pid=$(pid_alive "$pidfile" "$marker"); then
    infra_log "stopping $name (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < timeout * 10; i++)); do
      [[ -d "/proc/$pid" ]] || break
      sleep 0.1
    done
    if [[ -d "/proc/$pid" ]]; then
      infra_log "$name did not exit after ${timeout}s, sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      for ((i = 0; i < 50; i++)); do [[ -d "/proc/$pid" ]] || break; sleep 0.1; done
    fi
  fi
  rm -f "$pidfile"
}

# take_run_lock: exclusive flock on <run>/.lock held on fd 9 until the calling script exits.
# Anything started in the background must close fd 9 (9>&-), or it would hold the lock forever.
take_run_lock() {
  mkdir -p "$INFRA_RUN"
  exec 9>"$INFRA_RUN/.lock"
  if ! flock -n 9; then
    infra_log "waiting for another up.sh/down.sh on $INFRA_RUN ..."
    flock -w 600 9 || infra_die "could not lock $INFRA_RUN/.lock within 600s"
  fi
}
