# shellcheck shell=bash
# Throwaway test backends for scripts/test: a PostgreSQL cluster and an
# S3-compatible server (moto). Source it after scripts/lib/common.sh.
#
#   noema_backends_start   start what the environment does not already provide
#                          and export NOEMA_TEST_DATABASE_URL / NOEMA_TEST_S3_URL
#   noema_backends_stop    stop whatever was started, remove the temp dir
#                          (safe to call more than once, and from a trap)
#
# Nothing here is started unless the matching URL is unset, and nothing that was
# not started here is ever stopped.

# Internal state. Reset at source time so that values inherited from the
# environment can never point cleanup at someone else's files or processes.
NOEMA_BACKENDS_TMP=''
NOEMA_PG_DIR='' NOEMA_PG_DATA='' NOEMA_PG_LOG='' NOEMA_PG_PID='' NOEMA_PG_PORT=''
NOEMA_PG_BINDIR='' NOEMA_PG_RUNAS=''
NOEMA_MOTO_PID='' NOEMA_MOTO_PORT='' NOEMA_MOTO_LOG='' NOEMA_MOTO_GROUP=''
NOEMA_MOTO_CMD=()
NOEMA_BACKENDS_SET_VARS=()

# Seconds to wait for a server to come up.
NOEMA_BACKEND_TIMEOUT=${NOEMA_TEST_BACKEND_TIMEOUT:-60}
# Attempts at binding a free port (another process may take it between the pick
# and the bind, e.g. a second scripts/test running at the same time).
NOEMA_BACKEND_PORT_ATTEMPTS=3

noema_backends_tmp() {
  [[ -z $NOEMA_BACKENDS_TMP ]] || return 0
  NOEMA_BACKENDS_TMP=$(mktemp -d "${TMPDIR:-/tmp}/noema-test.XXXXXX") ||
    noema_die "cannot create a temp dir under ${TMPDIR:-/tmp}"
}

# noema_export NAME VALUE: export and remember it for the --backends-only report.
noema_export() {
  export "$1=$2"
  NOEMA_BACKENDS_SET_VARS+=("$1")
}

noema_as_root() { ((EUID == 0)); }

# --- PostgreSQL ---------------------------------------------------------------

# Print the first directory that holds initdb, pg_ctl and postgres: the one the
# initdb/pg_ctl on PATH live in, then Debian's /usr/lib/postgresql/<v>/bin
# (15 first, then newest first).
noema_pg_find_bindir() {
  local c d
  local -a candidates=()
  for c in pg_ctl initdb; do
    if c=$(command -v "$c" 2>/dev/null); then
      candidates+=("$(dirname "$(readlink -f "$c")")")
    fi
  done
  candidates+=(/usr/lib/postgresql/15/bin)
  while IFS= read -r d; do
    candidates+=("$d")
  done < <(compgen -G '/usr/lib/postgresql/*/bin' | sort -V -r)
  for d in "${candidates[@]}"; do
    if [[ -x $d/initdb && -x $d/pg_ctl && -x $d/postgres ]]; then
      echo "$d"
      return 0
    fi
  done
  return 1
}

noema_pg_install() {
  if ! noema_as_root || ! command -v apt-get >/dev/null 2>&1; then
    noema_die "PostgreSQL server binaries (initdb, pg_ctl) not found. Install PostgreSQL 15" \
      "(Debian: apt-get install postgresql-15) or set NOEMA_TEST_DATABASE_URL to an admin URL" \
      "of a server you run yourself."
  fi
  noema_info "PostgreSQL server not found; installing it with apt-get (postgresql)"
  # Keep the package from starting its default cluster on port 5432: this
  # script starts its own and must leave nothing running behind it.
  local policy=/usr/sbin/policy-rc.d added_policy='' rc=0
  if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && added_policy=1
  fi
  {
    apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql
  } </dev/null || rc=$?
  if [[ -n $added_policy ]]; then rm -f "$policy"; fi
  ((rc == 0)) || noema_die "apt-get install postgresql failed (exit $rc)"
}

noema_pg_ensure_os_user() {
  local user=$1
  id -u "$user" >/dev/null 2>&1 && return 0
  noema_info "creating system user $user to run the test PostgreSQL (it refuses to run as root)"
  local nologin=/usr/sbin/nologin
  [[ -x $nologin ]] || nologin=/bin/false
  # A concurrent scripts/test may create it at the same moment: re-check on failure.
  useradd --system --user-group --no-create-home --home-dir /nonexistent \
    --shell "$nologin" "$user" 2>/dev/null ||
    id -u "$user" >/dev/null 2>&1 ||
    noema_die "cannot create system user $user (useradd failed)"
}

# noema_pg_run CMD ARGS...: run a PostgreSQL tool as the server's OS user, from
# inside the cluster's dir (the user cannot read root's cwd).
noema_pg_run() {
  (
    cd "$NOEMA_PG_DIR" || exit 1
    if [[ -z $NOEMA_PG_RUNAS ]]; then
      exec "$@"
    elif command -v runuser >/dev/null 2>&1; then
      exec runuser -u "$NOEMA_PG_RUNAS" -- "$@"
    else
      exec su -s /bin/bash -c "$(printf '%q ' "$@")" "$NOEMA_PG_RUNAS"
    fi
  )
}

# noema_pg_ready: true once the server accepts connections.
noema_pg_ready() {
  local isready=$NOEMA_PG_BINDIR/pg_isready
  [[ -x $isready ]] || isready=$(command -v pg_isready 2>/dev/null) || isready=''
  if [[ -n $isready ]]; then
    "$isready" -q -h 127.0.0.1 -p "$NOEMA_PG_PORT" -U postgres -d postgres -t 2
  elif command -v psql >/dev/null 2>&1; then
    psql -X -q -w -h 127.0.0.1 -p "$NOEMA_PG_PORT" -U postgres -d postgres -c 'select 1' >/dev/null 2>&1
  else
    noema_port_in_use "$NOEMA_PG_PORT"
  fi
}

noema_start_postgres() {
  noema_backends_tmp
  NOEMA_PG_BINDIR=$(noema_pg_find_bindir) || {
    noema_pg_install
    NOEMA_PG_BINDIR=$(noema_pg_find_bindir) ||
      noema_die "PostgreSQL was installed but initdb/pg_ctl are still not found"
  }

  NOEMA_PG_DIR=$NOEMA_BACKENDS_TMP/pg
  NOEMA_PG_DATA=$NOEMA_PG_DIR/data
  mkdir -m 700 "$NOEMA_PG_DIR"

  if noema_as_root; then
    NOEMA_PG_RUNAS=${NOEMA_TEST_PG_OS_USER:-noema-pg}
    noema_pg_ensure_os_user "$NOEMA_PG_RUNAS"
    # The server user must be able to reach its own subdir of our temp dir.
    chmod 711 "$NOEMA_BACKENDS_TMP"
    chown "$NOEMA_PG_RUNAS:" "$NOEMA_PG_DIR"
    noema_pg_run test -w "$NOEMA_PG_DIR" ||
      noema_die "user $NOEMA_PG_RUNAS cannot write $NOEMA_PG_DIR; is a parent of TMPDIR" \
        "(${TMPDIR:-/tmp}) closed to other users? Try TMPDIR=/tmp."
  fi

  # Superuser "postgres" whatever the OS user; trust auth; UTF8, C collation.
  if ! noema_pg_run "$NOEMA_PG_BINDIR/initdb" -D "$NOEMA_PG_DATA" -U postgres --auth=trust \
    -E UTF8 --locale=C --no-sync >"$NOEMA_PG_DIR/initdb.log" 2>&1; then
    noema_dump_log 'initdb output' "$NOEMA_PG_DIR/initdb.log"
    noema_die 'initdb failed'
  fi
  cat >>"$NOEMA_PG_DATA/postgresql.conf" <<EOF

# --- added by scripts/test: throwaway test cluster, durability off ---
listen_addresses = '127.0.0.1'
unix_socket_directories = '$NOEMA_PG_DIR'
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 200
# Every CREATE DATABASE logs its template (~7 MB): recycle the WAL sooner than the 1 GB default.
max_wal_size = 256MB
EOF

  local attempt
  for ((attempt = 1; attempt <= NOEMA_BACKEND_PORT_ATTEMPTS; attempt++)); do
    NOEMA_PG_PORT=$(noema_free_port) || noema_die 'cannot find a free TCP port'
    NOEMA_PG_LOG=$NOEMA_PG_DIR/postgres.$attempt.log
    if noema_pg_run "$NOEMA_PG_BINDIR/pg_ctl" start -D "$NOEMA_PG_DATA" -l "$NOEMA_PG_LOG" \
      -o "-p $NOEMA_PG_PORT" -w -t "$NOEMA_BACKEND_TIMEOUT" -s \
      </dev/null >"$NOEMA_PG_DIR/pg_ctl.$attempt.log" 2>&1; then
      break
    fi
    if ((attempt < NOEMA_BACKEND_PORT_ATTEMPTS)) &&
      grep -qiE 'could not bind|address already in use' "$NOEMA_PG_LOG" 2>/dev/null &&
      ! [[ -e $NOEMA_PG_DATA/postmaster.pid ]]; then
      noema_warn "port $NOEMA_PG_PORT was taken; retrying PostgreSQL on another port"
      continue
    fi
    noema_dump_log 'pg_ctl output' "$NOEMA_PG_DIR/pg_ctl.$attempt.log"
    noema_dump_log 'PostgreSQL server log' "$NOEMA_PG_LOG"
    noema_die "PostgreSQL failed to start on 127.0.0.1:$NOEMA_PG_PORT (pg_ctl waits up to ${NOEMA_BACKEND_TIMEOUT}s)"
  done
  NOEMA_PG_PID=$(head -n 1 "$NOEMA_PG_DATA/postmaster.pid" 2>/dev/null) || NOEMA_PG_PID=''

  local deadline=$((SECONDS + NOEMA_BACKEND_TIMEOUT))
  until noema_pg_ready; do
    if ((SECONDS >= deadline)) || ! noema_pid_alive "$NOEMA_PG_PID"; then
      noema_dump_log 'PostgreSQL server log' "$NOEMA_PG_LOG"
      noema_die "PostgreSQL on 127.0.0.1:$NOEMA_PG_PORT is not accepting connections"
    fi
    sleep 0.2
  done

  noema_export NOEMA_TEST_DATABASE_URL "postgres://postgres@127.0.0.1:$NOEMA_PG_PORT/postgres"
  noema_info "postgres: $("$NOEMA_PG_BINDIR/postgres" --version 2>/dev/null | head -n 1)" \
    "on 127.0.0.1:$NOEMA_PG_PORT (pid $NOEMA_PG_PID${NOEMA_PG_RUNAS:+, user $NOEMA_PG_RUNAS})"
}

noema_stop_postgres() {
  local pid=$NOEMA_PG_PID
  if [[ -z $pid && -n $NOEMA_PG_DATA && -r $NOEMA_PG_DATA/postmaster.pid ]]; then
    pid=$(head -n 1 "$NOEMA_PG_DATA/postmaster.pid" 2>/dev/null) || pid=''
  fi
  NOEMA_PG_PID=''
  [[ $pid =~ ^[0-9]+$ ]] && noema_pid_alive "$pid" || return 0
  # SIGINT = "fast" shutdown: disconnect clients, roll back, stop.
  kill -INT "$pid" 2>/dev/null || true
  noema_wait_gone "$pid" 30 && return 0
  noema_warn "PostgreSQL (pid $pid) ignored fast shutdown; sending SIGQUIT"
  kill -QUIT "$pid" 2>/dev/null || true
  noema_wait_gone "$pid" 5 && return 0
  kill -KILL "$pid" 2>/dev/null || true
  noema_wait_gone "$pid" 5 || noema_warn "could not stop PostgreSQL (pid $pid)"
}

# --- S3 (moto) ----------------------------------------------------------------

noema_moto_venv() { echo "${XDG_CACHE_HOME:-$HOME/.cache}/noema/moto-venv"; }

# Set NOEMA_MOTO_CMD to a working moto server command, if there is one.
noema_moto_find() {
  local venv
  venv=$(noema_moto_venv)
  if command -v moto_server >/dev/null 2>&1 && moto_server --help >/dev/null 2>&1; then
    NOEMA_MOTO_CMD=(moto_server)
  elif command -v python3 >/dev/null 2>&1 &&
    python3 -c 'import moto.server, flask, flask_cors' >/dev/null 2>&1; then
    # Same entry point; works right after a pip install, before pyenv rehashes its shims.
    NOEMA_MOTO_CMD=(python3 -m moto.server)
  elif [[ -x $venv/bin/python ]] &&
    "$venv/bin/python" -c 'import moto.server, flask, flask_cors' >/dev/null 2>&1; then
    NOEMA_MOTO_CMD=("$venv/bin/python" -m moto.server)
  else
    return 1
  fi
}

noema_moto_install() {
  if ! command -v python3 >/dev/null 2>&1; then
    if noema_as_root && command -v apt-get >/dev/null 2>&1; then
      noema_info 'python3 not found; installing it with apt-get'
      {
        apt-get update -qq &&
          DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            python3 python3-venv python3-pip
      } </dev/null || noema_die 'apt-get install python3 failed'
    else
      noema_die 'python3 is needed to run moto (the S3 test server); install it or set NOEMA_TEST_S3_URL'
    fi
  fi
  noema_info "moto_server not found; installing moto[server] from PyPI"
  noema_backends_tmp
  local piplog=$NOEMA_BACKENDS_TMP/pip-install.log
  if python3 -m pip install --disable-pip-version-check -q 'moto[server]' </dev/null >"$piplog" 2>&1; then
    return 0
  fi
  # e.g. an "externally managed" (PEP 668) system Python: use a private virtualenv.
  local venv
  venv=$(noema_moto_venv)
  noema_info "pip install into $(command -v python3) failed ($(grep -m 1 -i error "$piplog" || true));" \
    "using a virtualenv at $venv"
  mkdir -p "$(dirname "$venv")"
  if ! python3 -m venv "$venv" </dev/null >>"$piplog" 2>&1 ||
    ! "$venv/bin/python" -m pip install --disable-pip-version-check -q 'moto[server]' \
      </dev/null >>"$piplog" 2>&1; then
    noema_dump_log 'pip output' "$piplog"
    noema_die "cannot install moto[server] (tried pip and a virtualenv at $venv)"
  fi
}

noema_start_moto() {
  noema_backends_tmp
  noema_moto_find || {
    noema_moto_install
    noema_moto_find || noema_die 'moto[server] was installed but cannot be run'
  }

  local attempt deadline
  for ((attempt = 1; attempt <= NOEMA_BACKEND_PORT_ATTEMPTS; attempt++)); do
    NOEMA_MOTO_PORT=$(noema_free_port) || noema_die 'cannot find a free TCP port'
    NOEMA_MOTO_LOG=$NOEMA_BACKENDS_TMP/moto.$attempt.log
    # Own session and process group (setsid), so that a terminal's Ctrl-C
    # reaches only the tests and the stop below can signal the whole group.
    if command -v setsid >/dev/null 2>&1; then
      setsid "${NOEMA_MOTO_CMD[@]}" -H 127.0.0.1 -p "$NOEMA_MOTO_PORT" \
        </dev/null >"$NOEMA_MOTO_LOG" 2>&1 &
      NOEMA_MOTO_GROUP=1
    else
      "${NOEMA_MOTO_CMD[@]}" -H 127.0.0.1 -p "$NOEMA_MOTO_PORT" \
        </dev/null >"$NOEMA_MOTO_LOG" 2>&1 &
      NOEMA_MOTO_GROUP=''
    fi
    NOEMA_MOTO_PID=$!

    deadline=$((SECONDS + NOEMA_BACKEND_TIMEOUT))
    while :; do
      if noema_pid_alive "$NOEMA_MOTO_PID"; then
        if noema_pid_listens "$NOEMA_MOTO_PID" "$NOEMA_MOTO_PORT" &&
          noema_http_answers "http://127.0.0.1:$NOEMA_MOTO_PORT/"; then
          break 2
        fi
        if ((SECONDS >= deadline)); then
          noema_dump_log 'moto server log' "$NOEMA_MOTO_LOG"
          noema_die "moto did not answer on 127.0.0.1:$NOEMA_MOTO_PORT within ${NOEMA_BACKEND_TIMEOUT}s"
        fi
        sleep 0.2
        continue
      fi
      wait "$NOEMA_MOTO_PID" 2>/dev/null || true
      NOEMA_MOTO_PID=''
      if ((attempt < NOEMA_BACKEND_PORT_ATTEMPTS)) &&
        grep -qi 'address already in use' "$NOEMA_MOTO_LOG" 2>/dev/null; then
        noema_warn "port $NOEMA_MOTO_PORT was taken; retrying moto on another port"
        continue 2
      fi
      noema_dump_log 'moto server log' "$NOEMA_MOTO_LOG"
      noema_die "moto exited before answering on 127.0.0.1:$NOEMA_MOTO_PORT"
    done
  done

  local endpoint=http://127.0.0.1:$NOEMA_MOTO_PORT
  noema_export NOEMA_TEST_S3_URL "s3://noema-test?endpoint=$endpoint&region=us-east-1&create_bucket=true"
  # moto takes any credentials; the SDK only needs some. Never let the SDK go
  # looking for instance metadata (169.254.169.254) from a test run.
  local var value
  for var in AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1 \
    AWS_EC2_METADATA_DISABLED=true; do
    value=${var#*=}
    var=${var%%=*}
    [[ -n ${!var:-} ]] || noema_export "$var" "$value"
  done
  noema_info "moto: ${NOEMA_MOTO_CMD[*]} on 127.0.0.1:$NOEMA_MOTO_PORT (pid $NOEMA_MOTO_PID)"
}

noema_stop_moto() {
  local pid=$NOEMA_MOTO_PID
  NOEMA_MOTO_PID=''
  [[ -n $pid ]] || return 0
  local target=$pid
  [[ -z $NOEMA_MOTO_GROUP ]] || target=-$pid
  if noema_pid_alive "$pid"; then
    kill -TERM -- "$target" 2>/dev/null || true
    if ! noema_wait_gone "$pid" 10; then
      noema_warn "moto (pid $pid) ignored SIGTERM; sending SIGKILL"
      kill -KILL -- "$target" 2>/dev/null || true
    fi
  fi
  wait "$pid" 2>/dev/null || true
}

# --- both -----------------------------------------------------------------------

noema_backends_start() {
  if [[ -n ${NOEMA_TEST_DATABASE_URL:-} ]]; then
    noema_info "postgres: using NOEMA_TEST_DATABASE_URL from the environment"
  else
    noema_start_postgres
  fi
  if [[ -n ${NOEMA_TEST_S3_URL:-} ]]; then
    noema_info "s3: using NOEMA_TEST_S3_URL from the environment"
  else
    noema_start_moto
  fi
}

# Print `NAME=value` for every variable noema_backends_start exported.
noema_backends_print_env() {
  local var
  for var in "${NOEMA_BACKENDS_SET_VARS[@]}"; do
    printf '%s=%s\n' "$var" "${!var}"
  done
}

noema_backends_stop() {
  noema_stop_moto
  noema_stop_postgres
  if [[ -n $NOEMA_BACKENDS_TMP && -d $NOEMA_BACKENDS_TMP ]]; then
    if [[ ${NOEMA_TEST_KEEP_TMP:-0} == 1 ]]; then
      noema_info "kept backend data and logs in $NOEMA_BACKENDS_TMP (NOEMA_TEST_KEEP_TMP=1)"
    else
      rm -rf -- "$NOEMA_BACKENDS_TMP"
    fi
  fi
  NOEMA_BACKENDS_TMP=''
}
