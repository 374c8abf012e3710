#!/usr/bin/env node
// Drives an MCP server with the official TypeScript SDK client and checks it
// against a JSON plan. See testkit/README.md.
//
//   node testkit/ts/client.mjs (--stdio "<cmd>" | --http <url>) --plan plan.json
//        [--sdk v1|v2] [--protocol auto|2025-11-25|2026-07-28]
//        [--header "Name: value"]... [--timeout <seconds>]
//
// --sdk v1 (default): @modelcontextprotocol/sdk (the 1.x line; initialize handshake only)
// --sdk v2:           @modelcontextprotocol/client (the 2.x line; can speak 2026-07-28)
//
// Prints exactly one JSON report line on stdout. Exit 0 = every check passed,
// 1 = at least one check failed (details on stderr), 2 = usage/harness error.

import { createRequire } from 'node:module';
import { readFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { isDeepStrictEqual } from 'node:util';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const DEPS = process.env.FUSION_TEST_DEPS
  ? path.resolve(process.env.FUSION_TEST_DEPS)
  : path.resolve(HERE, '..', '..', '.test-deps');
const NODE_DEPS = path.join(DEPS, 'node');

function usage(msg) {
  if (msg) process.stderr.write(`client.mjs: ${msg}\n`);
  process.stderr.write(
    'usage: client.mjs (--stdio "<command line>" | --http <url>) --plan <plan.json>\n' +
      '                  [--sdk v1|v2] [--protocol auto|2025-11-25|2026-07-28]\n' +
      '                  [--header "Name: value"]... [--timeout <seconds>]\n'
  );
  process.exit(2);
}

// ---------------------------------------------------------------- arguments
const opts = { sdk: 'v1', protocol: null, headers: {}, timeout: 30 };
{
  const a = process.argv.slice(2);
  for (let i = 0; i < a.length; i++) {
    const need = () => {
      if (i + 1 >= a.length) usage(`${a[i]} needs a value`);
      return a[++i];
    };
    switch (a[i]) {
      case '--stdio': opts.stdio = need(); break;
      case '--http': opts.http = need(); break;
      case '--plan': opts.plan = need(); break;
      case '--sdk': opts.sdk = need(); break;
      case '--protocol': opts.protocol = need(); break;
      case '--timeout': opts.timeout = Number(need()); break;
      case '--header': {
        const h = need();
        const k = h.indexOf(':');
        if (k <= 0) usage(`bad --header ${JSON.stringify(h)}`);
        opts.headers[h.slice(0, k).trim()] = h.slice(k + 1).trim();
        break;
      }
      case '-h': case '--help': usage(); // exits
      default: usage(`unknown argument ${a[i]}`);
    }
  }
  if (!!opts.stdio === !!opts.http) usage('exactly one of --stdio / --http is required');
  if (!opts.plan) usage('--plan is required');
  if (!['v1', 'v2'].includes(opts.sdk)) usage('--sdk must be v1 or v2');
  if (opts.protocol === null) opts.protocol = opts.sdk === 'v1' ? '2025-11-25' : 'auto';
  if (!['auto', '2025-11-25', '2026-07-28'].includes(opts.protocol)) usage('--protocol must be auto, 2025-11-25 or 2026-07-28');
  if (opts.sdk === 'v1' && opts.protocol !== '2025-11-25')
    usage('--sdk v1 (@modelcontextprotocol/sdk 1.x) only speaks the initialize handshake; use --sdk v2 for auto/2026-07-28');
  if (!(opts.timeout > 0)) usage('--timeout must be a positive number of seconds');
}

let plan;
try {
  plan = JSON.parse(readFileSync(opts.plan, 'utf8'));
} catch (e) {
  usage(`cannot read plan ${opts.plan}: ${e.message}`);
}
plan.calls ??= [];
plan.invalid ??= [];
plan.forbiddenSubstrings ??= [];

if (!existsSync(path.join(NODE_DEPS, 'node_modules'))) {
  process.stderr.write(`client.mjs: ${NODE_DEPS}/node_modules missing; run testkit/install.sh first\n`);
  process.exit(2);
}
const require = createRequire(path.join(NODE_DEPS, 'package.json'));
const pkgVersion = (name) =>
  JSON.parse(readFileSync(path.join(NODE_DEPS, 'node_modules', name, 'package.json'), 'utf8')).version;

// ---------------------------------------------------------------- SDK loading
let sdk;
if (opts.sdk === 'v1') {
  const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
  const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js');
  const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js');
  sdk = { name: '@modelcontextprotocol/sdk', Client, StdioClientTransport, StreamableHTTPClientTransport };
} else {
  const { Client, StreamableHTTPClientTransport } = require('@modelcontextprotocol/client');
  const { StdioClientTransport } = require('@modelcontextprotocol/client/stdio');
  sdk = { name: '@modelcontextprotocol/client', Client, StdioClientTransport, StreamableHTTPClientTransport };
}
sdk.version = pkgVersion(sdk.name);

// Independent JSON Schema checker (not the SDK's): ajv, dialect from $schema, default 2020-12.
const Ajv07 = require('ajv').default;
const Ajv2019 = require('ajv/dist/2019').default;
const Ajv2020 = require('ajv/dist/2020').default;
const addFormats = require('ajv-formats').default;
const draft06Meta = require('ajv/dist/refs/json-schema-draft-06.json');
function makeAjv(Cls, extra) {
  const ajv = new Cls({ strict: false, allErrors: true, validateSchema: true, ...extra });
  addFormats(ajv);
  return ajv;
}
function dialectOf(schema) {
  const s = typeof schema?.$schema === 'string' ? schema.$schema.replace(/#$/, '') : null;
  if (s === null) return '2020-12';
  if (/json-schema\.org\/draft\/2020-12\/schema$/.test(s)) return '2020-12';
  if (/json-schema\.org\/draft\/2019-09\/schema$/.test(s)) return '2019-09';
  if (/json-schema\.org\/draft-07\/schema$/.test(s)) return 'draft-07';
  if (/json-schema\.org\/draft-06\/schema$/.test(s)) return 'draft-06';
  return `unsupported:${schema.$schema}`;
}
function compileSchema(schema) {
  // Fresh instance per schema so $id collisions between tools cannot interfere.
  const d = dialectOf(schema);
  let ajv;
  if (d === '2020-12') ajv = makeAjv(Ajv2020);
  else if (d === '2019-09') ajv = makeAjv(Ajv2019);
  else if (d === 'draft-07') ajv = makeAjv(Ajv07);
  else if (d === 'draft-06') {
    ajv = makeAjv(Ajv07);
    ajv.addMetaSchema(draft06Meta);
  } else throw new Error(`unsupported JSON Schema dialect ${JSON.stringify(schema.$schema)}`);
  const fn = ajv.compile(schema);
  return { dialect: d, validate: (v) => (fn(v) ? null : ajv.errorsText(fn.errors, { dataVar: 'structuredContent' })) };
}

// ---------------------------------------------------------------- helpers
const failures = [];
let checks = 0;
function check(ok, what, detail) {
  checks++;
  if (!ok) failures.push(detail === undefined ? what : `${what}: ${detail}`);
  return ok;
}
const raw = []; // every JSON-RPC message received from the server, verbatim (parsed)
function getPath(obj, dotted) {
  let cur = obj;
  for (const seg of dotted.split('.')) {
    if (cur === null || typeof cur !== 'object' || !(seg in cur)) return { found: false };
    cur = cur[seg];
  }
  return { found: true, value: cur };
}
const short = (v, n = 300) => {
  const s = typeof v === 'string' ? v : JSON.stringify(v);
  return s === undefined ? String(s) : s.length > n ? `${s.slice(0, n)}…` : s;
};
function errInfo(e) {
  const code = typeof e?.code === 'number' ? e.code : undefined;
  return { code, message: String(e?.message ?? e), name: e?.constructor?.name };
}
// ---------------------------------------------------------------- connect
function splitCommandLine(s) {
  const out = [];
  let cur = '', q = null, any = false;
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (q) {
      if (c === q) q = null;
      else if (c === '\\' && q === '"' && i + 1 < s.length && '"\\$`'.includes(s[i + 1])) cur += s[++i];
      else cur += c;
    } else if (c === '"' || c === "'") { q = c; any = true; }
    else if (c === '\\' && i + 1 < s.length) { cur += s[++i]; any = true; }
    else if (/\s/.test(c)) { if (any || cur) out.push(cur); cur = ''; any = false; }
    else { cur += c; any = true; }
  }
  if (q) throw new Error(`unterminated quote in --stdio command line`);
  if (any || cur) out.push(cur);
  return out;
}

const started = Date.now();
const report = {
  client: 'ts',
  sdk: { name: sdk.name, version: sdk.version },
  transport: opts.stdio ? 'stdio' : 'http',
  target: opts.stdio ?? opts.http,
  requestedProtocol: opts.protocol,
  protocolVersion: null,
  serverInfo: null,
  tools: 0,
  toolPages: 0,
  calls: 0,
  invalidCalls: 0,
  unknownTool: null,
  notes: [],
  checks: 0,
  failures: [],
  ok: false,
  durationMs: 0
};

function finish(code) {
  report.checks = checks;
  report.failures = failures;
  report.ok = failures.length === 0 && code === undefined;
  report.durationMs = Date.now() - started;
  process.stdout.write(JSON.stringify(report) + '\n');
  if (failures.length) {
    process.stderr.write(`\n${failures.length} of ${checks} checks FAILED (${sdk.name} ${sdk.version}, ${report.transport}, protocol ${report.protocolVersion}):\n`);
    for (const f of failures) process.stderr.write(`  ✗ ${f}\n`);
  }
  process.exit(code ?? (failures.length ? 1 : 0));
}

let transport;
if (opts.stdio) {
  const [command, ...args] = splitCommandLine(opts.stdio);
  if (!command) usage('--stdio command line is empty');
  // Pass the full environment through (the SDK default only forwards HOME, PATH, ...).
  transport = new sdk.StdioClientTransport({ command, args, env: { ...process.env }, stderr: 'inherit' });
} else {
  transport = new sdk.StreamableHTTPClientTransport(new URL(opts.http), { requestInit: { headers: opts.headers } });
}
// Capture every inbound JSON-RPC message before the Client sees it.
{
  let handler;
  Object.defineProperty(transport, 'onmessage', {
    configurable: true,
    get: () => handler,
    set: (fn) => {
      handler = fn && ((msg, extra) => {
        raw.push(msg);
        return fn(msg, extra);
      });
    }
  });
}

const clientOptions = { capabilities: {} };
if (opts.sdk === 'v2') {
  clientOptions.versionNegotiation = {
    mode: opts.protocol === 'auto' ? 'auto' : opts.protocol === '2026-07-28' ? { pin: '2026-07-28' } : 'legacy'
  };
}
const client = new sdk.Client({ name: 'fusion-testkit-ts', version: '0.1.0' }, clientOptions);
const reqOpts = { timeout: opts.timeout * 1000 };

try {
  await client.connect(transport, reqOpts);
} catch (e) {
  check(false, 'connect', `${errInfo(e).name}: ${errInfo(e).message}`);
  await client.close().catch(() => {});
  finish(1);
}
report.serverInfo = client.getServerVersion() ?? null;
report.protocolVersion =
  (typeof client.getNegotiatedProtocolVersion === 'function' ? client.getNegotiatedProtocolVersion() : undefined) ??
  transport.protocolVersion ??
  raw.find((m) => m?.result?.protocolVersion)?.result?.protocolVersion ??
  null;
if (opts.protocol !== 'auto')
  check(report.protocolVersion === opts.protocol, 'negotiated protocol version', `wanted ${opts.protocol}, got ${report.protocolVersion}`);

// ---------------------------------------------------------------- tools/list
const tools = new Map();
const validators = new Map(); // tool name -> compiled outputSchema validator (ours)
try {
  if (opts.sdk === 'v1') {
    // v1: listTools(params) returns exactly one page; walk the cursors ourselves.
    let cursor, pages = 0;
    const seenCursors = new Set();
    do {
      const page = await client.listTools(cursor === undefined ? undefined : { cursor }, reqOpts);
      pages++;
      for (const t of page.tools) {
        check(!tools.has(t.name), 'tools/list unique names', `tool ${t.name} listed twice`);
        tools.set(t.name, t);
      }
      cursor = page.nextCursor;
      if (cursor !== undefined) {
        if (!check(!seenCursors.has(cursor), 'tools/list pagination terminates', `cursor ${short(cursor)} repeated`)) break;
        seenCursors.add(cursor);
      }
    } while (cursor !== undefined && pages < 1000);
    report.toolPages = pages;
    if (pages > 1)
      report.notes.push(
        `@modelcontextprotocol/sdk ${sdk.version} replaces its outputSchema cache on every listTools() page: ` +
          `only tools from the LAST page get client-side structuredContent validation`
      );
  } else {
    // v2: listTools() without a cursor walks every page itself (and feeds the
    // client's output-schema cache); count the pages from the raw messages.
    const before = raw.length;
    const all = await client.listTools(undefined, { ...reqOpts, cacheMode: 'refresh' });
    for (const t of all.tools) {
      check(!tools.has(t.name), 'tools/list unique names', `tool ${t.name} listed twice`);
      tools.set(t.name, t);
    }
    report.toolPages = raw.slice(before).filter((m) => m?.result && Array.isArray(m.result.tools)).length;
  }
} catch (e) {
  check(false, 'tools/list', `${errInfo(e).name}: ${errInfo(e).message}`);
}
report.tools = tools.size;
check(tools.size > 0, 'tools/list returns at least one tool', 'no tools listed');
if (plan.callEveryTool) {
  // A tool added to the server but not to the plan would otherwise go untested.
  const called = new Set((plan.calls ?? []).map((c) => c.tool));
  const uncalled = [...tools.keys()].filter((name) => !called.has(name));
  check(uncalled.length === 0, 'plan calls every listed tool', `never called: ${uncalled.join(', ')}`);
}

for (const [name, t] of tools) {
  for (const which of ['inputSchema', 'outputSchema']) {
    const schema = t[which];
    if (schema === undefined) {
      if (which === 'inputSchema') check(false, `${name}.inputSchema`, 'missing');
      continue;
    }
    if (!check(schema !== null && typeof schema === 'object' && !Array.isArray(schema), `${name}.${which} is an object`, short(schema))) continue;
    if (which === 'inputSchema') check(schema.type === 'object', `${name}.inputSchema root type`, `"type" must be "object", got ${short(schema.type)}`);
    if (which === 'outputSchema' && schema.type !== 'object') {
      const msg = `${name}.outputSchema root "type" is ${short(schema.type)}; 2025-11-25 requires "object" (2026-07-28 allows any)`;
      if (report.protocolVersion && report.protocolVersion < '2026-07-28') check(false, msg);
      else report.notes.push(msg);
    }
    try {
      const c = compileSchema(schema);
      checks++;
      if (which === 'outputSchema') validators.set(name, c);
    } catch (e) {
      check(false, `${name}.${which} is a valid JSON Schema (${dialectOf(schema)})`, e.message);
    }
  }
}

// ---------------------------------------------------------------- calls
async function callTool(name, args) {
  const before = raw.length;
  try {
    const result = await client.callTool({ name, arguments: args }, undefined, reqOpts);
    return { result };
  } catch (e) {
    const resp = raw.slice(before).reverse().find((m) => m && 'id' in m && ('result' in m || 'error' in m));
    return { error: e, rawResponse: resp };
  }
}
// The v2 signature is callTool(params, options); v1 is callTool(params, resultSchema, options).
if (opts.sdk === 'v2') {
  const orig = client.callTool.bind(client);
  client.callTool = (params, _schema, o) => orig(params, o);
}

function describeThrow(label, r) {
  const ei = errInfo(r.error);
  let why = `${ei.name}${ei.code !== undefined ? ` ${ei.code}` : ''}: ${ei.message}`;
  if (r.rawResponse?.result) {
    why += ` — the server DID return a result (isError=${r.rawResponse.result.isError ?? false}); the ${sdk.name} client threw on it`;
  } else if (r.rawResponse?.error) {
    why += ` — server sent JSON-RPC error ${r.rawResponse.error.code}`;
  }
  return `${label}: ${why}`;
}

for (const [i, c] of plan.calls.entries()) {
  report.calls++;
  const label = `calls[${i}] ${c.tool}(${short(c.arguments ?? {}, 120)})`;
  const expectErr = c.isError ?? false;
  const r = await callTool(c.tool, c.arguments ?? {});
  if (r.error) {
    check(false, describeThrow(label, r));
    continue;
  }
  const res = r.result;
  check((res.isError ?? false) === expectErr, `${label} isError`, `expected ${expectErr}, got ${res.isError ?? false} ${short(res.content)}`);
  const v = validators.get(c.tool);
  if (v && !res.isError) {
    if (check(res.structuredContent !== undefined, `${label} structuredContent present (tool has outputSchema)`, 'missing')) {
      const err = v.validate(res.structuredContent);
      check(err === null, `${label} structuredContent matches outputSchema`, err);
    }
  }
  if (v && res.isError && res.structuredContent !== undefined && v.validate(res.structuredContent) !== null) {
    report.notes.push(`${c.tool}: isError result carries structuredContent that does not match the outputSchema (accepted by ${sdk.name} ${sdk.version})`);
  }
  for (const [p, want] of Object.entries(c.expect ?? {})) {
    const got = getPath(res, p);
    check(got.found && isDeepStrictEqual(got.value, want), `${label} expect ${p}`, got.found ? `expected ${short(want)}, got ${short(got.value)}` : `expected ${short(want)}, path missing`);
  }
}

for (const [i, c] of plan.invalid.entries()) {
  report.invalidCalls++;
  const label = `invalid[${i}] ${c.tool}(${short(c.arguments ?? {}, 120)})`;
  const r = await callTool(c.tool, c.arguments ?? {});
  if (r.error) {
    const rr = r.rawResponse;
    if (rr?.error) check(false, `${label}: expected a result with isError:true, got JSON-RPC error ${rr.error.code} ${short(rr.error.message)}`);
    else check(false, describeThrow(label, r));
    continue;
  }
  check(r.result.isError === true, `${label} returns isError:true`, `got isError=${r.result.isError} ${short(r.result.content)}`);
}

if (plan.unknownTool) {
  const label = `unknownTool ${plan.unknownTool}`;
  const r = await callTool(plan.unknownTool, {});
  if (r.error) {
    const ei = errInfo(r.error);
    const rr = r.rawResponse;
    report.unknownTool = { code: rr?.error?.code ?? ei.code ?? null, message: rr?.error?.message ?? ei.message, sdkError: ei.name };
    check(!!rr?.error, `${label} yields a JSON-RPC error`, `the client threw ${ei.name}: ${ei.message} but no JSON-RPC error response was seen`);
  } else {
    report.unknownTool = { result: r.result };
    check(false, `${label} yields a JSON-RPC error`, `got a result instead (isError=${r.result.isError ?? false})`);
  }
}

// ---------------------------------------------------------------- forbidden substrings
for (const s of plan.forbiddenSubstrings) {
  const hits = raw.filter((m) => JSON.stringify(m).includes(s) || JSON.stringify(JSON.stringify(m)).includes(s));
  check(hits.length === 0, `forbidden substring ${JSON.stringify(s)} absent from all responses`, `found in ${hits.length} message(s), e.g. ${short(hits[0], 200)}`);
}

await client.close().catch(() => {});
finish();
