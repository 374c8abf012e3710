#!/usr/bin/env bash
# Billing replicas behind nginx on one PostgreSQL, end to end, on 127.0.0.1 only:
#
#   deploy/replicas.sh BILLING_BINARY [REPLICAS]
#
# Installs PostgreSQL and nginx if missing (apt-get, as root), starts PostgreSQL in a temp dir
# (initdb as the `postgres` user when run as root; a random port), REPLICAS billing replicas
# (default 3) with --database-url and --replica rI, and nginx in front: least_conn for stateless
# 2026-07-28 requests and for `initialize`, and a 2025-11-25 session's requests routed on its
# Mcp-Session-Id to the replica named in it (the other replicas as backups, which answer 404 for
# a session they do not hold, so its client initializes again). Then 64 clients of both eras create
# invoices with idempotency keys while one replica is killed (SIGKILL) and restarted; then it
# checks that every acknowledged create is in the database exactly once, that nothing else
# was created, that the audit trail has exactly one record per created invoice, tenant
# isolation through the LB, /healthz and /readyz, and a graceful drain on SIGTERM. Everything
# it started is stopped on exit. Prints `REPLICAS OK` at the end; exits non-zero on a failure.
# With MATRIX=path/to/testkit/matrix.sh (official clients installed) it first runs every official
# client of both eras (TypeScript SDK 1.x and 2.x, Python SDK) through nginx, three of each at
# once, with examples/billing/tests/plans/guarded.json (on the fresh seed, before the load).
# With BENCH_LOADGEN=path/to/loadgen it also prints calls/s and p99 through nginx.
# REPLICA_ARGS adds arguments to every replica's command line (e.g. `--task-lease-ms 1500`).
# With HOLD=1 it only sets the cluster up and checks /healthz, prints one line per replica
# (`replica I PORT PID LOG`), `nginx PORT`, `database URL` and `CLUSTER READY`, then keeps
# everything running until its standard input closes, and stops it all: for tests that drive
# the replicas themselves (examples/billing/tests/replica_tasks.rs).
set -euo pipefail
BIN=$(realpath "$1"); N=${2:-3}; CLIENTS=${CLIENTS:-64}; CREATES=${CREATES:-8}
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d /tmp/billing-replicas.XXXXXX); chmod 755 "$WORK"
PIDS=()
log() { echo "replicas: $*" >&2; }
fail() { log "FAILED: $*"; exit 1; }

if [ "$(id -u)" = 0 ]; then AS_PG=(runuser -u postgres --); else AS_PG=(); fi
cleanup() {
  set +e
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  [ -f "$WORK/nginx.pid" ] && kill -QUIT "$(cat "$WORK/nginx.pid")" 2>/dev/null
  [ -n "${PGBIN:-}" ] && "${AS_PG[@]}" "$PGBIN/pg_ctl" -D "$WORK/pg" -m fast -w stop >/dev/null 2>&1
  for _ in $(seq 50); do
    alive=0; for pid in "${PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && break; sleep 0.1
  done
  for pid in "${PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

need=()
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || need+=(nginx)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v pg_config >/dev/null || need+=(postgresql)
if [ ${#need[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || { echo "SKIP: ${need[*]} missing and not root"; exit 77; }
  log "installing ${need[*]}"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}") >/dev/null \
    || { echo "SKIP: cannot install ${need[*]}"; exit 77; }
fi
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
PGBIN=$(pg_config --bindir 2>/dev/null || true)
[ -x "$PGBIN/initdb" ] || PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# PostgreSQL in the temp dir.
mkdir "$WORK/pg"; [ "$(id -u)" = 0 ] && chown postgres:postgres "$WORK/pg"
PGPORT=$(port)
"${AS_PG[@]}" "$PGBIN/initdb" -D "$WORK/pg" -A trust -U postgres -E UTF8 --no-sync >/dev/null
"${AS_PG[@]}" "$PGBIN/pg_ctl" -D "$WORK/pg" -l "$WORK/pg/log" -w \
  -o "-p $PGPORT -c listen_addresses=127.0.0.1 -k $WORK/pg -c max_connections=300" start >/dev/null
DB="postgres://postgres@127.0.0.1:$PGPORT/postgres"
psql() { command psql "$DB" -Atq -c "$1"; }
log "PostgreSQL on 127.0.0.1:$PGPORT"

printf 'tok-a=t_777\ntok-b=t_other\ntok-r=t_777:read\n' > "$WORK/tokens"; chmod 600 "$WORK/tokens"
read -ra EXTRA <<< "${REPLICA_ARGS:-}"
declare -A RPORT RPID
start_replica() {
  local i=$1
  "$BIN" --http "127.0.0.1:${RPORT[$i]}" --database-url "$DB" --token-file "$WORK/tokens" \
    --replica "r$i" --drain-seconds 1 --pool-size 8 "${EXTRA[@]}" >>"$WORK/replica$i.log" 2>&1 &
  RPID[$i]=$!; PIDS+=($!)
  for _ in $(seq 100); do
    curl -fsS "http://127.0.0.1:${RPORT[$i]}/readyz" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  cat "$WORK/replica$i.log" >&2; fail "replica $i did not become ready"
}
for i in $(seq 1 "$N"); do RPORT[$i]=$(port); done
for i in $(seq 1 "$N"); do start_replica "$i"; done
log "$N replicas ready: ${RPORT[*]}"

LBPORT=$(port)
{
  echo "pid $WORK/nginx.pid; error_log $WORK/nginx.err warn; worker_processes 1;"
  echo "events { worker_connections 1024; }"
  echo "http { access_log off; client_body_temp_path $WORK/nb; proxy_temp_path $WORK/np;"
  echo "  fastcgi_temp_path $WORK/nf; uwsgi_temp_path $WORK/nu; scgi_temp_path $WORK/ns;"
  # No session id: stateless requests and `initialize`, to the least busy replica. A session
  # id names its replica (`r2.…`): there, or to a backup if it is down, which answers 404.
  echo "  map \$http_mcp_session_id \$pool { '' stateless; default stateless;"
  for i in $(seq 1 "$N"); do echo "    ~^r$i\\. replica$i;"; done
  echo "  }"
  echo "  upstream stateless { least_conn;"
  for i in $(seq 1 "$N"); do echo "    server 127.0.0.1:${RPORT[$i]} max_fails=1 fail_timeout=2s;"; done
  echo "    keepalive 64; }"
  for i in $(seq 1 "$N"); do
    echo "  upstream replica$i { server 127.0.0.1:${RPORT[$i]} max_fails=1 fail_timeout=2s;"
    for j in $(seq 1 "$N"); do [ "$j" = "$i" ] || echo "    server 127.0.0.1:${RPORT[$j]} backup;"; done
    echo "    keepalive 16; }"
  done
  echo "  server { listen 127.0.0.1:$LBPORT;"
  echo "    location / { proxy_pass http://\$pool; proxy_http_version 1.1;"
  echo "      proxy_set_header Connection ''; proxy_set_header Host \$http_host;"
  echo "      proxy_buffering off; proxy_read_timeout 60s;"
  echo "      proxy_next_upstream error timeout http_502 http_503; } } }"
} > "$WORK/nginx.conf"
"$NGINX" -c "$WORK/nginx.conf" -e "$WORK/nginx.err" -p "$WORK"
for _ in $(seq 50); do [ -f "$WORK/nginx.pid" ] && break; sleep 0.1; done
LB="http://127.0.0.1:$LBPORT/mcp"
log "nginx on 127.0.0.1:$LBPORT"

# Health through the LB and on each replica.
curl -fsS "http://127.0.0.1:$LBPORT/healthz" | grep -q ok || fail "/healthz through nginx"

if [ -n "${HOLD:-}" ]; then
  for i in $(seq 1 "$N"); do echo "replica $i ${RPORT[$i]} ${RPID[$i]} $WORK/replica$i.log"; done
  echo "nginx $LBPORT"; echo "database $DB"; echo "CLUSTER READY"
  # Until the caller is done (or gone): its end closes our standard input.
  cat >/dev/null || true
  exit 0
fi

# Sessions pinned by their id: a 2025-11-25 client's requests after `initialize` reach the
# replica that holds its session, whichever replica `least_conn` gave the `initialize`.
for _ in 1 2 3 4 5 6; do
  SID=$(curl -sS -D - -o /dev/null "$LB" -H 'Authorization: Bearer tok-a' -H 'Content-Type: application/json' \
    -H 'Accept: application/json, text/event-stream' \
    -d '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"sh","version":"1"}}}' \
    | tr -d '\r' | sed -n 's/^[Mm]cp-[Ss]ession-[Ii]d: //p')
  [[ "$SID" =~ ^r[0-9]+\. ]] || fail "a session id without its replica's name: '$SID'"
  for _ in 1 2 3; do
    CODE=$(curl -sS -o /dev/null -w '%{http_code}' "$LB" -H 'Authorization: Bearer tok-a' \
      -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
      -H "Mcp-Session-Id: $SID" -H 'MCP-Protocol-Version: 2025-11-25' \
      -d '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}')
    [ "$CODE" = 200 ] || fail "session $SID answered $CODE through nginx"
  done
done
log "2025-11-25 sessions pinned to their replica through nginx"

if [ -n "${MATRIX:-}" ]; then
  PLAN="$HERE/../examples/billing/tests/plans/guarded.json"
  for k in 1 2 3; do
    "$MATRIX" --http "$LB" --plan "$PLAN" -- --header "Authorization: Bearer tok-a" \
      > "$WORK/matrix$k.out" 2> "$WORK/matrix$k.err" &
    MPIDS[$k]=$!
  done
  for k in 1 2 3; do
    wait "${MPIDS[$k]}" || { cat "$WORK/matrix$k.err" >&2; fail "official clients (run $k) through nginx"; }
  done
  log "official clients through nginx: $(cat "$WORK"/matrix*.out | grep -c '^matrix: 5 passed, 0 failed') of 3 runs of 5 clients passed"
fi

# Load, with a replica killed and restarted in the middle.
RUN="run$$"
python3 "$HERE/drive.py" "$LB" tok-a "$CLIENTS" "$CREATES" "$RUN" > "$WORK/drive.json" &
DRIVER=$!
sleep 1.5
VICTIM=$(( N >= 2 ? 2 : 1 ))
log "killing replica $VICTIM (pid ${RPID[$VICTIM]}) mid-load"
kill -KILL "${RPID[$VICTIM]}"
sleep 2
start_replica "$VICTIM"
log "replica $VICTIM restarted"
wait "$DRIVER" || fail "the driver failed"

python3 - "$WORK/drive.json" "$CLIENTS" "$CREATES" <<'PY' > "$WORK/acked.tsv"
import json, sys
d = json.load(open(sys.argv[1])); want = int(sys.argv[2]) * int(sys.argv[3])
assert d["failed"] == 0, d
assert len(d["acked"]) == want, (len(d["acked"]), want)
print(f"replicas: driver retries={d['retries']} session re-initializations={d['reinitialized']}", file=sys.stderr)
for key, invoice in sorted(d["acked"].items()): print(f"{key}\t{invoice}")
PY
ACKED=$(wc -l < "$WORK/acked.tsv")
STORED=$(psql "SELECT key || E'\t' || invoice_id FROM idempotency_keys WHERE tenant_id='t_777' AND key LIKE '$RUN-%' ORDER BY key" | sort)
[ "$STORED" = "$(sort "$WORK/acked.tsv")" ] || fail "acknowledged creates and stored keys differ"
CREATED=$(psql "SELECT count(*) FROM invoices WHERE tenant_id='t_777' AND number > 1000")
[ "$CREATED" = "$ACKED" ] || fail "$CREATED invoices for $ACKED acknowledged creates (one applied twice?)"
DISTINCT=$(psql "SELECT count(DISTINCT invoice_id) FROM idempotency_keys WHERE key LIKE '$RUN-%'")
[ "$DISTINCT" = "$ACKED" ] || fail "two keys share an invoice"
AUDITED=$(psql "SELECT count(*) FROM audit_events WHERE tenant='t_777' AND action='billing.create_invoice' AND outcome='ok'")
[ "$AUDITED" = "$ACKED" ] || fail "$AUDITED audit records for $ACKED created invoices"
log "$ACKED acknowledged creates: each stored once, $AUDITED audit records"

# Tenant isolation through the LB (whichever replica answers).
for _ in 1 2 3 4 5 6; do
  OUT=$(curl -sS "$LB" -H 'Authorization: Bearer tok-b' -H 'Content-Type: application/json' \
    -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2026-07-28' \
    -H 'Mcp-Method: tools/call' -H 'Mcp-Name: billing_get_invoice' \
    -d '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"billing_get_invoice","arguments":{"id":"INV-1001"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"sh","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}')
  echo "$OUT" | grep -q InvoiceNotFound || fail "t_other saw t_777's invoice: $OUT"
done
log "tenant isolation holds through nginx"

if [ -n "${BENCH_LOADGEN:-}" ]; then
  for proto in 2026-07-28 2025-11-25; do
    "$BENCH_LOADGEN" --http "$LB" --protocol "$proto" --clients "${BENCH_CLIENTS:-32}" \
      --duration "${BENCH_SECONDS:-8}" --header "Authorization: Bearer tok-a" --target "replicas=$N $proto" \
      || fail "loadgen $proto"
  done
fi

# Graceful drain: SIGTERM makes /readyz 503, then the replica exits 0.
kill -TERM "${RPID[1]}"
sleep 0.3
CODE=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${RPORT[1]}/readyz" || true)
[ "$CODE" = 503 ] || fail "/readyz while draining answered $CODE"
wait "${RPID[1]}" || fail "replica 1 did not exit cleanly on SIGTERM"
log "replica 1 drained and exited 0"
echo "REPLICAS OK"
