#!/usr/bin/env python3
"""Drive an MCP server with the official Python SDK client (`mcp`) and check it against a JSON plan.

    .test-deps/py/bin/python testkit/py/client.py (--stdio "<cmd>" | --http <url>) --plan plan.json
        [--protocol auto|2025-11-25|2026-07-28] [--header "Name: value"]... [--timeout <seconds>]

--protocol 2025-11-25  initialize handshake (Client(mode="legacy")); the default
--protocol 2026-07-28  stateless era: server/discover probe, must end on 2026-07-28 (Client(mode="auto") + check)
--protocol auto        server/discover, falling back to initialize (Client(mode="auto")); whatever is negotiated passes
--protocol 2026-07-28 --no-discover   adopt 2026-07-28 without any server/discover (Client(mode="2026-07-28"))

Prints exactly one JSON report line on stdout. Exit 0 = every check passed,
1 = at least one check failed (details on stderr), 2 = usage/harness error.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from importlib.metadata import version as dist_version
from typing import Any

try:
    import anyio
    import httpx2
    import jsonschema
    from jsonschema.validators import validator_for
    from referencing import Registry

    import mcp_types as types
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared import jsonrpc_dispatcher
    from mcp.shared._httpx_utils import create_mcp_http_client
    from mcp.shared.exceptions import MCPError
except ImportError as e:  # pragma: no cover
    sys.stderr.write(f"client.py: {e}; run testkit/install.sh and use .test-deps/py/bin/python\n")
    sys.exit(2)

SDK = {"name": "mcp (python)", "version": dist_version("mcp")}

# ------------------------------------------------------------------ raw capture
# Every JSON-RPC response the dispatcher receives, before the SDK parses it
# (pydantic drops unknown fields, so the parsed objects are not enough for the
# forbidden-substring scan). Errors are recorded as {"error": {...}}.
RAW: list[dict[str, Any]] = []
_orig_send_raw_request = jsonrpc_dispatcher.JSONRPCDispatcher.send_raw_request


async def _capturing_send_raw_request(self: Any, method: str, params: Any, opts: Any = None, **kw: Any) -> Any:
    try:
        result = await _orig_send_raw_request(self, method, params, opts, **kw)
    except MCPError as e:
        RAW.append({"method": method, "error": e.error.model_dump(mode="json", exclude_none=True)})
        raise
    RAW.append({"method": method, "result": result})
    return result


jsonrpc_dispatcher.JSONRPCDispatcher.send_raw_request = _capturing_send_raw_request  # type: ignore[method-assign]


async def _capture_messages(message: Any) -> None:
    """message_handler: notifications and server requests, serialized, for the substring scan."""
    try:
        if hasattr(message, "model_dump"):
            RAW.append({"message": message.model_dump(mode="json", by_alias=True, exclude_none=True)})
        else:
            RAW.append({"message": repr(message)})
    except Exception:  # noqa: BLE001
        RAW.append({"message": repr(message)})


# ------------------------------------------------------------------ helpers
class Checks:
    def __init__(self) -> None:
        self.count = 0
        self.failures: list[str] = []

    def check(self, ok: bool, what: str, detail: str | None = None) -> bool:
        self.count += 1
        if not ok:
            self.failures.append(what if detail is None else f"{what}: {detail}")
        return ok


def describe_exc(e: BaseException) -> str:
    """Type and message, with (nested) exception groups flattened to their leaves."""
    if isinstance(e, BaseExceptionGroup):
        return "; ".join(describe_exc(x) for x in e.exceptions)
    code = f" {e.code}" if isinstance(e, MCPError) else ""
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}{code}: {text[0] if text else ''}"


def short(v: Any, n: int = 300) -> str:
    s = v if isinstance(v, str) else json.dumps(v, default=str)
    return s if len(s) <= n else s[:n] + "…"


MISSING = object()


def get_path(obj: Any, dotted: str) -> Any:
    cur = obj
    for seg in dotted.split("."):
        if isinstance(cur, dict) and seg in cur:
            cur = cur[seg]
        elif isinstance(cur, list) and seg.isdigit() and int(seg) < len(cur):
            cur = cur[int(seg)]
        else:
            return MISSING
    return cur


def json_equal(a: Any, b: Any) -> bool:
    """Deep equality with JSON semantics (True != 1)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    return a == b


def dialect_of(schema: dict[str, Any]) -> str:
    s = schema.get("$schema")
    return "2020-12 (default)" if not isinstance(s, str) else s


def compile_schema(schema: dict[str, Any]) -> Any:
    """check_schema against the declared dialect (default 2020-12); return a validator."""
    cls = validator_for(schema, default=jsonschema.Draft202012Validator)
    cls.check_schema(schema)
    return cls(schema, registry=Registry(), format_checker=cls.FORMAT_CHECKER)


def dump_result(result: Any) -> dict[str, Any]:
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


# ------------------------------------------------------------------ main
async def run(args: argparse.Namespace, plan: dict[str, Any], report: dict[str, Any], c: Checks) -> None:
    if args.stdio:
        argv = shlex.split(args.stdio)
        if not argv:
            raise SystemExit("client.py: --stdio command line is empty")
        # Pass the whole environment (the SDK default forwards only HOME, PATH, ...).
        server: Any = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))
    else:
        http_client = create_mcp_http_client(headers=args.headers or None)
        server = streamable_http_client(args.http, http_client=http_client)

    if args.protocol == "2025-11-25":
        mode = "legacy"
    elif args.protocol == "2026-07-28" and args.no_discover:
        mode = "2026-07-28"
    else:
        mode = "auto"
    report["mode"] = mode

    client = Client(
        server,
        mode=mode,
        read_timeout_seconds=args.timeout,
        message_handler=_capture_messages,
        client_info=types.Implementation(name="fusion-testkit-py", version="0.1.0"),
    )
    connected = False
    try:
        async with client:
            connected = True
            await exercise(client, args, plan, report, c)
    except Exception as e:  # noqa: BLE001
        c.check(False, "session" if connected else "connect", describe_exc(e))


async def exercise(client: Any, args: argparse.Namespace, plan: dict[str, Any], report: dict[str, Any], c: Checks) -> None:
    report["protocolVersion"] = client.protocol_version
    info = client.server_info
    report["serverInfo"] = info.model_dump(mode="json", exclude_none=True) if info else None
    if args.protocol != "auto":
        c.check(
            client.protocol_version == args.protocol,
            "negotiated protocol version",
            f"wanted {args.protocol}, got {client.protocol_version}",
        )

    # -------------------------------------------------------------- tools/list
    tools: dict[str, Any] = {}
    validators: dict[str, Any] = {}
    cursor: str | None = None
    seen: set[str] = set()
    pages = 0
    try:
        while True:
            params = types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
            page = await client.session.list_tools(params=params)
            pages += 1
            for t in page.tools:
                c.check(t.name not in tools, "tools/list unique names", f"tool {t.name} listed twice")
                tools[t.name] = dump_result(t)
            cursor = page.next_cursor
            if cursor is None:
                break
            if not c.check(cursor not in seen, "tools/list pagination terminates", f"cursor {short(cursor)} repeated"):
                break
            seen.add(cursor)
            if pages >= 1000:
                c.check(False, "tools/list pagination terminates", "more than 1000 pages")
                break
    except Exception as e:  # noqa: BLE001
        c.check(False, "tools/list", describe_exc(e))
    report["toolPages"] = pages
    report["tools"] = len(tools)
    c.check(len(tools) > 0, "tools/list returns at least one tool", "no tools listed")
    if plan.get("callEveryTool"):
        # A tool added to the server but not to the plan would otherwise go untested.
        called = {spec["tool"] for spec in plan.get("calls", [])}
        uncalled = [name for name in tools if name not in called]
        c.check(not uncalled, "plan calls every listed tool", "never called: " + ", ".join(uncalled))

    for name, t in tools.items():
        for which in ("inputSchema", "outputSchema"):
            schema = t.get(which)
            if schema is None:
                if which == "inputSchema":
                    c.check(False, f"{name}.inputSchema", "missing")
                continue
            if not c.check(isinstance(schema, dict), f"{name}.{which} is an object", short(schema)):
                continue
            if which == "inputSchema":
                c.check(schema.get("type") == "object", f"{name}.inputSchema root type", f'"type" must be "object", got {short(schema.get("type"))}')
            try:
                v = compile_schema(schema)
                c.count += 1
                if which == "outputSchema":
                    validators[name] = v
            except Exception as e:  # noqa: BLE001
                c.check(False, f"{name}.{which} is a valid JSON Schema ({dialect_of(schema)})", str(e).splitlines()[0])

    # -------------------------------------------------------------- calls
    async def call(name: str, arguments: dict[str, Any]) -> tuple[Any, BaseException | None, dict[str, Any] | None]:
        before = len(RAW)
        try:
            return await client.call_tool(name, arguments), None, None
        except Exception as e:  # noqa: BLE001
            resp = next((m for m in reversed(RAW[before:]) if m.get("method") == "tools/call"), None)
            return None, e, resp

    def describe_throw(label: str, e: BaseException, resp: dict[str, Any] | None) -> str:
        why = describe_exc(e)
        if resp and "result" in resp:
            why += f" — the server DID return a result (isError={json.dumps(resp['result'].get('isError', False))}); the Python SDK client raised on it"
        elif resp and "error" in resp:
            why += f" — server sent JSON-RPC error {resp['error'].get('code')}"
        return f"{label}: {why}"

    for i, spec in enumerate(plan.get("calls", [])):
        report["calls"] += 1
        label = f"calls[{i}] {spec['tool']}({short(spec.get('arguments', {}), 120)})"
        expect_err = spec.get("isError", False)
        result, err, resp = await call(spec["tool"], spec.get("arguments", {}))
        if err is not None:
            c.check(False, describe_throw(label, err, resp))
            continue
        res = dump_result(result)
        is_err = bool(res.get("isError", False))
        c.check(is_err == expect_err, f"{label} isError", f"expected {json.dumps(expect_err)}, got {json.dumps(is_err)} {short(res.get('content'))}")
        v = validators.get(spec["tool"])
        if v is not None and not is_err:
            if c.check("structuredContent" in res, f"{label} structuredContent present (tool has outputSchema)", "missing"):
                errs = sorted(v.iter_errors(res["structuredContent"]), key=lambda e: e.path)
                c.check(not errs, f"{label} structuredContent matches outputSchema", "; ".join(e.message for e in errs[:5]))
        if v is not None and is_err and "structuredContent" in res and not v.is_valid(res["structuredContent"]):
            report["notes"].append(
                f"{spec['tool']}: isError result carries structuredContent that does not match the outputSchema (accepted by mcp {SDK['version']})"
            )
        for p, want in (spec.get("expect") or {}).items():
            got = get_path(res, p)
            c.check(
                got is not MISSING and json_equal(got, want),
                f"{label} expect {p}",
                f"expected {short(want)}, " + ("path missing" if got is MISSING else f"got {short(got)}"),
            )

    for i, spec in enumerate(plan.get("invalid", [])):
        report["invalidCalls"] += 1
        label = f"invalid[{i}] {spec['tool']}({short(spec.get('arguments', {}), 120)})"
        result, err, resp = await call(spec["tool"], spec.get("arguments", {}))
        if err is not None:
            if resp and "error" in resp:
                c.check(False, f"{label}: expected a result with isError:true, got JSON-RPC error {resp['error'].get('code')} {short(resp['error'].get('message'))}")
            else:
                c.check(False, describe_throw(label, err, resp))
            continue
        c.check(bool(result.is_error), f"{label} returns isError:true", f"got isError={json.dumps(result.is_error)} {short(dump_result(result).get('content'))}")

    if plan.get("unknownTool"):
        name = plan["unknownTool"]
        label = f"unknownTool {name}"
        result, err, resp = await call(name, {})
        if err is not None:
            report["unknownTool"] = {
                "code": (resp or {}).get("error", {}).get("code", getattr(err, "code", None)),
                "message": (resp or {}).get("error", {}).get("message", str(err)),
                "sdkError": type(err).__name__,
            }
            c.check(bool(resp and "error" in resp), f"{label} yields a JSON-RPC error", f"the client raised {type(err).__name__}: {err} but no JSON-RPC error response was seen")
        else:
            report["unknownTool"] = {"result": dump_result(result)}
            c.check(False, f"{label} yields a JSON-RPC error", f"got a result instead (isError={json.dumps(result.is_error)})")

    # -------------------------------------------------------------- forbidden substrings
    for s in plan.get("forbiddenSubstrings", []):
        hits = [m for m in RAW if s in json.dumps(m) or s in json.dumps(m, ensure_ascii=False)]
        c.check(not hits, f"forbidden substring {json.dumps(s)} absent from all responses", f"found in {len(hits)} message(s), e.g. {short(hits[0], 200) if hits else ''}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--stdio", help="server command line (split like a POSIX shell)")
    g.add_argument("--http", help="Streamable HTTP endpoint URL")
    ap.add_argument("--plan", required=True)
    ap.add_argument("--protocol", choices=["auto", "2025-11-25", "2026-07-28"], default="2025-11-25")
    ap.add_argument("--no-discover", action="store_true", help="with --protocol 2026-07-28: adopt the version without server/discover")
    ap.add_argument("--header", action="append", default=[], help='extra HTTP header "Name: value"')
    ap.add_argument("--timeout", type=float, default=30.0, help="per-request timeout, seconds")
    args = ap.parse_args()
    args.headers = {}
    for h in args.header:
        k, sep, v = h.partition(":")
        if not sep or not k.strip():
            ap.error(f"bad --header {h!r}")
        args.headers[k.strip()] = v.strip()
    if args.no_discover and args.protocol != "2026-07-28":
        ap.error("--no-discover only applies to --protocol 2026-07-28")
    try:
        with open(args.plan, encoding="utf-8") as f:
            plan = json.load(f)
    except (OSError, ValueError) as e:
        ap.error(f"cannot read plan {args.plan}: {e}")

    report: dict[str, Any] = {
        "client": "py",
        "sdk": SDK,
        "transport": "stdio" if args.stdio else "http",
        "target": args.stdio or args.http,
        "requestedProtocol": args.protocol,
        "mode": None,
        "protocolVersion": None,
        "serverInfo": None,
        "tools": 0,
        "toolPages": 0,
        "calls": 0,
        "invalidCalls": 0,
        "unknownTool": None,
        "notes": [],
        "checks": 0,
        "failures": [],
        "ok": False,
        "durationMs": 0,
    }
    c = Checks()
    started = time.monotonic()
    try:
        anyio.run(run, args, plan, report, c)
    except BaseException as e:  # noqa: BLE001
        if isinstance(e, SystemExit):
            raise
        c.check(False, "harness", describe_exc(e))
    report["checks"] = c.count
    report["failures"] = c.failures
    report["ok"] = not c.failures
    report["durationMs"] = int((time.monotonic() - started) * 1000)
    sys.stdout.write(json.dumps(report) + "\n")
    sys.stdout.flush()
    if c.failures:
        sys.stderr.write(
            f"\n{len(c.failures)} of {c.count} checks FAILED (mcp {SDK['version']}, {report['transport']}, protocol {report['protocolVersion']}):\n"
        )
        for f in c.failures:
            sys.stderr.write(f"  ✗ {f}\n")
    sys.exit(1 if c.failures else 0)


if __name__ == "__main__":
    main()
