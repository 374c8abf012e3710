#!/usr/bin/env bash
# The gateway's cost: a call proxied by the `gateway` binary to the raw rmcp billing peer
# against the same call made to the raw peer directly, same driver, same run.
#
#   bench/gateway.sh [--modes "stdio http-2026-07-28 http-2025-11-25"] [--short S] [--long S]
#                    [--rounds N] [--duration S] [--warmup S] [--no-build] [--keep DIR]
#                    [--cpu-only | --latency-only]
#
# CPU: the gateway process runs under `valgrind --tool=callgrind` (its upstream, raw-billing,
# does not), twice per mode, for --short and --long seconds of the usual load (same seed; 16
# requests in flight on stdio, 8 HTTP clients); the marginal count
#   (Ir_long - Ir_short) / (calls_long - calls_short)
# is what one proxied call costs the gateway itself: the client's transport and JSON-RPC, the
# access check, the span, metrics and audit record, the forward to the upstream and the answer
# back. It is set against the raw peer's own count per call, measured the same way (direct
# calls), that is against a whole server written on rmcp serving the call. The gateway runs as
# shipped, audit records to its log at info.
# Latency: --rounds pairs of runs, direct then proxied, one call in flight (1 HTTP client,
# stdio concurrency 1) so that the difference is the hop and not a queue: p50 and p99 of each,
# and the added p50/p99 (proxied - direct), medians over the rounds.
# In each mode the gateway speaks that protocol to the driver and to its upstream.
# Writes bench/results/gateway.txt. With --keep DIR the long runs' callgrind files stay in DIR.
set -euo pipefail

modes="stdio http-2026-07-28 http-2025-11-25"
short=2
long=6
rounds=5
duration=5
warmup=1
build=1
keep=""
cpu=1
latency=1
while [ $# -gt 0 ]; do
  case "$1" in
    --modes) modes="$2"; shift 2 ;;
    --short) short="$2"; shift 2 ;;
    --long) long="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --duration) duration="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    --keep) keep="$2"; shift 2 ;;
    --cpu-only) latency=0; shift ;;
    --latency-only) cpu=0; shift ;;
    -h|--help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "gateway.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
if [ "$cpu" = 1 ]; then
  command -v valgrind >/dev/null || { echo "gateway.sh: valgrind is not installed" >&2; exit 1; }
fi

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
if [ "$build" = 1 ]; then
  cargo build --release --quiet -p gateway -p fusion-bench
fi
bin="${CARGO_TARGET_DIR:-$root/target}/release"
for b in gateway raw-billing loadgen; do
  [ -x "$bin/$b" ] || { echo "gateway.sh: $bin/$b is missing (build first)" >&2; exit 1; }
done
work="$(mktemp -d)"
server_pid=""
upstream_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill -KILL "$server_pid" 2>/dev/null || true; fi
  if [ -n "$upstream_pid" ]; then kill -KILL "$upstream_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
[ -n "$keep" ] && mkdir -p "$keep"

# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"

field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }

# start_upstream MODE: raw-billing over HTTP for the gateway (HTTP modes); sets upstream_url.
start_upstream() {
  start_http "$work/upstream.stderr" 10 "$bin/raw-billing" --in-memory --http 127.0.0.1:0
  upstream_pid="$server_pid"
  upstream_url="$server_url"
  server_pid=""
}

stop_upstream() {
  server_pid="$upstream_pid"
  stop_http 5
  upstream_pid=""
}

# drive TARGET MODE WRAPPER LOAD...: one loadgen run against raw-billing (TARGET raw) or the
# gateway in front of it (TARGET gateway), the measured process started under WRAPPER (a
# command prefix, possibly empty); prints loadgen's JSON line.
drive() {
  local target="$1" mode="$2" wrapper="$3"
  shift 3
  local load=("$@") protocol="${mode#http-}" line
  local -a wrap=()
  [ -n "$wrapper" ] && read -r -a wrap <<<"$wrapper"
  case "$mode" in
    stdio)
      local command="$bin/raw-billing --in-memory" prefix=""
      if [ "$target" = gateway ]; then
        command="$bin/gateway --upstream \"acct=stdio:$bin/raw-billing --in-memory\""
        prefix="acct_"
      fi
      line="$("$bin/loadgen" --target "$target" --stdio "${wrap[*]} $command" \
        --tool-prefix "$prefix" "${load[@]}")" ;;
    http-*)
      local prefix="" server=("$bin/raw-billing" --in-memory --http 127.0.0.1:0)
      if [ "$target" = gateway ]; then
        start_upstream
        local era=stateless
        [ "$protocol" = 2025-11-25 ] && era=session
        server=("$bin/gateway" --http 127.0.0.1:0 --allow-anonymous
          --upstream "acct=http:$upstream_url" --upstream-protocol "acct=$era")
        prefix="acct_"
      fi
      # valgrind starts slowly and writes its profile on the way out.
      start_http "$work/server.stderr" 60 "${wrap[@]}" "${server[@]}"
      line="$("$bin/loadgen" --target "$target" --http "$server_url" --server-pid "$server_pid" \
        --protocol "$protocol" --tool-prefix "$prefix" "${load[@]}")" \
        || { stop_http 5; [ "$target" = gateway ] && stop_upstream; return 1; }
      stop_http 120
      [ "$target" = gateway ] && stop_upstream ;;
  esac
  if [ "$(field "$line" errors)" != 0 ] || [ "$(field "$line" bad_responses)" != 0 ]; then
    echo "gateway.sh: $target $mode had errors: $line" >&2
    return 1
  fi
  echo "$line"
}

# measure TARGET MODE SECONDS: "<Ir> <calls> <tasks spawned> <task wakes>" of the measured
# process (raw-billing, or the gateway) under callgrind.
measure() {
  local target="$1" mode="$2" seconds="$3" out="$work/$1-$2-$3.cg" line
  local vg="valgrind --tool=callgrind --compress-strings=no --callgrind-out-file=$out"
  line="$(drive "$target" "$mode" "$vg" --duration "$seconds" --warmup 0 --seed 7 \
    --check-every 0 --concurrency 16 --clients 8)"
  if [ -n "$keep" ] && [ "$seconds" = "$long" ]; then cp "$out" "$keep/$target-$mode.callgrind"; fi
  echo "$(grep '^summary:' "$out" | cut -d' ' -f2) $(field "$line" calls)" \
    "$(calls_to "$out" 'OwnedTasks<S>::bind_inner$')" \
    "$(calls_to "$out" '^tokio::runtime::task::waker::wake_by_(val|ref)$')"
}

cpu_table() {
  echo "CPU per call (callgrind, marginal over ${short}s and ${long}s of load; the gateway's own process)"
  marginal_table gateway
  echo "(ratio: the gateway's instructions per proxied call over the raw peer's per direct call;"
  echo " tasks: tokio tasks spawned per call; wakes: task wake-ups per call)"
}

latency_table() {
  echo
  echo "Latency, one call in flight ($rounds rounds of ${warmup}s + ${duration}s, direct then proxied; medians over rounds)"
  printf '%-18s %11s %11s %11s %11s %12s %12s\n' mode "direct p50" "proxied p50" "direct p99" \
    "proxied p99" "added p50" "added p99"
  for mode in $modes; do
    local runs="$work/latency-$mode.jsonl"
    : >"$runs"
    for _ in $(seq 1 "$rounds"); do
      for target in raw gateway; do
        drive "$target" "$mode" "" --duration "$duration" --warmup "$warmup" --concurrency 1 \
          --clients 1 >>"$runs"
      done
    done
    python3 - "$runs" "$mode" <<'EOF'
import json, statistics, sys
runs = [json.loads(line) for line in open(sys.argv[1])]
pairs = list(zip(runs[0::2], runs[1::2]))
med = lambda values: statistics.median(values)
direct50 = med([d["p50_us"] for d, _ in pairs]); proxied50 = med([p["p50_us"] for _, p in pairs])
direct99 = med([d["p99_us"] for d, _ in pairs]); proxied99 = med([p["p99_us"] for _, p in pairs])
added50 = med([p["p50_us"] - d["p50_us"] for d, p in pairs])
added99 = med([p["p99_us"] - d["p99_us"] for d, p in pairs])
us = lambda v: f"{v:.0f} µs"
print(f"{sys.argv[2]:<18} {us(direct50):>11} {us(proxied50):>11} {us(direct99):>11} {us(proxied99):>11} {us(added50):>12} {us(added99):>12}")
EOF
  done
}

mkdir -p "$root/bench/results"
{
  echo "bench/gateway.sh on $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?'), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  if [ "$cpu" = 1 ]; then cpu_table; fi
  if [ "$latency" = 1 ]; then latency_table; fi
} | tee "$root/bench/results/gateway.txt"
