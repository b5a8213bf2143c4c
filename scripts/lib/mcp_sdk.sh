# shellcheck shell=bash
# The official MCP Python SDK (PyPI `mcp`), pinned, for the MCP end-to-end test
# (tests/tests/mcp.rs drives tests/mcp/sdk_session.py with it).
#
# Sourced (after scripts/lib/common.sh and scripts/lib/venv.sh), `noema_mcp_sdk_ensure`
# builds the virtualenv on first use and exports NOEMA_MCP_PYTHON, its interpreter;
# scripts/test does so before the tests. Run as `bash scripts/lib/mcp_sdk.sh`, it does the
# same and prints the interpreter's path (what the test does when NOEMA_MCP_PYTHON is
# unset). Either way it fails loudly when the SDK cannot be installed.
# Environment: NOEMA_MCP_SDK_VENV overrides the virtualenv's path.

# Every package of the virtualenv, dependencies included, pinned.
NOEMA_MCP_SDK_REQUIREMENTS=(
  mcp==2.3.0
  mcp-types==2.3.0
  annotated-types==0.8.0
  anyio==4.16.0
  attrs==26.1.0
  cffi==2.1.1
  click==8.5.1
  cryptography==50.0.2
  h11==0.16.0
  httpcore2==2.16.2
  httpx2==2.16.2
  idna==3.20
  jsonschema==4.26.0
  jsonschema-specifications==2025.9.1
  opentelemetry-api==1.45.2
  pycparser==3.12
  pydantic==2.14.4
  pydantic_core==2.50.5
  PyJWT==2.15.1
  python-multipart==0.0.34
  referencing==0.37.0
  rpds-py==2026.9.1
  sse-starlette==3.7.0
  starlette==1.10.0
  truststore==0.10.5
  typing-inspection==0.4.5
  typing_extensions==4.16.0
  uvicorn==0.54.0
)

noema_mcp_sdk_ensure() {
  noema_venv_ensure "${NOEMA_MCP_SDK_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/noema/mcp-sdk-venv}" \
    "${NOEMA_MCP_SDK_INSTALL_TIMEOUT:-600}" 'the MCP Python SDK' \
    "pip needs PyPI and prebuilt wheels for $(uname -sm)" \
    "${NOEMA_MCP_SDK_REQUIREMENTS[@]}"
  NOEMA_MCP_PYTHON=$NOEMA_VENV_PATH/bin/python
  export NOEMA_MCP_PYTHON
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  set -euo pipefail
  NOEMA_ROOT=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." && pwd -P)
  # shellcheck source=scripts/lib/common.sh
  source "$NOEMA_ROOT/scripts/lib/common.sh"
  # shellcheck source=scripts/lib/venv.sh
  source "$NOEMA_ROOT/scripts/lib/venv.sh"
  noema_mcp_sdk_ensure
  printf '%s\n' "$NOEMA_MCP_PYTHON"
fi
