#!/usr/bin/env bash
# What a user compares: Fusion against the plain rmcp server they would otherwise write.
#
#   bench/vs-rmcp.sh [--rounds N] [--duration S] [--warmup S] [--startup-rounds N]
#                    [--modes "stdio http-2026-07-28 http-2025-11-25"]
#                    [--no-build] [--no-callgrind] [--no-load]
#
# Five servers, each a release build of its own (built one package at a time, so that no
# feature another package enables leaks into a binary measured):
#   hello   examples/hello: the smallest honest Fusion connector, notes in memory
#   plain   bench/plain-hello: the same notes and tools written with plain rmcp 3.11 as its
#           docs teach (#[tool_router], #[tool], Parameters, Json), stdio_pipes() on stdio
#   billing examples/billing --in-memory: the flagship example (invoices in its memory store)
#   sqlite  examples/billing --data-dir (a fresh directory): the flagship on its SQLite store
#   raw     bench raw-billing --data-dir (another fresh directory): billing written by hand on
#           rmcp's ServerHandler, doing the same SQLite work as billing and sending the same
#           answers, byte for byte (the like-for-like baseline)
# and four comparisons: hello ÷ plain and billing ÷ plain (what a user compares), sqlite ÷ raw
# (the SDK's own cost in billing, like for like) and hello's absolute figures.
#
# 1. Sizes: each binary stripped (`strip -o`), in bytes.
# 2. At start and at rest (bench/startup.py, --startup-rounds rounds, interleaved): cold start
#    from the spawn to the answer of the first tools/call over stdio, RSS after 0.5 s at rest
#    with the client connected (idle), and VmHWM (peak).
# 3. Instructions per call (callgrind, unless --no-callgrind; installed with apt-get when
#    missing and run as root): each server under valgrind twice, 2 s and 6 s of the same load
#    and seed; the marginal count (Ir_long - Ir_short) / (calls_long - calls_short) cancels
#    start-up. Counts do not depend on the machine's load.
# 4. Under load (unless --no-load): for every round and mode, loadgen against hello, plain,
#    billing, sqlite and raw back to back (A B C D E A B C D E…); medians over rounds of each pair's ratio
#    for calls/s, p50, p99, server CPU and context switches per call, and peak RSS.
#    Notes servers get `--workload notes --mix 80,20,0` (gets of random notes among 100 added
#    first, lists of the 10 notes that contain a word); billing servers the usual 80,15,5 mix of
#    invoice gets, 20-invoice lists and voids. billing ÷ plain thus compares the same shape of
#    calls on different data: what the flagship costs against what a plain server costs.
#
# Writes bench/results/vs-rmcp.txt (every table) and vs-rmcp-runs.jsonl (every load run).
# Defaults: 3 rounds × 3 modes × 5 servers × (1 s + 5 s): about 11 minutes with callgrind.
set -euo pipefail

rounds=3
duration=5
warmup=1
startup_rounds=15
modes="stdio http-2026-07-28 http-2025-11-25"
build=1
callgrind=1
load=1

usage() { sed -n '2,38p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --duration) duration="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --startup-rounds) startup_rounds="$2"; shift 2 ;;
    --modes) modes="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    --no-callgrind) callgrind=0; shift ;;
    --no-load) load=0; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "vs-rmcp.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
  esac
done

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
if [ "$build" = 1 ]; then
  # hello and plain-hello each alone: features are unified within one build, and billing turns
  # on features of fusion (oauth, audit-sqlite) that hello must not be measured with. billing
  # with the bench crate, as compare.sh builds it.
  for packages in "-p hello" "-p plain-hello" "-p billing -p fusion-bench"; do
    echo "== building $packages (release)" >&2
    # shellcheck disable=SC2086
    cargo build --release --quiet $packages
  done
fi
bin="${CARGO_TARGET_DIR:-$root/target}/release"
for b in hello plain-hello billing raw-billing loadgen summarize; do
  [ -x "$bin/$b" ] || { echo "vs-rmcp.sh: $bin/$b is missing (build first)" >&2; exit 1; }
done
if [ "$callgrind" = 1 ] && ! command -v valgrind >/dev/null; then
  echo "== installing valgrind" >&2
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && apt-get install -y -qq valgrind >/dev/null
  fi
  command -v valgrind >/dev/null || { echo "vs-rmcp.sh: no valgrind; run with --no-callgrind" >&2; exit 1; }
fi

results="$root/bench/results"
mkdir -p "$results"
report="$results/vs-rmcp.txt"
runs="$results/vs-rmcp-runs.jsonl"
work="$(mktemp -d)"
server_pid=""
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill -KILL "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"

targets="hello plain billing sqlite raw"
# server TARGET: the stdio command line of TARGET.
server() {
  case "$1" in
    hello) echo "$bin/hello" ;;
    plain) echo "$bin/plain-hello" ;;
    billing) echo "$bin/billing --in-memory" ;;
    sqlite) echo "$bin/billing --data-dir $work/sqlite-data" ;;
    raw) echo "$bin/raw-billing --data-dir $work/raw-data" ;;
  esac
}
# http_extra TARGET: what TARGET needs over HTTP besides --http ADDR.
http_extra() {
  if { [ "$1" = billing ] || [ "$1" = sqlite ]; } && "$bin/billing" --help 2>/dev/null | grep -q -- '--allow-anonymous'; then
    echo --allow-anonymous
  fi
}
# workload TARGET: loadgen's options for the data TARGET serves.
workload() {
  case "$1" in
    hello|plain) echo "--workload notes --mix 80,20,0" ;;
    *) echo "--workload billing --mix 80,15,5" ;;
  esac
}
ratio() { python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); print(f'{a / b:.2f}' if b else '-')" "$1" "$2"; }

started="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
{
  echo "bench/vs-rmcp.sh, started $started on $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$root" diff --quiet 2>/dev/null || echo ' (with local changes)')"
  echo
  echo "== stripped binary size (bytes)"
  printf '%-8s %12s %10s %10s\n' server bytes "÷ plain" "÷ raw"
  declare -A size=()
  for target in hello plain billing raw; do
    command="$(server "$target")"
    strip -o "$work/stripped" "${command%% *}"
    size[$target]="$(stat -c %s "$work/stripped")"
  done
  for target in hello plain billing raw; do
    printf '%-8s %12s %10s %10s\n' "$target" "${size[$target]}" \
      "$(ratio "${size[$target]}" "${size[plain]}")" "$(ratio "${size[$target]}" "${size[raw]}")"
  done
  echo
} | tee "$report"

echo "== at start and at rest ($startup_rounds rounds, interleaved)" >&2
"$root/bench/startup.py" --rounds "$startup_rounds" \
  hello notes_list '{}' "$(server hello)" \
  plain notes_list '{}' "$(server plain)" \
  billing billing_list_invoices '{"limit": 20}' "$(server billing)" \
  sqlite billing_list_invoices '{"limit": 20}' "$(server sqlite)" \
  raw billing_list_invoices '{"limit": 20}' "$(server raw)" >"$work/startup.json"
python3 - "$work/startup.json" <<'EOF' | tee -a "$report"
import json, sys
s = json.load(open(sys.argv[1]))
print("== at start and at rest, over stdio (medians)")
print(f"{'server':<8} {'cold start ms':>14} {'÷ plain':>8} {'fastest ms':>11} {'÷ plain':>8} {'idle RSS KiB':>13} {'÷ plain':>8} {'peak RSS KiB':>13} {'÷ plain':>8}")
for name, m in s.items():
    p = s["plain"]
    print(f"{name:<8} {m['cold_start_ms']:>14.2f} {m['cold_start_ms'] / p['cold_start_ms']:>8.2f} "
          f"{m['cold_start_ms_min']:>11.2f} {m['cold_start_ms_min'] / p['cold_start_ms_min']:>8.2f} "
          f"{m['idle_rss_kib']:>13.0f} {m['idle_rss_kib'] / p['idle_rss_kib']:>8.2f} "
          f"{m['peak_rss_kib']:>13.0f} {m['peak_rss_kib'] / p['peak_rss_kib']:>8.2f}")
print("(sqlite ÷ raw, like for like: cold start "
      f"{s['sqlite']['cold_start_ms'] / s['raw']['cold_start_ms']:.2f}, idle RSS "
      f"{s['sqlite']['idle_rss_kib'] / s['raw']['idle_rss_kib']:.2f})")
print()
EOF

# measure TARGET MODE SECONDS: "<instructions> <calls>" of one run under callgrind.
measure() {
  local target="$1" mode="$2" seconds="$3" out="$work/$1-$2-$3.cg" line
  local vg=(valgrind --tool=callgrind --callgrind-out-file="$out")
  local common=(--duration "$seconds" --warmup 0 --seed 7 --check-every 0)
  local -a command extra load_options
  read -r -a command <<<"$(server "$target")"
  read -r -a extra <<<"$(http_extra "$target")"
  read -r -a load_options <<<"$(workload "$target")"
  case "$mode" in
    stdio)
      line="$("$bin/loadgen" --stdio "${vg[*]} ${command[*]}" --concurrency 16 \
        "${load_options[@]}" "${common[@]}")" ;;
    http-*)
      start_http "$work/stderr" 60 "${vg[@]}" "${command[@]}" --http 127.0.0.1:0 "${extra[@]}"
      line="$("$bin/loadgen" --http "$server_url" --protocol "${mode#http-}" --clients 8 \
        "${load_options[@]}" "${common[@]}")" || { stop_http 5; return 1; }
      stop_http 120 ;;
  esac
  echo "$(grep '^summary:' "$out" | cut -d' ' -f2) $(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["calls"])' "$line")"
}

if [ "$callgrind" = 1 ]; then
  echo "== instructions per call (callgrind, marginal over 2 s and 6 s)" >&2
  {
    echo "== server instructions per call (callgrind, marginal over 2 s and 6 s of load)"
    printf '%-18s %11s %11s %11s %11s %11s   %13s %15s %13s\n' mode hello plain billing sqlite \
      raw "hello÷plain" "billing÷plain" "sqlite÷raw"
  } | tee -a "$report"
  for mode in $modes; do
    declare -A per_call=()
    for target in $targets; do
      read -r ir_s calls_s < <(measure "$target" "$mode" 2)
      read -r ir_l calls_l < <(measure "$target" "$mode" 6)
      per_call[$target]="$(python3 -c "print(round(($ir_l - $ir_s) / max(1, $calls_l - $calls_s)))")"
    done
    printf '%-18s %11s %11s %11s %11s %11s   %13s %15s %13s\n' "$mode" "${per_call[hello]}" \
      "${per_call[plain]}" "${per_call[billing]}" "${per_call[sqlite]}" "${per_call[raw]}" \
      "$(ratio "${per_call[hello]}" "${per_call[plain]}")" \
      "$(ratio "${per_call[billing]}" "${per_call[plain]}")" \
      "$(ratio "${per_call[sqlite]}" "${per_call[raw]}")" | tee -a "$report"
  done
  echo | tee -a "$report"
fi

# run_one TARGET MODE: one loadgen run under load; appends its JSON line to $runs.
run_one() {
  local target="$1" mode="$2" line
  local -a command extra load_options
  read -r -a command <<<"$(server "$target")"
  read -r -a extra <<<"$(http_extra "$target")"
  read -r -a load_options <<<"$(workload "$target")"
  local common=(--target "$target" --duration "$duration" --warmup "$warmup" "${load_options[@]}")
  case "$mode" in
    stdio)
      line="$("$bin/loadgen" --stdio "${command[*]}" --concurrency 16 "${common[@]}" \
        2>"$work/loadgen.stderr")" ;;
    http-*)
      start_http "$work/$target.stderr" 10 "${command[@]}" --http 127.0.0.1:0 "${extra[@]}"
      line="$("$bin/loadgen" --http "$server_url" --server-pid "$server_pid" \
        --protocol "${mode#http-}" --clients 8 "${common[@]}" 2>"$work/loadgen.stderr")" \
        || { stop_http 5; cat "$work/loadgen.stderr" >&2; return 1; }
      stop_http 5 ;;
  esac
  if [ -s "$work/loadgen.stderr" ]; then sed 's/^/  /' "$work/loadgen.stderr" >&2; fi
  echo "$line" >>"$runs"
}

if [ "$load" = 1 ]; then
  : >"$runs"
  echo "== under load: $rounds rounds × [$modes] × [$targets], ${warmup}s + ${duration}s each" >&2
  for round in $(seq 1 "$rounds"); do
    for mode in $modes; do
      for target in $targets; do
        echo "-- round $round/$rounds $mode $target" >&2
        run_one "$target" "$mode"
      done
    done
  done
  note="load average at the end $(cut -d' ' -f1-3 /proc/loadavg); $rounds rounds, ${warmup}s+${duration}s per run"
  for pair in "hello plain" "billing plain" "sqlite raw"; do
    read -r candidate baseline <<<"$pair"
    {
      echo "== under load, $candidate ÷ $baseline (medians over rounds of paired ratios)"
      "$bin/summarize" "$runs" "$work/summary.json" --candidate "$candidate" \
        --baseline "$baseline" --note "$note"
      python3 - "$work/summary.json" "$candidate" "$baseline" <<'EOF'
import json, sys
summary, c, b = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
for mode, entry in summary["modes"].items():
    ratios = entry[f"ratio_{c}_over_{b}"]
    print(f"  {mode}: peak RSS under load {entry[c].get('server_peak_rss_kb')} / {entry[b].get('server_peak_rss_kb')} KiB = {ratios.get('server_peak_rss_kb')}")
EOF
      echo
    } | tee -a "$report"
  done
fi
echo "(machine: $(nproc) CPUs; load average at the end $(cut -d' ' -f1-3 /proc/loadavg))" | tee -a "$report"
