#!/usr/bin/env python3
"""Drives billing replicas behind a load balancer with writes that must survive a replica dying.

Each of CLIENTS clients (half stateless 2026-07-28, half 2025-11-25 sessions) makes CREATES
invoices, one idempotency key each, retrying every failure (connection refused or reset, 5xx,
404 of a lost session, a retryable tool error) with the same key until it is acknowledged.
Prints one JSON line: {"acked": {key: invoice_id}, "retries": n, "reinitialized": n}.
"""
import json, os, re, sys, threading, time, urllib.error, urllib.request

URL, TOKEN, CLIENTS, CREATES, RUN = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
STATELESS = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": STATELESS,
        "io.modelcontextprotocol/clientInfo": {"name": "drive.py", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}}
acked, lock = {}, threading.Lock()
stats = {"retries": 0, "reinitialized": 0, "failed": 0}


def post(body, headers):
    request = urllib.request.Request(URL, data=json.dumps(body).encode(), method="POST")
    request.add_header("Content-Type", "application/json")
    request.add_header("Accept", "application/json, text/event-stream")
    request.add_header("Authorization", "Bearer " + TOKEN)
    for name, value in headers.items():
        request.add_header(name, value)
    with urllib.request.urlopen(request, timeout=15) as response:
        text = response.read().decode()
        session = response.headers.get("Mcp-Session-Id")
    if not text.strip():
        return None, session
    for line in text.splitlines():
        if line.startswith("data:") and line[5:].strip():
            return json.loads(line[5:]), session
    return json.loads(text), session


class Client:
    def __init__(self, stateless):
        self.stateless, self.session = stateless, None

    def initialize(self):
        reply, session = post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "drive.py", "version": "1"}}}, {})
        self.session = session
        post({"jsonrpc": "2.0", "method": "notifications/initialized"},
             {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"})

    def call(self, name, arguments):
        params = {"name": name, "arguments": arguments}
        if self.stateless:
            params["_meta"] = META
            headers = {"MCP-Protocol-Version": STATELESS, "Mcp-Method": "tools/call", "Mcp-Name": name}
        else:
            if self.session is None:
                self.initialize()
            headers = {"Mcp-Session-Id": self.session, "MCP-Protocol-Version": "2025-11-25"}
        reply, _ = post({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}, headers)
        return reply


def worker(index):
    client = Client(stateless=index % 2 == 0)
    for n in range(CREATES):
        key = f"{RUN}-{index}-{n}"
        deadline = time.time() + 90
        while True:
            try:
                reply = client.call("billing_create_invoice",
                                    {"customer_id": f"C-{index}", "total_cents": 100 + n, "idempotency_key": key})
                result = reply.get("result") if reply else None
                if result is not None and not result.get("isError"):
                    found = re.search(r'"id":\s*"(INV-\d+)"', json.dumps(result.get("structuredContent", result)))
                    with lock:
                        acked[key] = found.group(1) if found else None
                    break
            except urllib.error.HTTPError as error:
                if error.code == 404 and not client.stateless:
                    # The session's replica died: a new session (the LB pins it anew).
                    client.session = None
                    with lock:
                        stats["reinitialized"] += 1
            except Exception:  # a reset, a refused connection, a cut body: retry the same key
                pass
            with lock:
                stats["retries"] += 1
            if time.time() > deadline:
                with lock:
                    stats["failed"] += 1
                break
            time.sleep(0.05)


threads = [threading.Thread(target=worker, args=(i,)) for i in range(CLIENTS)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(json.dumps({"acked": acked, **stats}))
