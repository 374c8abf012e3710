#!/usr/bin/env bash
# Server instructions per call, Fusion billing vs the raw rmcp peer, counted by callgrind.
#
#   bench/callgrind.sh [--modes "stdio http-2026-07-28 http-2025-11-25"] [--short S] [--long S]
#                      [--no-build] [--keep DIR]
#
# Instruction counts do not depend on what else the machine is doing, so these ratios are
# repeatable on a shared 2-core machine where calls/s move by 2x from one minute to the next.
# Each server runs under `valgrind --tool=callgrind` twice per mode, once for --short and once
# for --long seconds of the usual load mix (same seed); the marginal cost
#   (Ir_long - Ir_short) / (calls_long - calls_short)
# cancels start-up (seeding the store, building the registry) and shut-down, leaving what one
# call costs the server: transport, JSON-RPC, dispatch, handler, presenter, envelope.
# The same marginal count gives the thread hops a call costs, independent of timing: tokio
# tasks spawned per call (calls to `OwnedTasks::bind_inner`) and task wake-ups per call
# (`waker::wake_by_val` + `wake_by_ref`). Every spawned task and every wake-up is a place where
# a call can move to the other worker thread, i.e. a context switch under real load.
# With --keep DIR the long runs' callgrind files stay in DIR for callgrind_annotate.
# The table is also written to bench/results/callgrind.txt.
set -euo pipefail

modes="stdio http-2026-07-28 http-2025-11-25"
short=2
long=6
build=1
keep=""
while [ $# -gt 0 ]; do
  case "$1" in
    --modes) modes="$2"; shift 2 ;;
    --short) short="$2"; shift 2 ;;
    --long) long="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    --keep) keep="$2"; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "callgrind.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
command -v valgrind >/dev/null || { echo "callgrind.sh: valgrind is not installed" >&2; exit 1; }

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
if [ "$build" = 1 ]; then
  cargo build --release --quiet -p billing -p fusion-bench
fi
bin="${CARGO_TARGET_DIR:-$root/target}/release"
work="$(mktemp -d)"
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill -KILL "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
[ -n "$keep" ] && mkdir -p "$keep"

# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"

# measure TARGET MODE SECONDS: prints "<instructions> <calls> <tasks spawned> <task wakes>"
# for one run under callgrind.
measure() {
  local target="$1" mode="$2" seconds="$3" out="$work/$1-$2-$3.cg" line
  # Both on a new SQLite database (billing's `--in-memory` store is not SQLite).
  local data
  data="$(mktemp -d -p "$work")"
  local server=("$bin/billing" --data-dir "$data")
  local extra=(--allow-anonymous)
  if [ "$target" = raw ]; then
    server=("$bin/raw-billing" --data-dir "$data")
    extra=()
  fi
  # Names written out in full on every call line, for calls_to.
  local vg=(valgrind --tool=callgrind --compress-strings=no --callgrind-out-file="$out")
  local common=(--duration "$seconds" --warmup 0 --seed 7 --check-every 0)
  case "$mode" in
    stdio)
      line="$("$bin/loadgen" --stdio "${vg[*]} ${server[*]}" --concurrency 16 "${common[@]}")" ;;
    http-*)
      # valgrind starts slowly and writes its profile on the way out.
      start_http "$work/stderr" 60 "${vg[@]}" "${server[@]}" --http 127.0.0.1:0 "${extra[@]}"
      # A failed run must still stop its server: it holds the pipe that the caller reads.
      line="$("$bin/loadgen" --http "$server_url" --protocol "${mode#http-}" --clients 8 \
        "${common[@]}")" || { stop_http 5; return 1; }
      stop_http 120 ;;
  esac
  local calls ir
  calls="$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["calls"])' "$line")"
  ir="$(grep '^summary:' "$out" | cut -d' ' -f2)"
  if [ -n "$keep" ] && [ "$seconds" = "$long" ]; then cp "$out" "$keep/$target-$mode.callgrind"; fi
  local tasks wakes
  tasks="$(calls_to "$out" 'OwnedTasks<S>::bind_inner$')"
  wakes="$(calls_to "$out" '^tokio::runtime::task::waker::wake_by_(val|ref)$')"
  echo "$ir $calls $tasks $wakes"
}

table() {
  marginal_table fusion
  echo "(tasks: tokio tasks spawned per call; wakes: task wake-ups per call; both marginal, as Ir)"
}
mkdir -p "$root/bench/results"
table | tee "$root/bench/results/callgrind.txt"
