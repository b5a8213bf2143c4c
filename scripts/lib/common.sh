# shellcheck shell=bash
# Shared helpers for scripts/test and friends. Source it; do not execute it.
#
# Everything here is prefixed `noema_` (functions) or `NOEMA_` (variables) so it
# can be sourced into other scripts without clashing.

# --- output -----------------------------------------------------------------

if [[ -t 2 && -z ${NO_COLOR:-} ]]; then
  NOEMA_C_BOLD=$'\e[1m' NOEMA_C_RED=$'\e[31m' NOEMA_C_YELLOW=$'\e[33m' NOEMA_C_RESET=$'\e[0m'
else
  NOEMA_C_BOLD='' NOEMA_C_RED='' NOEMA_C_YELLOW='' NOEMA_C_RESET=''
fi

# `==> title`: the start of a step.
noema_section() { printf '%s==> %s%s\n' "$NOEMA_C_BOLD" "$*" "$NOEMA_C_RESET" >&2; }
noema_info() { printf '    %s\n' "$*" >&2; }
noema_warn() { printf '%swarning:%s %s\n' "$NOEMA_C_YELLOW" "$NOEMA_C_RESET" "$*" >&2; }
noema_error() { printf '%serror:%s %s\n' "$NOEMA_C_RED" "$NOEMA_C_RESET" "$*" >&2; }
noema_die() {
  noema_error "$*"
  exit 1
}

# noema_dump_log TITLE FILE: print a log file (last 200 lines) framed, to stderr.
noema_dump_log() {
  local title=$1 file=$2
  {
    printf -- '----- %s (%s) -----\n' "$title" "$file"
    if [[ -r $file ]]; then tail -n 200 "$file"; else echo '(no log file)'; fi
    printf -- '----- end of %s -----\n' "$title"
  } >&2
}

# --- processes ----------------------------------------------------------------

# noema_pid_alive PID: true while PID runs. A zombie (exited, not yet reaped)
# counts as gone.
noema_pid_alive() {
  local pid=$1 stat state
  [[ -n $pid ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  if [[ -r /proc/$pid/stat ]]; then
    { stat=$(<"/proc/$pid/stat"); } 2>/dev/null || return 1
    state=${stat##*) }
    state=${state%% *}
    [[ $state != Z && $state != X ]] || return 1
  fi
  return 0
}

# noema_wait_gone PID SECONDS: wait (polling) until PID is gone. False on timeout.
noema_wait_gone() {
  local pid=$1 deadline=$((SECONDS + $2))
  while noema_pid_alive "$pid"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.1
  done
  return 0
}

# --- network ------------------------------------------------------------------

# noema_port_in_use PORT: true if something accepts TCP connections on
# 127.0.0.1:PORT.
noema_port_in_use() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# noema_free_port: print a TCP port on 127.0.0.1 that is free right now. There
# is an unavoidable window between picking and binding; callers retry on a
# bind failure.
noema_free_port() {
  local port
  if command -v python3 >/dev/null 2>&1 &&
    port=$(python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()' 2>/dev/null) && [[ $port =~ ^[0-9]+$ ]]; then
    echo "$port"
    return 0
  fi
  local _
  for _ in $(seq 1 200); do
    port=$((20000 + RANDOM % 12000))
    if ! noema_port_in_use "$port"; then
      echo "$port"
      return 0
    fi
  done
  return 1
}

# noema_pid_listens PID PORT: true if process PID holds a TCP socket listening on
# PORT (so a reply on PORT comes from it, not from a stranger that took the port).
# Where /proc cannot tell, assume it does.
noema_pid_listens() {
  local pid=$1 port inode fd
  port=$(printf '%04X' "$2")
  [[ -r /proc/net/tcp && -d /proc/$pid/fd ]] || return 0
  while read -r inode; do
    for fd in "/proc/$pid/fd/"*; do
      [[ $(readlink "$fd" 2>/dev/null) != "socket:[$inode]" ]] || return 0
    done
  done < <(awk -v p=":$port" '$4 == "0A" && substr($2, length($2) - 4) == p { print $10 }' \
    /proc/net/tcp /proc/net/tcp6 2>/dev/null)
  return 1
}

# noema_http_answers URL: true if an HTTP server answers at URL (any status).
noema_http_answers() {
  local url=$1 code
  if command -v curl >/dev/null 2>&1; then
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$url" 2>/dev/null) || true
    [[ -n $code && $code != 000 ]]
  else
    python3 - "$url" <<'EOF' >/dev/null 2>&1
import sys, urllib.request, urllib.error
try:
    urllib.request.urlopen(sys.argv[1], timeout=2)
except urllib.error.HTTPError:
    pass
EOF
  fi
}

# noema_wait_http URL PID LOG: until URL answers 2xx, or die (with LOG) when PID exits or
# a minute passes.
noema_wait_http() {
  local url=$1 pid=$2 log=$3 deadline=$((SECONDS + 60))
  until curl -fsS -o /dev/null "$url" 2>/dev/null; do
    if ! kill -0 "$pid" 2>/dev/null || ((SECONDS >= deadline)); then
      noema_dump_log "log of the process behind $url" "$log"
      noema_die "$url did not answer"
    fi
    sleep 0.2
  done
}
