# shellcheck shell=bash
# scripts/bench-continuity --cognirelay: the continuity issue's side by side. CogniRelay
# (the PyPI server, pinned) and `noema up` run on this host one after the other, and the
# same load client (`noema bench continuity --target`, CogniRelay's REST paths) drives
# each in turn, runs interleaved. Each run starts its server on empty storage (the
# original's upserts slow down as its git repository grows, so no run inherits another's),
# writes --listed capsules (not measured), then measures distinct-subject upserts and reads
# with trust signals. CPU per operation
# comes from /proc for both servers. Source it from scripts/bench-continuity after
# scripts/lib/common.sh and scripts/lib/venv.sh; it uses that script's bin, dir, http,
# grpc and duration.
#
# Environment: NOEMA_COGNIRELAY_SERVER_VENV (default
# ${XDG_CACHE_HOME:-$HOME/.cache}/noema/cognirelay-server-venv), NOEMA_BENCH_COGNIRELAY_ADDR
# (default 127.0.0.1:18777), NOEMA_BENCH_LISTED (capsules written before the reads,
# default 1000).

# CogniRelay 1.4.15 and what its server runs on, every package pinned (pip freeze of a
# clean install).
NOEMA_COGNIRELAY_SERVER_REQUIREMENTS=(
  annotated-doc==0.0.7 annotated-types==0.8.0 anyio==4.16.0 bleach==6.4.0 click==8.5.1
  cognirelay==1.4.15 fastapi==0.165.0 h11==0.16.0 idna==3.20 Markdown==3.11.3
  opentelemetry-api==1.45.2 pydantic==2.14.4 pydantic_core==2.50.5 python-dotenv==1.2.4
  starlette==1.10.0 typing-inspection==0.4.5 typing_extensions==4.16.0 uvicorn==0.54.0
  webencodings==0.6.1
)

# bench_cognirelay_start REPO ADDR LOG: starts CogniRelay on ADDR with its git repository
# at REPO; sets cognirelay_pid.
bench_cognirelay_start() {
  local repo=$1 addr=$2 log=$3
  # The repository exists before the first write: CogniRelay runs `git init` on the first
  # upsert, and concurrent first upserts race each other for it.
  mkdir -p "$repo"
  git init -q "$repo"
  # Rate limits raised far above the load: the bench measures the server, not its limiter.
  (
    cd "$repo" &&
      exec env COGNIRELAY_REPO_ROOT="$repo" COGNIRELAY_TOKENS=bench \
        COGNIRELAY_TOKEN_RATE_LIMIT_PER_MIN=100000000 COGNIRELAY_IP_RATE_LIMIT_PER_MIN=100000000 \
        GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@localhost \
        GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@localhost \
        "$NOEMA_VENV_PATH/bin/python" -m uvicorn app.main:app --log-level warning \
        --host "${addr%:*}" --port "${addr##*:}"
  ) >"$log" 2>&1 &
  cognirelay_pid=$!
  noema_wait_http "http://$addr/health" "$cognirelay_pid" "$log"
}

bench_cognirelay_main() {
  local runs=$1
  shift
  local addr=${NOEMA_BENCH_COGNIRELAY_ADDR:-127.0.0.1:18777}
  local listed=${NOEMA_BENCH_LISTED:-1000}
  local python run side target token pid
  python=$(noema_python_at_least 3.12)
  [[ -n $python ]] ||
    noema_die 'CogniRelay 1.4.15 needs Python >= 3.12 with venv (e.g. pyenv install 3.12)'
  NOEMA_VENV_PYTHON=$python noema_venv_ensure \
    "${NOEMA_COGNIRELAY_SERVER_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/noema/cognirelay-server-venv}" \
    600 'the CogniRelay server' 'it comes from PyPI' "${NOEMA_COGNIRELAY_SERVER_REQUIREMENTS[@]}"

  cognirelay_pid=''
  noema_pid=''
  trap 'kill $cognirelay_pid $noema_pid 2>/dev/null || true' EXIT
  for run in $(seq "$runs"); do
    for side in cognirelay noema; do
      echo "run $run of $runs: $side" >&2
      if [[ $side == cognirelay ]]; then
        bench_cognirelay_start "$dir/cognirelay-$run/repo" "$addr" "$dir/cognirelay-$run/log"
        target=$addr token=bench pid=$cognirelay_pid
      else
        mkdir -p "$dir/noema-$run"
        "$bin" up --data-dir "$dir/noema-$run/data" --grpc-addr "$grpc" --http-addr "$http" \
          >"$dir/noema-$run/log" 2>&1 &
        noema_pid=$!
        noema_wait_http "http://$http/healthz" "$noema_pid" "$dir/noema-$run/log"
        target=$http token=$(<"$dir/noema-$run/data/owner.token") pid=$noema_pid
      fi
      "$bin" bench continuity --target "http://$target" --token "$token" --server-pid "$pid" \
        --concurrency "$concurrency" --duration "$duration" --listed "$listed" \
        --phases upsert_distinct,read "$@" >"$dir/$side-$run.json"
      kill "$pid"
      wait "$pid" 2>/dev/null || true
      cognirelay_pid='' noema_pid=''
    done
  done

  python3 - "$dir" "$runs" <<'PY'
import json, statistics, sys
directory, runs = sys.argv[1], int(sys.argv[2])
sides = {}
for side in ("cognirelay", "noema"):
    reports = [json.load(open(f"{directory}/{side}-{n}.json")) for n in range(1, runs + 1)]
    ops = {}
    for report in reports:
        for r in report["results"]:
            ops.setdefault(r["op"], []).append(r)
    sides[side] = {
        op: {
            "errors": sum(r["errors"] for r in results),
            "throughput_per_sec": [r["throughput_per_sec"] for r in results],
            **{f"median_{k}": statistics.median(r[k] for r in results)
               for k in ("throughput_per_sec", "p50_ms", "p99_ms",
                         "server_cpu_us_per_op", "bench_cpu_us_per_op")
               if all(r.get(k) is not None for r in results)},
        }
        for op, results in ops.items()
    }
ratios = {
    op: round(sides["noema"][op]["median_throughput_per_sec"]
              / sides["cognirelay"][op]["median_throughput_per_sec"], 1)
    for op in sides["noema"]
    if sides["cognirelay"].get(op, {}).get("median_throughput_per_sec")
}
print(json.dumps({"runs": runs, "ratio_noema_to_cognirelay": ratios, **sides}, indent=2))
PY
}
