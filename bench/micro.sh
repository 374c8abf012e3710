#!/usr/bin/env bash
# Runs the criterion micro-benchmarks and prints each one's ratio to its baseline, measured in
# the same run:
#
#   bench/micro.sh [--quick]
#
# Ratios are of criterion's mean point estimates (target/criterion/<group>/<bench>/new).
set -euo pipefail
cd "$(dirname "$0")/.."
args=()
if [ "${1:-}" = "--quick" ]; then
  args=(--warm-up-time 1 --measurement-time 3)
fi
cargo bench -p fusion --bench micro -- "${args[@]}" >/dev/null
cargo bench -p fusion-bench --bench pipeline -- "${args[@]}" >/dev/null
mkdir -p bench/results
python3 - <<'PY' | tee bench/results/micro.txt
import json, os
root = "target/criterion"
def mean(group, bench):
    with open(os.path.join(root, group, bench, "new", "estimates.json")) as f:
        return json.load(f)["mean"]["point_estimate"]
rows = [
    ("egress: presenter view vs serde_json hand-written struct", "egress", "fusion_view", "serde_json_baseline", "<= 1.05"),
    ("arguments: fillable profile vs serde_json::from_value", "arguments", "fusion_profile", "serde_json_baseline", "-"),
    ("dispatch: 100 tools vs 10 tools", "dispatch", "tools_100", "tools_10", "<= 1.10"),
    ("dispatch: 1000 tools vs 10 tools", "dispatch", "tools_1000", "tools_10", "<= 1.10"),
    ("hooks unset: full pipeline vs core path only", "hooks", "pipeline_hooks_unset", "core_path_only", "~ 1.00"),
    ("hooks set: full pipeline vs core path only", "hooks", "pipeline_hooks_set", "core_path_only", "-"),
    ("get_invoice: pipeline vs hand-written function", "pipeline_get_invoice", "fusion", "handwritten", "-"),
    ("list_invoices (50): pipeline vs hand-written function", "pipeline_list_invoices_50", "fusion", "handwritten", "-"),
]
print(f"{'benchmark':58} {'candidate':>11} {'baseline':>11} {'ratio':>7}  target")
for label, group, candidate, baseline, target in rows:
    a, b = mean(group, candidate), mean(group, baseline)
    print(f"{label:58} {a/1000:9.2f}us {b/1000:9.2f}us {a/b:7.3f}  {target}")
print(f"{'build: registry of 1,000 tools':58} {mean('build', 'registry_1000_tools')/1e6:9.2f}ms")
PY
