"""The official Python SDK's own OAuth flow (`mcp` 2.x, `OAuthClientProvider`) against a
protected MCP server:

    .test-deps/py/bin/python testkit/py/oauth_client.py --http <url> [--protocol 2025-11-25|2026-07-28]
        [--call <tool> --args <json>]...

The SDK does everything an MCP client does: on the server's 401 it reads the protected-resource
metadata (RFC 9728) and the authorization server's metadata, registers a client dynamically,
and builds the authorization URL with PKCE and the resource indicator. Only the browser is ours:
the redirect handler follows the authorization server's redirects (carrying its cookies) until
it lands on our redirect URI, and the callback handler hands the code found there back to the
SDK, which exchanges it for the token.

stdout: one JSON line {sdk, mode, registered, authorizationUrl, tokenScope, tools, calls: [...]};
each call is {tool, isError, text} or {tool, error: {code, message}}.
Exit 0 when the flow completed (calls may fail: the test judges them), 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from importlib.metadata import version as dist_version
from typing import Any
from urllib.parse import parse_qs, urljoin, urlparse

import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from mcp.shared.exceptions import MCPError

# Never contacted: the "browser" stops at the first redirect that points here.
REDIRECT_URI = "http://127.0.0.1:1/callback"


class Memory:
    """The SDK's TokenStorage, in memory, noting what the flow stored."""

    def __init__(self, report: dict[str, Any]) -> None:
        self.report = report
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens
        self.report["tokenScope"] = tokens.scope

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info
        self.report["registered"] = bool(client_info.client_id)


class Browser:
    """Follows an authorization URL's redirects, keeping cookies, up to our redirect URI."""

    def __init__(self, report: dict[str, Any]) -> None:
        self.report = report
        self.landed: str | None = None

    async def redirect(self, url: str) -> None:
        query = parse_qs(urlparse(url).query)
        self.report["authorizationUrl"] = {
            "resource": query.get("resource", [None])[0],
            "scope": query.get("scope", [None])[0],
            "codeChallengeMethod": query.get("code_challenge_method", [None])[0],
        }
        async with httpx2.AsyncClient(follow_redirects=False) as http:
            for _ in range(20):
                if url.startswith(REDIRECT_URI):
                    self.landed = url
                    return
                response = await http.get(url)
                location = response.headers.get("location")
                if not location:
                    raise RuntimeError(f"authorization stopped at {url}: {response.status_code} {response.text}")
                url = urljoin(url, location)
        raise RuntimeError("authorization: too many redirects")

    async def callback(self) -> AuthorizationCodeResult:
        if self.landed is None:
            raise RuntimeError("the authorization never reached the redirect URI")
        query = parse_qs(urlparse(self.landed).query)
        if "code" not in query:
            raise RuntimeError(f"the authorization server redirected without a code: {self.landed}")
        return AuthorizationCodeResult(
            code=query["code"][0],
            state=query.get("state", [None])[0],
            iss=query.get("iss", [None])[0],
        )


async def run(args: argparse.Namespace, report: dict[str, Any]) -> None:
    browser = Browser(report)
    auth = OAuthClientProvider(
        server_url=args.http,
        client_metadata=OAuthClientMetadata(
            client_name="fusion testkit (Python SDK)",
            redirect_uris=[REDIRECT_URI],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=Memory(report),
        redirect_handler=browser.redirect,
        callback_handler=browser.callback,
    )
    mode = "legacy" if args.protocol == "2025-11-25" else "auto"
    report["mode"] = mode
    server = streamable_http_client(args.http, http_client=create_mcp_http_client(auth=auth))
    client = Client(
        server,
        mode=mode,
        client_info=types.Implementation(name="fusion-testkit-py-oauth", version="0.1.0"),
    )
    async with client:
        report["protocolVersion"] = client.protocol_version if hasattr(client, "protocol_version") else None
        report["tools"] = sorted(tool.name for tool in (await client.list_tools()).tools)
        for tool, arguments in zip(args.call, args.args, strict=True):
            try:
                result = await client.call_tool(tool, json.loads(arguments))
                text = "\n".join(getattr(block, "text", "") for block in result.content)
                report["calls"].append({"tool": tool, "isError": bool(result.is_error), "text": text})
            except MCPError as e:
                report["calls"].append({"tool": tool, "error": {"code": e.error.code, "message": e.error.message}})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--http", required=True)
    parser.add_argument("--protocol", choices=["2025-11-25", "2026-07-28"], default="2025-11-25")
    parser.add_argument("--call", action="append", default=[])
    parser.add_argument("--args", action="append", default=[])
    args = parser.parse_args()
    if len(args.call) != len(args.args):
        parser.error("each --call needs its --args")
    report: dict[str, Any] = {"sdk": {"name": "mcp", "version": dist_version("mcp")}, "calls": []}
    import anyio

    try:
        anyio.run(run, args, report)
    except BaseException as e:  # noqa: BLE001
        report["failure"] = repr(e)
        print(json.dumps(report))
        print(f"✗ oauth flow failed: {e!r}", file=sys.stderr)
        return 1
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
