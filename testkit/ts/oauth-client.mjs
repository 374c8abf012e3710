// The official TypeScript SDK's own OAuth flow (`@modelcontextprotocol/sdk` 1.x,
// `OAuthClientProvider`) against a protected MCP server:
//
//   node testkit/ts/oauth-client.mjs --http <url> [--call <tool> --args <json>]...
//
// The SDK does everything an MCP client does: on the server's 401 it reads the
// protected-resource metadata (RFC 9728), the authorization server's metadata, registers a
// client dynamically, and builds the authorization URL with PKCE and the resource indicator.
// Only the browser is ours: `redirectToAuthorization` follows the authorization server's
// redirects (carrying its cookies, like a browser) until it lands on our redirect URI, and the
// code found there goes to the SDK's `finishAuth`, which exchanges it for the token.
//
// stdout: one JSON line {sdk, registered, authorizationUrl, tokenScope, tools, calls: [...]};
// each call is {tool, isError, text} or {tool, error: {code, message}}.
// Exit 0 when the flow completed (calls may fail: the test judges them), 1 otherwise.
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const DEPS = process.env.FUSION_TEST_DEPS
  ? path.resolve(process.env.FUSION_TEST_DEPS)
  : path.resolve(HERE, '..', '..', '.test-deps');
const NODE_DEPS = path.join(DEPS, 'node');
const require = createRequire(path.join(NODE_DEPS, 'package.json'));
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js');
const { UnauthorizedError } = require('@modelcontextprotocol/sdk/client/auth.js');
const sdkVersion = JSON.parse(
  readFileSync(path.join(NODE_DEPS, 'node_modules/@modelcontextprotocol/sdk/package.json'), 'utf8'),
).version;

const { values: opts } = parseArgs({
  options: {
    http: { type: 'string' },
    call: { type: 'string', multiple: true, default: [] },
    args: { type: 'string', multiple: true, default: [] },
  },
});
if (!opts.http || opts.call.length !== opts.args.length) {
  process.stderr.write('usage: oauth-client.mjs --http <url> [--call <tool> --args <json>]...\n');
  process.exit(2);
}

// Never contacted: the "browser" stops at the first redirect that points here.
const REDIRECT_URI = 'http://127.0.0.1:1/callback';

// A browser for one authorization: follows redirects by hand, keeps cookies by name.
async function authorize(url) {
  const cookies = new Map();
  let next = url.href;
  for (let hop = 0; hop < 20; hop++) {
    if (next.startsWith(REDIRECT_URI)) return new URL(next);
    const response = await fetch(next, {
      redirect: 'manual',
      headers: { cookie: [...cookies].map(([k, v]) => `${k}=${v}`).join('; ') },
    });
    for (const line of response.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const eq = pair.indexOf('=');
      cookies.set(pair.slice(0, eq).trim(), pair.slice(eq + 1).trim());
    }
    const location = response.headers.get('location');
    if (!location) {
      throw new Error(`authorization stopped at ${next}: ${response.status} ${await response.text()}`);
    }
    next = new URL(location, next).href;
  }
  throw new Error('authorization: too many redirects');
}

const report = { sdk: { name: '@modelcontextprotocol/sdk', version: sdkVersion }, calls: [] };
let callback;
const state = {};
const provider = {
  get redirectUrl() {
    return REDIRECT_URI;
  },
  get clientMetadata() {
    return {
      client_name: 'fusion testkit (TypeScript SDK)',
      redirect_uris: [REDIRECT_URI],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  },
  clientInformation: () => state.client,
  saveClientInformation: (client) => {
    state.client = client;
    report.registered = Boolean(client.client_id);
  },
  tokens: () => state.tokens,
  saveTokens: (tokens) => {
    state.tokens = tokens;
    report.tokenScope = tokens.scope ?? null;
  },
  saveCodeVerifier: (verifier) => {
    state.verifier = verifier;
  },
  codeVerifier: () => state.verifier,
  redirectToAuthorization: async (url) => {
    report.authorizationUrl = {
      resource: url.searchParams.get('resource'),
      scope: url.searchParams.get('scope'),
      codeChallengeMethod: url.searchParams.get('code_challenge_method'),
    };
    callback = await authorize(url);
  },
};

async function connect() {
  const transport = new StreamableHTTPClientTransport(new URL(opts.http), { authProvider: provider });
  const client = new Client({ name: 'fusion-testkit-oauth', version: '0.0.0' });
  try {
    await client.connect(transport);
    return client;
  } catch (error) {
    if (!(error instanceof UnauthorizedError) || !callback) throw error;
    const code = callback.searchParams.get('code');
    if (!code) throw new Error(`the authorization server redirected without a code: ${callback}`);
    await transport.finishAuth(code);
    const retry = new Client({ name: 'fusion-testkit-oauth', version: '0.0.0' });
    await retry.connect(new StreamableHTTPClientTransport(new URL(opts.http), { authProvider: provider }));
    return retry;
  }
}

try {
  const client = await connect();
  report.tools = (await client.listTools()).tools.map((tool) => tool.name).sort();
  for (const [i, tool] of opts.call.entries()) {
    try {
      const result = await client.callTool({ name: tool, arguments: JSON.parse(opts.args[i]) });
      const text = result.content.map((block) => block.text ?? '').join('\n');
      report.calls.push({ tool, isError: Boolean(result.isError), text });
    } catch (error) {
      report.calls.push({ tool, error: { code: error.code ?? null, message: String(error.message) } });
    }
  }
  await client.close();
  process.stdout.write(`${JSON.stringify(report)}\n`);
  process.exit(0);
} catch (error) {
  process.stderr.write(`✗ oauth flow failed: ${error.stack ?? error}\n`);
  process.stdout.write(`${JSON.stringify({ ...report, failure: String(error.message ?? error) })}\n`);
  process.exit(1);
}
