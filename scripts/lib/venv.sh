# shellcheck shell=bash
# Pinned Python virtualenvs for scripts/test's tools (the deploy checks, the MCP SDK test).
# Source it after scripts/lib/common.sh.
#
#   noema_venv_ensure VENV TIMEOUT WHAT HINT REQUIREMENT...
#
# creates VENV with exactly REQUIREMENTS (every package pinned, dependencies included,
# wheels only) on first use, and again only when the pins or the Python version change
# (a stamp file records them); two runs at once wait for each other on VENV.lock. It sets
# NOEMA_VENV_PATH to VENV. It fails loudly (noema_die, with pip's output and HINT) when
# the packages cannot be installed: a test that needs them must never be skipped.
# NOEMA_VENV_PYTHON (default python3) is the interpreter a venv is made with; a caller that
# needs a newer Python than python3 sets it (see noema_python_at_least).

# noema_venv_run CMD...: run a command in the background and wait for it, so that a signal
# reaches the caller at once (bash defers traps while a foreground child runs); a caller's
# EXIT trap may stop NOEMA_VENV_CHILD. Stdin is /dev/null.
NOEMA_VENV_CHILD=''
noema_venv_run() {
  local rc=0
  "$@" </dev/null &
  NOEMA_VENV_CHILD=$!
  wait "$NOEMA_VENV_CHILD" || rc=$?
  NOEMA_VENV_CHILD=''
  return "$rc"
}

# noema_venv_python: a python3 >= 3.10 with venv support, installed with apt-get when
# missing and running as root (as scripts/lib/backends.sh does for moto).
noema_venv_python() {
  local ok='import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 10))'
  if command -v python3 >/dev/null 2>&1 && python3 -c "$ok" >/dev/null 2>&1; then
    return 0
  fi
  if ((EUID == 0)) && command -v apt-get >/dev/null 2>&1; then
    noema_info 'python3 (>= 3.10, with venv) not found; installing it with apt-get'
    {
      noema_venv_run apt-get update -qq &&
        noema_venv_run env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
          --no-install-recommends python3 python3-venv python3-pip
    } >&2 || noema_die 'apt-get install python3 python3-venv failed'
    python3 -c "$ok" >/dev/null 2>&1 && return 0
  fi
  noema_die 'python3 >= 3.10 with the venv module is needed (Debian: python3-venv)'
}

# noema_python_at_least MAJOR.MINOR: the path of a Python of at least that version with
# venv support (python3, python3.N on PATH, or one pyenv installed), or nothing.
noema_python_at_least() {
  local want=$1 candidate ok
  ok="import sys, venv, ensurepip; sys.exit(sys.version_info < tuple(map(int, '$want'.split('.'))))"
  for candidate in python3 python3.14 python3.13 python3.12 \
    "$(pyenv root 2>/dev/null)"/versions/3.*/bin/python3; do
    candidate=$(command -v "$candidate" 2>/dev/null) || continue
    if "$candidate" -c "$ok" >/dev/null 2>&1; then
      echo "$candidate"
      return 0
    fi
  done
}

NOEMA_VENV_PATH=''
noema_venv_ensure() {
  local venv=$1 timeout=$2 what=$3 hint=$4
  shift 4
  local stamp=$venv/.noema-requirements want lock fd='' python=${NOEMA_VENV_PYTHON:-python3}
  [[ -n ${NOEMA_VENV_PYTHON:-} ]] || noema_venv_python
  want=$(printf '%s\n' "$("$python" -c 'import sys; print(sys.version.split()[0])')" "$@")
  NOEMA_VENV_PATH=$venv
  if [[ -x $venv/bin/python && -r $stamp && $(<"$stamp") == "$want" ]]; then
    return 0
  fi

  mkdir -p "$(dirname "$venv")"
  # Two runs at once (e.g. two worktrees) must not build the same venv together.
  lock=$venv.lock
  if command -v flock >/dev/null 2>&1; then
    exec {fd}>"$lock"
    flock -w "$timeout" "$fd" ||
      noema_die "timed out waiting for $lock (another run installing $what?)"
    if [[ -x $venv/bin/python && -r $stamp && $(<"$stamp") == "$want" ]]; then
      exec {fd}>&-
      return 0
    fi
  fi

  noema_info "installing $what (pinned, PyPI) into $venv"
  local log req rc=0
  log=$(mktemp "${TMPDIR:-/tmp}/noema-venv-pip.XXXXXX")
  req=$log.requirements.txt
  printf '%s\n' "$@" >"$req"
  if [[ -d $venv && ! -e $venv/pyvenv.cfg && -n $(ls -A "$venv") ]]; then
    noema_die "$venv exists and is not a virtualenv: remove it (or point its variable elsewhere)"
  fi
  rm -rf -- "$venv"
  local -a limit=()
  command -v timeout >/dev/null 2>&1 && limit=(timeout "$timeout")
  {
    noema_venv_run "$python" -m venv "$venv" &&
      noema_venv_run "${limit[@]}" "$venv/bin/python" -m pip install \
        --disable-pip-version-check --no-input --quiet --only-binary=:all: \
        --timeout 60 --retries 3 -r "$req"
  } >"$log" 2>&1 || rc=$?
  if ((rc != 0)); then
    noema_dump_log 'pip output' "$log"
    rm -rf -- "$venv" "$log" "$req"
    [[ -z $fd ]] || exec {fd}>&-
    noema_die "cannot install $what (exit $rc): $hint"
  fi
  printf '%s\n' "$want" >"$stamp"
  rm -f -- "$log" "$req"
  [[ -z $fd ]] || exec {fd}>&-
}
