#!/usr/bin/env bash
# What tools/list costs an agent, in o200k tokens, for a gateway mounting 200 tools (four
# `many-tools` connectors of 50 tools each, over stdio), listed in full and in search mode
# (`gateway --tool-search`), and what a search and a call of a tool found cost in search mode.
# Measured by `cargo fusion tokens` over stdio. Rewrites the section of TOKENS.md between its
# markers (prints it otherwise):
#
#   bench/discovery.sh         # debug builds: token counts do not depend on the profile
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --quiet -p fusion-cli -p gateway -p fusion-bench \
  --bin cargo-fusion --bin gateway --bin many-tools
bin=$PWD/target/debug
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
config=$work/gateway.toml
for domain in crm ledger helpdesk inventory; do
  printf '[upstreams.%s]\nstdio = "%s/many-tools --domain %s"\n\n' "$domain" "$bin" "$domain"
done >"$config"
gateway="$bin/gateway --config $config"

# Only the summary table: the per-tool tables of 200 tools are left out.
summary() { awk '/each tool.s definition as listed/ { exit } { print }'; }

listing=$("$bin/cargo-fusion" tokens \
  --server "every tool listed=$gateway" \
  --server "search mode=$gateway --tool-search" | summary | grep -v '^| the .* all of them list')
answers=$("$bin/cargo-fusion" tokens \
  --server "search mode=$gateway --tool-search" \
  --call 'a search, 8 tools found (`find_tools`)=find_tools {"query":"update a contact"}' \
  --call 'a search in one namespace, 3 found=find_tools {"query":"invoice","namespace":"ledger","limit":3}' \
  --call 'the tool found, called by its name=crm_update_contact {"id":"C-7","name":"Ada"}' \
  --call 'the same through `call_tool`=call_tool {"name":"crm_update_contact","arguments":{"id":"C-7","name":"Ada"}}' |
  summary | grep -v '^| tools/list\|^| server instructions\|^Tokens counted' | sed '/./,$!d')

section="$listing

In search mode, what a search and a call cost:

$answers"
begin='<!-- measured by bench/discovery.sh: begin -->'
end='<!-- measured by bench/discovery.sh: end -->'
if grep -qxF "$begin" TOKENS.md && grep -qxF "$end" TOKENS.md; then
  {
    awk -v begin="$begin" '{ print } $0 == begin { exit }' TOKENS.md
    printf '\n%s\n\n' "$section"
    awk -v end="$end" 'found { print } $0 == end { found = 1; print }' TOKENS.md
  } >"$work/TOKENS.md"
  cp "$work/TOKENS.md" TOKENS.md
fi
echo "$section"
