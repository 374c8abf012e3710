# Shared by compare.sh, callgrind.sh and gateway.sh (sourced, not run): an HTTP server on
# 127.0.0.1:0, and the marginal per-call counts of two callgrind runs.

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

# calls_to FILE PATTERN: how many calls a callgrind profile records to functions whose name
# matches PATTERN (an awk regex).
calls_to() {
  awk -v pattern="$2" '/^cfn=/ { callee = substr($0, 5) }
    /^calls=/ { if (callee ~ pattern) { split($0, field, /[= ]/); total += field[2] } }
    END { print total + 0 }' "$1"
}

# marginal_table SUBJECT: for each of $modes, SUBJECT (fusion, gateway) against raw, each
# measured for $short and $long seconds by the caller's `measure TARGET MODE SECONDS` (which
# prints "<Ir> <calls> <tasks spawned> <task wakes>"); prints the marginal instructions, tasks
# and wake-ups per call, (long - short) / (calls_long - calls_short), startup and shutdown
# cancelling out, and the ratio of instructions.
marginal_table() {
  local subject="$1" mode target
  printf '%-18s %16s %14s %7s   %13s %11s   %13s %11s\n' mode "$subject Ir/call" \
    "raw Ir/call" ratio "$subject tasks" "raw tasks" "$subject wakes" "raw wakes"
  for mode in $modes; do
    local -A per_call=() tasks=() wakes=()
    for target in "$subject" raw; do
      local ir_s calls_s tasks_s wakes_s ir_l calls_l tasks_l wakes_l
      read -r ir_s calls_s tasks_s wakes_s < <(measure "$target" "$mode" "$short")
      read -r ir_l calls_l tasks_l wakes_l < <(measure "$target" "$mode" "$long")
      per_call[$target]="$(python3 -c "print(round(($ir_l - $ir_s) / max(1, $calls_l - $calls_s)))")"
      tasks[$target]="$(python3 -c "print(f'{($tasks_l - $tasks_s) / max(1, $calls_l - $calls_s):.2f}')")"
      wakes[$target]="$(python3 -c "print(f'{($wakes_l - $wakes_s) / max(1, $calls_l - $calls_s):.2f}')")"
    done
    printf '%-18s %16s %14s %7s   %13s %11s   %13s %11s\n' "$mode" "${per_call[$subject]}" \
      "${per_call[raw]}" "$(python3 -c "print(f'{${per_call[$subject]} / ${per_call[raw]}:.3f}')")" \
      "${tasks[$subject]}" "${tasks[raw]}" "${wakes[$subject]}" "${wakes[raw]}"
  done
}
