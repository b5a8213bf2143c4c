# shellcheck shell=bash
# CogniRelay's own client hooks (cognirelay_continuity_save_hook.py and
# cognirelay_retrieval_hook.py), which tests/tests/continuity_hooks.rs runs against
# Noema's gateway. Source it after scripts/lib/common.sh and scripts/lib/backends.sh;
# noema_cognirelay_hooks_ensure installs the pinned PyPI package into a virtualenv under
# ${XDG_CACHE_HOME:-$HOME/.cache}/noema/cognirelay-venv (once; rebuilt when the pin
# changes) and exports
#   NOEMA_COGNIRELAY_HOOKS   the package's agent_assets/hooks directory
#   NOEMA_COGNIRELAY_PYTHON  the virtualenv's python, which runs them
# The hooks use only Python's standard library, so the package goes in without its
# server dependencies (--no-deps); it declares Python >= 3.12 for its server, which the
# hooks do not need (--ignore-requires-python lets an older python3 carry them).
# Environment: NOEMA_COGNIRELAY_VENV overrides the virtualenv's path.

NOEMA_COGNIRELAY_REQUIREMENT='cognirelay==1.4.15'

noema_cognirelay_venv_dir() {
  echo "${NOEMA_COGNIRELAY_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/noema/cognirelay-venv}"
}

noema_cognirelay_hooks_ensure() {
  local venv stamp hooks lock fd='' log rc=0
  venv=$(noema_cognirelay_venv_dir)
  stamp=$venv/.noema-requirements
  command -v python3 >/dev/null 2>&1 ||
    noema_die "python3 is needed to run CogniRelay's client hooks (tests/tests/continuity_hooks.rs)"
  mkdir -p "$(dirname "$venv")"
  if command -v flock >/dev/null 2>&1; then
    lock=$venv.lock
    exec {fd}>"$lock"
    flock -w 600 "$fd" || noema_die "timed out waiting for $lock (another run installing cognirelay?)"
  fi
  if ! [[ -x $venv/bin/python && -r $stamp && $(<"$stamp") == "$NOEMA_COGNIRELAY_REQUIREMENT" ]]; then
    noema_info "installing $NOEMA_COGNIRELAY_REQUIREMENT (PyPI, its client hooks only) into $venv"
    log=$(mktemp "${TMPDIR:-/tmp}/noema-cognirelay-pip.XXXXXX")
    rm -rf -- "$venv"
    {
      python3 -m venv "$venv" &&
        "$venv/bin/python" -m pip install --disable-pip-version-check --no-input --quiet \
          --no-deps --ignore-requires-python --timeout 60 --retries 3 \
          "$NOEMA_COGNIRELAY_REQUIREMENT"
    } </dev/null >"$log" 2>&1 || rc=$?
    if ((rc != 0)); then
      noema_dump_log 'pip output' "$log"
      rm -rf -- "$venv" "$log"
      [[ -z $fd ]] || exec {fd}>&-
      noema_die "cannot install $NOEMA_COGNIRELAY_REQUIREMENT (exit $rc): the CogniRelay hook" \
        "tests need it from PyPI (python3 -m venv needs the venv module: Debian python3-venv)"
    fi
    rm -f -- "$log"
    printf '%s\n' "$NOEMA_COGNIRELAY_REQUIREMENT" >"$stamp"
  fi
  [[ -z $fd ]] || exec {fd}>&-
  hooks=$("$venv/bin/python" -c \
    'import cognirelay, pathlib; print(pathlib.Path(cognirelay.__file__).parent / "agent_assets" / "hooks")') ||
    noema_die "$venv has no importable cognirelay package; remove it and retry"
  [[ -r $hooks/cognirelay_continuity_save_hook.py && -r $hooks/cognirelay_retrieval_hook.py ]] ||
    noema_die "$hooks lacks CogniRelay's client hooks"
  noema_export NOEMA_COGNIRELAY_HOOKS "$hooks"
  noema_export NOEMA_COGNIRELAY_PYTHON "$venv/bin/python"
}
