# Shared by compare.sh and callgrind.sh (sourced, not run): an HTTP server on 127.0.0.1:0.

# start_http LOG SECONDS CMD...: starts CMD with its stderr in LOG, waits up to SECONDS for its
# "listening on http://…" line, and sets server_pid and server_url.
start_http() {
  local log="$1" seconds="$2"
  shift 2
  "$@" 2>"$log" &
  server_pid=$!
  server_url=""
  for _ in $(seq 1 $((seconds * 20))); do
    server_url="$(grep -o 'listening on http://[^ ]*' "$log" 2>/dev/null | head -n1 | sed 's/^listening on //')" || true
    [ -n "$server_url" ] && return 0
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.05
  done
  echo "$(basename "$0"): $1 did not start; its stderr:" >&2
  cat "$log" >&2
  return 1
}

# stop_http SECONDS: Ctrl-C (a graceful shutdown), then SIGKILL if it is still running after
# SECONDS.
stop_http() {
  kill -INT "$server_pid" 2>/dev/null || true
  for _ in $(seq 1 $(($1 * 20))); do
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.05
  done
  kill -KILL "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
}
