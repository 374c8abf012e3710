#!/usr/bin/env bash
# Fusion billing vs the raw rmcp peer, interleaved A B A B, over stdio, HTTP stateless
# (2026-07-28, JSON responses) and HTTP sessions (2025-11-25).
#
#   bench/compare.sh [--rounds N] [--duration S] [--warmup S] [--clients N] [--concurrency N]
#                    [--mix GET,LIST,VOID] [--modes "stdio http-2026-07-28 http-2025-11-25"]
#                    [--auth] [--no-build]
#
# Builds the release binaries once, then for every round and mode runs the load driver against
# a fresh Fusion server and then a fresh raw server (each on a new SQLite database in a fresh
# directory, like for like: billing's `--in-memory` store is not SQLite), prints every
# run's JSON line, and writes the runs to bench/results/latest-runs.jsonl and the per-mode
# medians and Fusion/raw ratios (calls/s, p50, p99, server CPU and context switches per call) to
# bench/results/latest.json. Defaults: 3 rounds × 3 modes × 2 servers × (2 s warm-up + 10 s)
# ≈ 4 minutes after the build. Over HTTP the Fusion server runs with --allow-anonymous (when it
# has that flag); with --auth it verifies a bearer token instead (`--token bench-token=t_777`,
# and every request carries `Authorization: Bearer bench-token`; the raw peer ignores it), so
# the ratios include the cost of authentication.
set -euo pipefail

rounds=3
duration=10
warmup=2
clients=8
concurrency=16
mix="80,15,5"
modes="stdio http-2026-07-28 http-2025-11-25"
build=1
auth=0

usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --duration) duration="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --clients) clients="$2"; shift 2 ;;
    --concurrency) concurrency="$2"; shift 2 ;;
    --mix) mix="$2"; shift 2 ;;
    --modes) modes="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    --auth) auth=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "compare.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
  esac
done

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
if [ "$build" = 1 ]; then
  echo "== building release binaries (billing, raw-billing, loadgen, summarize)" >&2
  cargo build --release --quiet -p billing -p fusion-bench
fi
target_dir="${CARGO_TARGET_DIR:-$root/target}"
bin="$target_dir/release"
for b in billing raw-billing loadgen summarize; do
  [ -x "$bin/$b" ] || { echo "compare.sh: $bin/$b is missing (build first)" >&2; exit 1; }
done

# Benchmarks run without credentials; newer billing binaries must be told so over HTTP.
fusion_http_extra=()
auth_header=()
if [ "$auth" = 1 ]; then
  fusion_http_extra=(--token "bench-token=t_777")
  auth_header=(--header "Authorization: Bearer bench-token")
elif "$bin/billing" --help 2>/dev/null | grep -q -- '--allow-anonymous'; then
  fusion_http_extra=(--allow-anonymous)
fi

results="$root/bench/results"
mkdir -p "$results"
runs="$results/latest-runs.jsonl"
: >"$runs"
logs="$(mktemp -d)"
server_pid=""
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$logs"
}
trap cleanup EXIT

# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"

common=(--duration "$duration" --warmup "$warmup" --mix "$mix")

# run_one TARGET MODE: one loadgen run; appends its JSON line to $runs and prints it.
run_one() {
  local target="$1" mode="$2" line
  local data
  data="$(mktemp -d -p "$logs")"
  local server=("$bin/billing" --data-dir "$data")
  local http_extra=("${fusion_http_extra[@]}")
  if [ "$target" = raw ]; then
    server=("$bin/raw-billing" --data-dir "$data")
    http_extra=()
  fi
  case "$mode" in
    stdio)
      line="$("$bin/loadgen" --target "$target" --stdio "${server[*]}" \
        --concurrency "$concurrency" "${common[@]}" 2>"$logs/loadgen.stderr")" ;;
    http-2026-07-28|http-2025-11-25)
      start_http "$logs/$target.stderr" 10 "${server[@]}" --http 127.0.0.1:0 "${http_extra[@]}"
      line="$("$bin/loadgen" --target "$target" --http "$server_url" --server-pid "$server_pid" \
        --protocol "${mode#http-}" --clients "$clients" "${auth_header[@]}" "${common[@]}" \
        2>"$logs/loadgen.stderr")" \
        || { stop_http 5; cat "$logs/loadgen.stderr" >&2; return 1; }
      stop_http 5 ;;
    *) echo "compare.sh: unknown mode $mode" >&2; return 2 ;;
  esac
  if [ -s "$logs/loadgen.stderr" ]; then sed 's/^/  /' "$logs/loadgen.stderr" >&2; fi
  echo "$line" >>"$runs"
  echo "$line"
}

started="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
load_before="$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?')"
echo "== $rounds rounds × [$modes] × fusion, raw; ${warmup}s warm-up + ${duration}s each; mix $mix; $clients HTTP clients; stdio concurrency $concurrency; HTTP auth $([ "$auth" = 1 ] && echo bearer || echo anonymous); load average $load_before" >&2
for round in $(seq 1 "$rounds"); do
  for mode in $modes; do
    for target in fusion raw; do
      echo "-- round $round/$rounds $mode $target" >&2
      run_one "$target" "$mode"
    done
  done
done
load_after="$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?')"

"$bin/summarize" "$runs" "$results/latest.json" --candidate fusion --baseline raw \
  --note "started $started on $(nproc) CPUs; load average before $load_before, after $load_after; $rounds rounds, ${warmup}s+${duration}s per run, mix $mix, $clients HTTP clients, stdio concurrency $concurrency, HTTP auth $([ "$auth" = 1 ] && echo bearer || echo anonymous)"
