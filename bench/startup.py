#!/usr/bin/env python3
"""Cold start to the first call, and resident memory at rest, of stdio MCP servers.

    bench/startup.py [--rounds N] [--idle S] NAME TOOL ARGS_JSON COMMAND [NAME TOOL ARGS_JSON COMMAND ...]

For every round, each server in turn (interleaved, so that the machine's drift cancels) is
started as a child process with pipes, sent `initialize`, `notifications/initialized` and one
`tools/call` of TOOL with ARGS_JSON all at once, as an agent's client does, and timed from the
spawn to the line that answers the call: the process start, the runtime, the server's build
(registry, schemas, checks) and the first call. The server then idles for --idle seconds with
its client still connected; its `VmRSS` is read then (the memory it holds at rest), and its
`VmHWM` (the most it held). Its stdin is closed and it must exit.

Prints one JSON object: per server, the median and the fastest cold start in milliseconds (on a
loaded machine the fastest is the closest to the start's own cost), the median idle and
peak RSS in KiB, and the rounds' raw values.
"""

import json
import os
import statistics
import subprocess
import sys
import time


def status_kb(pid, key):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return None


def one(tool, arguments, command, idle):
    messages = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize",
         "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": {"name": "fusion-startup", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
         "params": {"name": tool, "arguments": arguments}},
    ]
    payload = "".join(json.dumps(message) + "\n" for message in messages).encode()
    started = time.perf_counter()
    child = subprocess.Popen(["sh", "-c", "exec " + command], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        child.stdin.write(payload)
        child.stdin.flush()
        while True:
            line = child.stdout.readline()
            if not line:
                raise RuntimeError(f"{command}: stdout closed before the call was answered")
            message = json.loads(line)
            if message.get("id") == 1:
                break
        first_call_ms = (time.perf_counter() - started) * 1000
        if "result" not in message or message["result"].get("isError"):
            raise RuntimeError(f"{command}: the first call failed: {line[:300]!r}")
        time.sleep(idle)
        idle_kb = status_kb(child.pid, "VmRSS")
        peak_kb = status_kb(child.pid, "VmHWM")
        child.stdin.close()
        child.wait(timeout=10)
        return first_call_ms, idle_kb, peak_kb
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def main(argv):
    rounds, idle = 15, 0.5
    while argv and argv[0].startswith("--"):
        if argv[0] == "--rounds":
            rounds = int(argv[1])
        elif argv[0] == "--idle":
            idle = float(argv[1])
        else:
            sys.exit(f"startup.py: unknown option {argv[0]}")
        argv = argv[2:]
    if not argv or len(argv) % 4:
        sys.exit(__doc__)
    servers = [argv[index:index + 4] for index in range(0, len(argv), 4)]
    samples = {name: [] for name, *_ in servers}
    for _ in range(rounds):
        for name, tool, arguments, command in servers:
            samples[name].append(one(tool, json.loads(arguments), command, idle))
    out = {}
    for name, runs in samples.items():
        out[name] = {
            "cold_start_ms": round(statistics.median(run[0] for run in runs), 2),
            # On a loaded machine the fastest start is the closest to the cost itself.
            "cold_start_ms_min": round(min(run[0] for run in runs), 2),
            "idle_rss_kib": statistics.median(run[1] for run in runs),
            "peak_rss_kib": statistics.median(run[2] for run in runs),
            "cold_start_ms_all": [round(run[0], 2) for run in runs],
        }
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
