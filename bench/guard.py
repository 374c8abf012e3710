#!/usr/bin/env python3
"""What hello costs the host against plain rmcp, checked against its targets (issue 22).

    bench/guard.py [--bin DIR] [--rounds N] [--max-instructions R] [--max-idle-rss R]
                   [--max-cold-start R]

Expects release builds of `hello` and `plain-hello` in DIR (default target/release;
`bench/size.sh` builds them). Three checks, each a ratio hello ÷ plain:

- instructions per call over stdio, counted by callgrind (installed with apt-get when missing
  and run as root): each server under valgrind twice, with the same 20 notes added and then 100
  or 400 rounds of a get and a list; the marginal count (long - short) / (calls_long -
  calls_short) cancels start-up and the adds. Counts do not depend on the machine's load.
- idle RSS, the median of N interleaved starts (`bench/startup.py`): almost all of it is the
  binary's text, so it moves with the code, not with the load.
- cold start to the first call, the fastest of those starts (the closest to the cost itself on a
  loaded machine).

Prints a table and exits 1 if any ratio is past its bound. The bounds default to the targets
in BENCHMARKS.md.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SETUP_NOTES = 20
SHORT, LONG = 100, 400


def request(ident, tool, arguments):
    return {"jsonrpc": "2.0", "id": ident, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}}


def phases(rounds):
    """Two batches, each answered before the next is sent (a server runs a batch's calls
    concurrently): initialize and the adds, then `rounds` of a get and a list."""
    setup = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize",
         "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": {"name": "fusion-guard", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]
    setup += [request(n + 1, "notes_add", {"text": f"note {n} about word{n % 5}"})
              for n in range(SETUP_NOTES)]
    load = []
    for n in range(rounds):
        ident = SETUP_NOTES + 1 + 2 * n
        load.append(request(ident, "notes_get", {"id": f"N-{n % SETUP_NOTES + 1}"}))
        load.append(request(ident + 1, "notes_list", {"containing": f"word{n % 5}"}))
    return [setup, load]


def exchange(child, batch, binary):
    """Sends `batch` and reads an answer for each of its requests; returns the failed ones."""
    payload = "".join(json.dumps(message) + "\n" for message in batch).encode()
    # Written from a thread: the server answers while it reads, and a full pipe either way
    # would stall both.
    writer = threading.Thread(target=lambda: (child.stdin.write(payload), child.stdin.flush()))
    writer.start()
    expected = sum(1 for message in batch if "id" in message)
    failures = []
    while expected:
        line = child.stdout.readline()
        if not line:
            raise RuntimeError(f"{binary}: stdout closed with {expected} answers missing")
        message = json.loads(line)
        if "id" not in message:
            continue
        expected -= 1
        result = message.get("result") or {}
        if "error" in message or result.get("isError"):
            failures.append(line[:200])
    writer.join()
    return failures


def instructions(binary, rounds, work):
    """Callgrind's total instruction count for one run of `rounds` over stdio, and its calls."""
    out_file = os.path.join(work, f"{os.path.basename(binary)}-{rounds}.cg")
    child = subprocess.Popen(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_file}", binary],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        failures = []
        for batch in phases(rounds):
            failures += exchange(child, batch, binary)
        child.stdin.close()
        child.wait(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    if failures:
        raise RuntimeError(f"{binary}: {len(failures)} calls failed, first: {failures[0]!r}")
    with open(out_file) as profile:
        for line in profile:
            if line.startswith("summary:"):
                return int(line.split()[1]), SETUP_NOTES + 2 * rounds
    raise RuntimeError(f"{out_file}: no summary line")


def per_call(binary, work):
    short, short_calls = instructions(binary, SHORT, work)
    long, long_calls = instructions(binary, LONG, work)
    return (long - short) / (long_calls - short_calls)


def ensure_valgrind():
    if shutil.which("valgrind"):
        return
    if os.geteuid() == 0:
        print("== installing valgrind", file=sys.stderr)
        subprocess.run(["apt-get", "update", "-qq"], check=True)
        subprocess.run(["apt-get", "install", "-y", "-qq", "valgrind"], check=True,
                       stdout=subprocess.DEVNULL)
    if not shutil.which("valgrind"):
        sys.exit("guard.py: valgrind is missing and cannot be installed (not root)")


def main(argv):
    options = {"--bin": os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release"),
               "--rounds": "7", "--max-instructions": "1.15", "--max-idle-rss": "1.3",
               "--max-cold-start": "1.3"}
    while argv:
        if argv[0] in ("-h", "--help"):
            print(__doc__)
            return 0
        if argv[0] not in options or len(argv) < 2:
            sys.exit(f"guard.py: unknown option {argv[0]}\n{__doc__}")
        options[argv[0]] = argv[1]
        argv = argv[2:]
    hello = os.path.join(options["--bin"], "hello")
    plain = os.path.join(options["--bin"], "plain-hello")
    for binary in (hello, plain):
        if not os.access(binary, os.X_OK):
            sys.exit(f"guard.py: {binary} is missing (cargo build --release -p hello, then -p plain-hello)")
    ensure_valgrind()
    with tempfile.TemporaryDirectory() as work:
        counts = {"hello": per_call(hello, work), "plain": per_call(plain, work)}
    started = subprocess.run(
        [sys.executable, os.path.join(ROOT, "bench", "startup.py"), "--rounds", options["--rounds"],
         "hello", "notes_list", "{}", hello, "plain", "notes_list", "{}", plain],
        check=True, capture_output=True, text=True)
    start = json.loads(started.stdout)
    rows = [
        ("instructions per call, stdio", counts["hello"], counts["plain"],
         float(options["--max-instructions"])),
        ("idle RSS KiB (median)", start["hello"]["idle_rss_kib"], start["plain"]["idle_rss_kib"],
         float(options["--max-idle-rss"])),
        ("cold start ms (fastest)", start["hello"]["cold_start_ms_min"],
         start["plain"]["cold_start_ms_min"], float(options["--max-cold-start"])),
    ]
    failed = False
    print(f"{'hello ÷ plain rmcp':32} {'hello':>12} {'plain':>12} {'ratio':>7} {'bound':>7}")
    for what, ours, theirs, bound in rows:
        ratio = ours / theirs
        verdict = "ok" if ratio <= bound else "PAST ITS BOUND"
        failed |= ratio > bound
        print(f"{what:32} {ours:12.1f} {theirs:12.1f} {ratio:7.3f} {bound:7.2f}  {verdict}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
