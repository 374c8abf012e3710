# Shared by compare.sh and callgrind.sh (sourced, not run): an HTTP server on 127.0.0.1:0.

# start_http LOG SECONDS CMD...: starts CMD with its stderr in LOG, waits up to SECONDS for its
# "listening on http://…" line, and sets server_pid and server_url.
start_http() {
  local log="$1" seconds="$2"
  shift 2
  # Emptied first: LOG may still hold the line of the previous server started with it, which
  # the loop below would otherwise read before CMD gets to truncate the file.
  : >"$log"
  "$@" 2>"$log" &
  server_pid=$!
  server_url=""
  local line
  for _ in $(seq 1 $((seconds * 20))); do
    # Complete lines only (`read` fails on a last line without its newline): the servers print
    # the line with several writes (an unbuffered stderr), so a half-written line can end in
    # the middle of the port or before the path; a client sent there gets a 404 (from `/`)
    # or another server.
    while IFS= read -r line; do
      case "$line" in
        *"listening on http://"*)
          server_url="${line#*listening on }"
          server_url="${server_url%% *}"
          return 0 ;;
      esac
    done <"$log"
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
