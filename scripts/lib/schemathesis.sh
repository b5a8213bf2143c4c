# shellcheck shell=bash
# schemathesis (PyPI), pinned, for checking the gateway against its own OpenAPI document
# (scripts/schemathesis runs it against a fresh `noema up`).
#
# Sourced (after scripts/lib/common.sh and scripts/lib/venv.sh), `noema_schemathesis_ensure`
# builds the virtualenv on first use and exports NOEMA_SCHEMATHESIS, its command. Run as
# `bash scripts/lib/schemathesis.sh`, it does the same and prints the command's path.
# Either way it fails loudly when schemathesis cannot be installed.
# Environment: NOEMA_SCHEMATHESIS_VENV overrides the virtualenv's path.

# Every package of the virtualenv, dependencies included, pinned.
NOEMA_SCHEMATHESIS_REQUIREMENTS=(
  schemathesis==4.32.5
  anyio==4.16.0
  certifi==2026.10.19.post1
  charset-normalizer==3.5.3
  click==8.5.1
  graphql-core==3.3.2
  harfile==0.6.0
  hypothesis==6.170.17
  hypothesis-graphql==0.13.5
  idna==3.20
  iniconfig==2.3.1
  jsonschema_rs==0.60.3
  markdown-it-py==4.3.0
  MarkupSafe==3.0.4
  mdurl==0.1.2
  packaging==26.4
  pluggy==1.7.0
  Pygments==2.21.0
  pyrate-limiter==4.5.1
  pytest==9.2.0
  PyYAML==6.0.4
  requests==2.34.2
  rich==15.0.0
  sortedcontainers==2.4.0
  typing_extensions==4.16.0
  urllib3==2.8.0
  Werkzeug==3.1.9
)

noema_schemathesis_ensure() {
  noema_venv_ensure "${NOEMA_SCHEMATHESIS_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/noema/schemathesis-venv}" \
    "${NOEMA_SCHEMATHESIS_INSTALL_TIMEOUT:-600}" 'schemathesis' \
    "pip needs PyPI and prebuilt wheels for $(uname -sm)" \
    "${NOEMA_SCHEMATHESIS_REQUIREMENTS[@]}"
  NOEMA_SCHEMATHESIS=$NOEMA_VENV_PATH/bin/schemathesis
  export NOEMA_SCHEMATHESIS
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  set -euo pipefail
  NOEMA_ROOT=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." && pwd -P)
  # shellcheck source=scripts/lib/common.sh
  source "$NOEMA_ROOT/scripts/lib/common.sh"
  # shellcheck source=scripts/lib/venv.sh
  source "$NOEMA_ROOT/scripts/lib/venv.sh"
  noema_schemathesis_ensure
  printf '%s\n' "$NOEMA_SCHEMATHESIS"
fi
