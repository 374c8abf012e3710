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

# Server-to-client requests (elicitation/create on a 2025-11-25 session), as they arrive.
_orig_dispatch_request = jsonrpc_dispatcher.JSONRPCDispatcher._dispatch_request


async def _capturing_dispatch_request(self: Any, req: Any, *a: Any, **kw: Any) -> Any:
    RAW.append({"request": {"id": req.id, "method": req.method, "params": req.params}})
    return await _orig_dispatch_request(self, req, *a, **kw)


jsonrpc_dispatcher.JSONRPCDispatcher._dispatch_request = _capturing_dispatch_request  # type: ignore[method-assign]


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
    """Dotted path: object keys, array indices, `@json` parses the string found so far, `@len`
    is the length of a list or string (key count of an object)."""
    cur = obj
    for seg in dotted.split("."):
        if seg == "@json":
            if not isinstance(cur, str):
                return MISSING
            try:
                cur = json.loads(cur)
            except ValueError:
                return MISSING
        elif seg == "@len":
            if isinstance(cur, (list, str, dict)):
                cur = len(cur)
            else:
                return MISSING
        elif isinstance(cur, dict) and seg in cur:
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


CLIENT_ID = "py"
ELICITATION_ACTIONS = ("accept", "decline", "cancel")


def validate_plan(plan: dict[str, Any]) -> str | None:
    """A plan mistake (a usage error, exit 2), or None."""
    steps: list[tuple[str, Any]] = []
    for key in ("calls", "invalid"):
        steps += [(f"{key}[{i}]", st) for i, st in enumerate(plan.get(key, []))]
    steps += [(f"resources.read[{i}]", st) for i, st in enumerate((plan.get("resources") or {}).get("read", []))]
    steps += [(f"prompts.get[{i}]", st) for i, st in enumerate((plan.get("prompts") or {}).get("get", []))]
    steps += [(f"completions[{i}]", st) for i, st in enumerate(plan.get("completions", []))]
    for where, st in (
        ("resources.list", (plan.get("resources") or {}).get("list")),
        ("resources.templates", (plan.get("resources") or {}).get("templates")),
        ("prompts.list", (plan.get("prompts") or {}).get("list")),
    ):
        if isinstance(st, dict):
            steps.append((where, st))

    def bad_answer(a: Any, where: str) -> str | None:
        if not isinstance(a, dict) or a.get("action") not in ELICITATION_ACTIONS:
            return f'plan {where}: needs "action": one of {", ".join(ELICITATION_ACTIONS)}'
        return None

    if "elicitation" in plan and (why := bad_answer(plan["elicitation"], "elicitation")):
        return why
    for where, st in steps:
        if "when" in st:
            w = st["when"]
            if (
                not isinstance(w, dict)
                or set(w) - {"protocol", "client"}
                or any(not isinstance(w[k], list) for k in w)
            ):
                return f'plan {where}.when: only "protocol" and "client" lists are allowed'
            if not isinstance(st.get("because"), str) or not st["because"].strip():
                return f'plan {where}: a step with "when" must say "because" (it is reported when skipped)'
        if "elicitation" in st:
            if "elicitation" not in plan:
                return f'plan {where}.elicitation: the plan has no top-level "elicitation" (the capability is declared only then)'
            if why := bad_answer(st["elicitation"], f"{where}.elicitation"):
                return why
    return None


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

    # Elicitation: with a plan-level `elicitation` answer the client declares the capability
    # (the SDK does when an elicitation_callback is given) and answers every question with the
    # current step's answer, recording what it was asked. On 2025-11-25 the question is an
    # `elicitation/create` request; on 2026-07-28 an `input_required` tools/call result, which
    # Client.call_tool fulfils through the same callback and retries with `requestState`.
    elicitor = Elicitor(plan.get("elicitation"))
    extra: dict[str, Any] = {"elicitation_callback": elicitor.callback} if "elicitation" in plan else {}
    client = Client(
        server,
        mode=mode,
        read_timeout_seconds=args.timeout,
        message_handler=_capture_messages,
        client_info=types.Implementation(name="fusion-testkit-py", version="0.1.0"),
        **extra,
    )
    connected = False
    try:
        async with client:
            connected = True
            await exercise(client, args, plan, report, c, elicitor)
    except Exception as e:  # noqa: BLE001
        c.check(False, "session" if connected else "connect", describe_exc(e))


class Elicitor:
    """Answers every elicitation with `answer` and records each question."""

    def __init__(self, answer: dict[str, Any] | None) -> None:
        self.default = answer
        self.answer = answer
        self.asked: list[dict[str, Any]] = []

    async def callback(self, ctx: Any, params: Any) -> Any:
        p = params.model_dump(mode="json", by_alias=True, exclude_none=True)
        rid = ctx.request_id
        # How the question came: a JSON-RPC request on the wire, or an entry of an
        # input_required result (the driver's context id is then the inputRequests key).
        via = "unknown"
        if any(m.get("request", {}).get("method") == "elicitation/create" and m["request"].get("id") == rid for m in RAW):
            via = "elicitation/create"
        elif any(
            isinstance(m.get("result"), dict)
            and m["result"].get("resultType") == "input_required"
            and str(rid) in (m["result"].get("inputRequests") or {})
            for m in RAW
        ):
            via = "input_required"
        answer = self.answer or {"action": "cancel"}
        self.asked.append(
            {"message": p.get("message"), "requestedSchema": p.get("requestedSchema"), "mode": p.get("mode", "form"), "via": via, "action": answer["action"]}
        )
        if answer["action"] == "accept":
            return types.ElicitResult(action="accept", content=answer.get("content", {}))
        return types.ElicitResult(action=answer["action"])


async def exercise(
    client: Any, args: argparse.Namespace, plan: dict[str, Any], report: dict[str, Any], c: Checks, elicitor: Elicitor
) -> None:
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
            is_error = resp["result"].get("isError") if isinstance(resp["result"], dict) else None
            why += " — the server DID return a result" + (f" (isError={json.dumps(is_error)})" if is_error is not None else "") + "; the Python SDK client raised on it"
        elif resp and "error" in resp:
            why += f" — server sent JSON-RPC error {resp['error'].get('code')}"
        return f"{label}: {why}"

    # -------------------------------------------------------------- plan steps
    era = client.protocol_version

    def resolve_step(step: dict[str, Any], label: str) -> dict[str, Any] | None:
        """None when the step's `when` excludes this client/era (counted, noted with its
        `because`); else the step with `byProtocol[<negotiated>]` merged over it."""
        w = step.get("when")
        if w and (("protocol" in w and era not in w["protocol"]) or ("client" in w and CLIENT_ID not in w["client"])):
            report["skipped"] += 1
            report["notes"].append(f"skipped {label}: {step['because']} (runs only for {json.dumps(w)}; this run: {CLIENT_ID}, {era})")
            return None
        over = (step.get("byProtocol") or {}).get(era)
        if not over:
            return step
        merged = dict(step)
        for k, v in over.items():
            merged[k] = {**step[k], **v} if isinstance(v, dict) and isinstance(step.get(k), dict) else v
        return merged

    def check_expect(label: str, obj: Any, expect: dict[str, Any] | None, contains: dict[str, Any] | None = None) -> None:
        for p, want in (expect or {}).items():
            got = get_path(obj, p)
            c.check(
                got is not MISSING and json_equal(got, want),
                f"{label} expect {p}",
                f"expected {short(want)}, " + ("path missing" if got is MISSING else f"got {short(got)}"),
            )
        for p, subs in (contains or {}).items():
            got = get_path(obj, p)
            for sub in subs if isinstance(subs, list) else [subs]:
                c.check(
                    isinstance(got, str) and sub in got,
                    f"{label} expectContains {p}",
                    f"expected a string containing {short(sub)}, path missing" if got is MISSING else f"{short(sub)} not in {short(got)}",
                )

    async def attempt(method: str, fn: Any) -> tuple[Any, BaseException | None, dict[str, Any] | None]:
        """Runs one SDK request; on a raise, also the raw response it answered (if any)."""
        before = len(RAW)
        try:
            return await fn(), None, None
        except Exception as e:  # noqa: BLE001
            resp = next((m for m in reversed(RAW[before:]) if m.get("method") == method), None)
            return None, e, resp

    def check_outcome(label: str, step: dict[str, Any], result: Any, err: BaseException | None, resp: dict[str, Any] | None) -> Any:
        """A step whose `error` is set must end in a JSON-RPC error (paths into {code, message,
        data} of the raw error); otherwise in a result (`expect` paths into it)."""
        if "error" in step:
            if err is None:
                c.check(False, f"{label} yields a JSON-RPC error", f"got a result instead: {short(dump_result(result))}")
                return None
            if not c.check(bool(resp and "error" in resp), f"{label} yields a JSON-RPC error", f"the client raised {describe_exc(err)} but no JSON-RPC error response was seen"):
                return None
            want = step["error"] if isinstance(step["error"], dict) else {}
            check_expect(f"{label} error", resp["error"], want, step.get("errorContains"))
            return None
        if err is not None:
            c.check(False, describe_throw(label, err, resp))
            return None
        res = dump_result(result)
        check_expect(label, res, step.get("expect"), step.get("expectContains"))
        return res

    def check_elicitation(label: str, step: dict[str, Any], start: int) -> None:
        """What the server asked during one step: the era's mechanism, and the step's
        `expectElicitation` ({count, expect, expectContains}, paths into the questions)."""
        asked = elicitor.asked[start:]
        want = "input_required" if era >= "2026-07-28" else "elicitation/create"
        for i, q in enumerate(asked):
            report["elicitations"].append({"step": label.split(" ")[0], "message": q["message"], "via": q["via"], "action": q["action"]})
            c.check(q["via"] == want, f"{label} elicitation[{i}] arrives as {want} on {era}", f"it arrived as {q['via']}")
        e = step.get("expectElicitation")
        if e is None:
            return
        questions = [{k: q[k] for k in ("message", "requestedSchema", "mode")} for q in asked]
        if "count" in e:
            c.check(len(asked) == e["count"], f"{label} elicitation count", f"expected {e['count']} question(s), the server asked {len(asked)}: {short([q['message'] for q in asked])}")
        check_expect(f"{label} elicitation", questions, e.get("expect"), e.get("expectContains"))

    async def list_all(method: str, key: str) -> tuple[list[dict[str, Any]], int]:
        """Every page of a list method, walking the cursors."""
        fn = {
            "resources/list": client.session.list_resources,
            "resources/templates/list": client.session.list_resource_templates,
            "prompts/list": client.session.list_prompts,
        }[method]
        items: list[dict[str, Any]] = []
        seen: set[str] = set()
        cursor: str | None = None
        pages = 0
        while True:
            page = await fn(params=types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None)
            pages += 1
            items += dump_result(page).get(key, [])
            cursor = page.next_cursor
            if cursor is None or pages >= 1000:
                break
            if not c.check(cursor not in seen, f"{method} pagination terminates", f"cursor {short(cursor)} repeated"):
                break
            seen.add(cursor)
        return items, pages

    async def list_step(label: str, step: Any, method: str, key: str, ident: str) -> tuple[list[dict[str, Any]], int] | None:
        st = {} if step is True else resolve_step(step, label)
        if st is None:
            return None
        out, err, resp = await attempt(method, lambda: list_all(method, key))
        if err is not None:
            c.check(False, describe_throw(label, err, resp))
            return None
        items, pages = out
        ids = [x.get(ident) for x in items]
        dup = sorted({str(x) for x in ids if ids.count(x) > 1})
        c.check(not dup, f"{label} unique {ident}s", "listed twice: " + ", ".join(dup))
        if "count" in st:
            c.check(len(items) == st["count"], f"{label} count", f"expected {st['count']}, got {len(items)}: {short(ids)}")
        check_expect(label, {key: items}, st.get("expect"), st.get("expectContains"))
        return items, pages

    def needs_capability(name: str) -> None:
        caps = client.server_capabilities.model_dump(mode="json", by_alias=True, exclude_none=True)
        c.check(caps.get(name) is not None, f"server declares the {name} capability", f"capabilities: {short(caps)}")

    # -------------------------------------------------------------- resources
    resources = plan.get("resources")
    if resources:
        needs_capability("resources")
        if "list" in resources:
            listed = await list_step("resources/list", resources["list"], "resources/list", "resources", "uri")
            if listed:
                report["resources"], report["resourcePages"] = len(listed[0]), listed[1]
        if "templates" in resources:
            listed = await list_step("resources/templates/list", resources["templates"], "resources/templates/list", "resourceTemplates", "uriTemplate")
            if listed:
                report["resourceTemplates"], report["resourceTemplatePages"] = len(listed[0]), listed[1]
        for i, step in enumerate(resources.get("read", [])):
            label = f"resources.read[{i}] {step['uri']}"
            st = resolve_step(step, label)
            if st is None:
                continue
            report["reads"] += 1
            uri = st["uri"]
            res = check_outcome(label, st, *await attempt("resources/read", lambda: client.read_resource(uri, cache_mode="bypass")))
            if res is not None:
                # Every content item names the URI read (the server may add more items of that URI).
                uris = [x.get("uri") for x in res.get("contents", [])]
                c.check(bool(uris) and all(u == uri for u in uris), f"{label} contents carry the URI read", short(uris))

    # -------------------------------------------------------------- prompts
    prompts = plan.get("prompts")
    if prompts:
        needs_capability("prompts")
        if "list" in prompts:
            listed = await list_step("prompts/list", prompts["list"], "prompts/list", "prompts", "name")
            if listed:
                report["prompts"], report["promptPages"] = len(listed[0]), listed[1]
        for i, step in enumerate(prompts.get("get", [])):
            label = f"prompts.get[{i}] {step['name']}({short(step.get('arguments', {}), 120)})"
            st = resolve_step(step, label)
            if st is None:
                continue
            report["promptGets"] += 1
            name, arguments = st["name"], st.get("arguments")
            check_outcome(label, st, *await attempt("prompts/get", lambda: client.get_prompt(name, arguments)))

    # -------------------------------------------------------------- completions
    if plan.get("completions"):
        needs_capability("completions")
        for i, step in enumerate(plan["completions"]):
            ref, argument = step.get("ref") or {}, step.get("argument") or {}
            label = f"completions[{i}] {ref.get('name', ref.get('uri'))} {argument.get('name')}={short(argument.get('value'))}"
            st = resolve_step(step, label)
            if st is None:
                continue
            report["completions"] += 1
            ref, argument = st["ref"], st["argument"]
            typed_ref: Any = (
                types.PromptReference(name=ref["name"]) if ref.get("type") == "ref/prompt" else types.ResourceTemplateReference(uri=ref["uri"])
            )
            context = (st.get("context") or {}).get("arguments")
            check_outcome(label, st, *await attempt("completion/complete", lambda: client.complete(typed_ref, argument, context)))

    # -------------------------------------------------------------- calls
    for i, step in enumerate(plan.get("calls", [])):
        label = f"calls[{i}] {step['tool']}({short(step.get('arguments', {}), 120)})"
        spec = resolve_step(step, label)
        if spec is None:
            continue
        report["calls"] += 1
        expect_err = spec.get("isError", False)
        elicitor.answer = spec.get("elicitation", elicitor.default)
        start = len(elicitor.asked)
        result, err, resp = await call(spec["tool"], spec.get("arguments", {}))
        check_elicitation(label, spec, start)
        if "error" in spec:
            # A call the protocol answers with a JSON-RPC error (a missing client capability
            # on 2026-07-28, say), not with a tool result.
            check_outcome(label, spec, result, err, resp)
            continue
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
        check_expect(label, res, spec.get("expect"), spec.get("expectContains"))

    for i, step in enumerate(plan.get("invalid", [])):
        label = f"invalid[{i}] {step['tool']}({short(step.get('arguments', {}), 120)})"
        spec = resolve_step(step, label)
        if spec is None:
            continue
        report["invalidCalls"] += 1
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
    if why := validate_plan(plan):
        ap.error(why)

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
        # Added with the resources / prompts / completions / elicitation sections (0 when unused).
        "resources": 0,
        "resourcePages": 0,
        "resourceTemplates": 0,
        "resourceTemplatePages": 0,
        "reads": 0,
        "prompts": 0,
        "promptPages": 0,
        "promptGets": 0,
        "completions": 0,
        "elicitations": [],
        "skipped": 0,
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
