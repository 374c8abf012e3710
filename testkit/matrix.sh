#!/usr/bin/env bash
# Runs the same plan through every official client / protocol era combination:
#
#   testkit/matrix.sh (--stdio "<command line>" | --http <url>) --plan <plan.json> [--only NAME]...
#
#   ts-v1        @modelcontextprotocol/sdk (1.x)      initialize handshake 2025-11-25
#   ts-v2-2025   @modelcontextprotocol/client (2.x)   --protocol 2025-11-25
#   ts-v2-2026   @modelcontextprotocol/client (2.x)   --protocol 2026-07-28 (server/discover, pinned)
#   py-2025      mcp (Python 2.x)                     --protocol 2025-11-25
#   py-2026      mcp (Python 2.x)                     --protocol 2026-07-28 (server/discover)
#
# Each client's JSON report goes to stdout prefixed with its name ("ts-v1 {...}"),
# failures to stderr. Closing line: "matrix: N passed, M failed" (clients).
# Exit 0 only if every selected client passed. Extra args after "--" go to every client.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
deps="${FUSION_TEST_DEPS:-$here/../.test-deps}"
py="$deps/py/bin/python"

target=()
plan=""
only=()
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --stdio | --http) target=("$1" "${2:-}"); shift 2 ;;
    --plan) plan="${2:-}"; shift 2 ;;
    --only) only+=("${2:-}"); shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "matrix.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ ${#target[@]} -eq 2 ] && [ -n "$plan" ] || { sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ -x "$py" ] || { echo "matrix.sh: $py missing; run testkit/install.sh" >&2; exit 2; }

declare -A cmd=(
  [ts-v1]="node $here/ts/client.mjs --sdk v1"
  [ts-v2-2025]="node $here/ts/client.mjs --sdk v2 --protocol 2025-11-25"
  [ts-v2-2026]="node $here/ts/client.mjs --sdk v2 --protocol 2026-07-28"
  [py-2025]="$py $here/py/client.py --protocol 2025-11-25"
  [py-2026]="$py $here/py/client.py --protocol 2026-07-28"
)
names=(ts-v1 ts-v2-2025 ts-v2-2026 py-2025 py-2026)
[ ${#only[@]} -gt 0 ] && names=("${only[@]}")

pass=0
fail=0
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
for n in "${names[@]}"; do
  [ -n "${cmd[$n]:-}" ] || { echo "matrix.sh: unknown client $n" >&2; exit 2; }
  # stderr streams through sed in the same pipeline, so it is complete before the report
  # line and before exit (a `2> >(sed …)` process substitution could still be writing —
  # or be killed — after this script exited, losing the last client's "✗" lines).
  # shellcheck disable=SC2086
  ${cmd[$n]} "${target[@]}" --plan "$plan" "${extra[@]}" 2>&1 >"$out" | sed "s/^/[$n] /" >&2
  rc=${PIPESTATUS[0]}
  echo "$n $(cat "$out")"
  if [ "$rc" = 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
done
echo "matrix: $pass passed, $fail failed"
[ "$fail" = 0 ]
