#!/usr/bin/env bash
# Every benchmark, in one command (about 15 minutes on a 2-core machine after the build):
#
#   bench/all.sh [--quick]
#
# 1. bench/micro.sh      criterion micro-benchmarks, each against its baseline in the same run
# 2. bench/callgrind.sh  server instructions per call, Fusion vs the raw rmcp peer (repeatable)
# 3. bench/compare.sh    the load driver against Fusion and the raw peer, interleaved A B A B
#
# Results: bench/results/{micro.txt,callgrind.txt,latest.json,latest-runs.jsonl}.
# --quick shortens every stage (a smoke test, not figures to quote).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--quick" ]; then
  bench/micro.sh --quick
  bench/callgrind.sh --short 1 --long 2
  bench/compare.sh --no-build --rounds 1 --duration 2 --warmup 1
else
  bench/micro.sh
  bench/callgrind.sh
  bench/compare.sh --no-build --rounds 5
fi
