#!/usr/bin/env bash
# What an agent pays, in o200k tokens, for billing's short session (tools/list, one
# get_invoice, a list_invoices of 20, a missing id), Fusion's billing connector beside a plain
# rmcp server with the same data (`plain-billing`), measured in one run over stdio by
# `cargo fusion tokens`. Writes TOKENS.md at the repository's root:
#
#   bench/tokens.sh            # debug builds: token counts do not depend on the profile
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --quiet -p fusion-cli -p billing -p fusion-bench \
  --bin cargo-fusion --bin billing --bin plain-billing
bin=target/debug
session=(
  --call '`get_invoice`=billing_get_invoice {"id":"INV-1"}'
  --call '`list_invoices`, 20 items=billing_list_invoices {"limit":20}'
  --call 'missing id (error)=billing_get_invoice {"id":"INV-404404"}'
)
table=$("$bin/cargo-fusion" tokens \
  --server "Fusion billing=$bin/billing --in-memory" \
  --server "plain rmcp server=$bin/plain-billing" \
  "${session[@]}")
# TOKENS.md keeps what is written above its marker line (the history of the numbers); the
# measured tables below it are replaced.
marker='<!-- measured by bench/tokens.sh: everything below this line is replaced -->'
if [ -f TOKENS.md ] && grep -qxF "$marker" TOKENS.md; then
  head=$(awk -v marker="$marker" '{ print } $0 == marker { exit }' TOKENS.md)
else
  head="# Tokens: what an agent pays for a connector

$marker"
fi
printf '%s\n\n%s\n' "$head" "$table" >TOKENS.md
echo "$table"
