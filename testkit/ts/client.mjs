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
// Which client this is, for a plan step's `when.client`.
const CLIENT_ID = opts.sdk === 'v1' ? 'ts-v1' : 'ts-v2';
const ELICITATION_ACTIONS = ['accept', 'decline', 'cancel'];
{
  // A plan mistake is a usage error (exit 2), not a failed check.
  const steps = [
    ...plan.calls.map((s, i) => [`calls[${i}]`, s]),
    ...plan.invalid.map((s, i) => [`invalid[${i}]`, s]),
    ...(plan.resources?.read ?? []).map((s, i) => [`resources.read[${i}]`, s]),
    ...(plan.prompts?.get ?? []).map((s, i) => [`prompts.get[${i}]`, s]),
    ...(plan.completions ?? []).map((s, i) => [`completions[${i}]`, s])
  ];
  for (const [where, s] of [['resources.list', plan.resources?.list], ['resources.templates', plan.resources?.templates], ['prompts.list', plan.prompts?.list]])
    if (s !== null && typeof s === 'object') steps.push([where, s]);
  const answer = (a, where) => {
    if (a === null || typeof a !== 'object' || !ELICITATION_ACTIONS.includes(a.action))
      usage(`plan ${where}: needs "action": one of ${ELICITATION_ACTIONS.join(', ')}`);
  };
  if (plan.elicitation !== undefined) answer(plan.elicitation, 'elicitation');
  for (const [where, s] of steps) {
    if (s.when !== undefined) {
      const w = s.when;
      const bad = Object.keys(w).filter((k) => !['protocol', 'client'].includes(k));
      if (bad.length || (w.protocol && !Array.isArray(w.protocol)) || (w.client && !Array.isArray(w.client)))
        usage(`plan ${where}.when: only "protocol" and "client" lists are allowed`);
      if (typeof s.because !== 'string' || !s.because.trim())
        usage(`plan ${where}: a step with "when" must say "because" (it is reported when skipped)`);
    }
    if (s.elicitation !== undefined) {
      if (plan.elicitation === undefined) usage(`plan ${where}.elicitation: the plan has no top-level "elicitation" (the capability is declared only then)`);
      answer(s.elicitation, `${where}.elicitation`);
    }
  }
}

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
// Dotted path into a value: object keys, array indices, `@json` parses the string found so far,
// `@len` is the length of an array or string (key count of an object).
function getPath(obj, dotted) {
  let cur = obj;
  for (const seg of dotted.split('.')) {
    if (seg === '@json') {
      if (typeof cur !== 'string') return { found: false };
      try {
        cur = JSON.parse(cur);
      } catch {
        return { found: false };
      }
    } else if (seg === '@len') {
      if (Array.isArray(cur) || typeof cur === 'string') cur = cur.length;
      else if (cur !== null && typeof cur === 'object') cur = Object.keys(cur).length;
      else return { found: false };
    } else if (Array.isArray(cur)) {
      if (!/^\d+$/.test(seg) || Number(seg) >= cur.length) return { found: false };
      cur = cur[Number(seg)];
    } else if (cur !== null && typeof cur === 'object' && Object.prototype.hasOwnProperty.call(cur, seg)) {
      cur = cur[seg];
    } else return { found: false };
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
  // Added with the resources / prompts / completions / elicitation sections (0 when unused).
  resources: 0,
  resourcePages: 0,
  resourceTemplates: 0,
  resourceTemplatePages: 0,
  reads: 0,
  prompts: 0,
  promptPages: 0,
  promptGets: 0,
  completions: 0,
  elicitations: [], // every question the server asked: {step, message, via, action}
  skipped: 0, // plan steps whose `when` excluded this client/era (each also a note)
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

// Elicitation: with a plan-level `elicitation` answer the client declares the capability and
// answers every question with the current step's answer (the step's own `elicitation`, else
// the plan's), recording what it was asked. On 2025-11-25 the question is an
// `elicitation/create` request; on 2026-07-28 an `input_required` tools/call result, which the
// v2 client fulfils through the same registered handler and retries with `requestState`.
const elicited = []; // {message, requestedSchema, mode, via, action}
let currentAnswer = plan.elicitation;
const clientOptions = { capabilities: plan.elicitation ? { elicitation: { form: {} } } : {} };
if (opts.sdk === 'v2') {
  clientOptions.versionNegotiation = {
    mode: opts.protocol === 'auto' ? 'auto' : opts.protocol === '2026-07-28' ? { pin: '2026-07-28' } : 'legacy'
  };
}
const client = new sdk.Client({ name: 'fusion-testkit-ts', version: '0.1.0' }, clientOptions);
const reqOpts = { timeout: opts.timeout * 1000 };

if (plan.elicitation) {
  const answerElicitation = async (request, extra) => {
    const params = request.params ?? {};
    // How the question came: a JSON-RPC request on the wire, or an entry of an input_required
    // result (the v2 driver's context id is then the inputRequests key). The request id is
    // extra.requestId in v1, ctx.mcpReq.id in v2.
    const id = extra?.requestId ?? extra?.mcpReq?.id ?? request.id;
    let via = 'unknown';
    if (raw.some((m) => m?.method === 'elicitation/create' && m.id === id)) via = 'elicitation/create';
    else if (raw.some((m) => m?.result?.resultType === 'input_required' && m.result.inputRequests?.[id] !== undefined)) via = 'input_required';
    const answer = currentAnswer;
    elicited.push({ message: params.message, requestedSchema: params.requestedSchema, mode: params.mode ?? 'form', via, action: answer.action });
    return answer.action === 'accept' ? { action: 'accept', content: answer.content ?? {} } : { action: answer.action };
  };
  if (opts.sdk === 'v1') {
    const { ElicitRequestSchema } = require('@modelcontextprotocol/sdk/types.js');
    client.setRequestHandler(ElicitRequestSchema, answerElicitation);
  } else {
    client.setRequestHandler('elicitation/create', answerElicitation);
  }
}

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

// ---------------------------------------------------------------- plan steps
// A step with `when` runs only for the listed protocol versions / clients; otherwise it is
// skipped, counted and reported in a note with its `because`. `byProtocol[<negotiated>]` is
// merged over the step (objects such as `expect` or `error` key by key).
function resolveStep(step, label) {
  const w = step.when;
  if (w && ((w.protocol && !w.protocol.includes(report.protocolVersion)) || (w.client && !w.client.includes(CLIENT_ID)))) {
    report.skipped++;
    report.notes.push(`skipped ${label}: ${step.because} (runs only for ${JSON.stringify(w)}; this run: ${CLIENT_ID}, ${report.protocolVersion})`);
    return null;
  }
  const over = step.byProtocol?.[report.protocolVersion];
  if (!over) return step;
  const merged = { ...step };
  for (const [k, v] of Object.entries(over)) {
    const plain = (x) => x !== null && typeof x === 'object' && !Array.isArray(x);
    merged[k] = plain(v) && plain(step[k]) ? { ...step[k], ...v } : v;
  }
  return merged;
}

function checkExpect(label, obj, expect, contains) {
  for (const [p, want] of Object.entries(expect ?? {})) {
    const got = getPath(obj, p);
    check(got.found && isDeepStrictEqual(got.value, want), `${label} expect ${p}`, got.found ? `expected ${short(want)}, got ${short(got.value)}` : `expected ${short(want)}, path missing`);
  }
  for (const [p, subs] of Object.entries(contains ?? {})) {
    const got = getPath(obj, p);
    for (const sub of [].concat(subs)) {
      check(got.found && typeof got.value === 'string' && got.value.includes(sub), `${label} expectContains ${p}`,
        got.found ? `${short(sub)} not in ${short(got.value)}` : `expected a string containing ${short(sub)}, path missing`);
    }
  }
}

// Runs one SDK request; on a throw, also the raw JSON-RPC response it answered (if any).
async function attempt(fn) {
  const before = raw.length;
  try {
    return { result: await fn() };
  } catch (e) {
    const resp = raw.slice(before).reverse().find((m) => m && 'id' in m && ('result' in m || 'error' in m));
    return { error: e, rawResponse: resp };
  }
}

// A step whose `error` is set must end in a JSON-RPC error (paths into {code, message, data}
// of the raw error, `errorContains` for substrings); otherwise in a result (`expect`,
// `expectContains` paths into it, as the SDK returns it). Returns the result, if any.
function checkOutcome(label, step, r) {
  if (step.error !== undefined) {
    if (!r.error) {
      check(false, `${label} yields a JSON-RPC error`, `got a result instead: ${short(r.result)}`);
      return undefined;
    }
    const rr = r.rawResponse;
    if (!check(!!rr?.error, `${label} yields a JSON-RPC error`, `the client threw ${errInfo(r.error).name}: ${errInfo(r.error).message} but no JSON-RPC error response was seen`))
      return undefined;
    checkExpect(`${label} error`, rr.error, step.error === true ? {} : step.error, step.errorContains);
    return undefined;
  }
  if (r.error) {
    check(false, describeThrow(label, r));
    return undefined;
  }
  checkExpect(label, r.result, step.expect, step.expectContains);
  return r.result;
}

// What the server asked during one step: the era's mechanism, and the step's `expectElicitation`
// ({count, expect, expectContains}, paths into the list of questions {message, requestedSchema, mode}).
function checkElicitation(label, step, from) {
  const asked = elicited.slice(from);
  const era = report.protocolVersion;
  for (const [i, q] of asked.entries()) {
    report.elicitations.push({ step: label.split(' ')[0], message: q.message, via: q.via, action: q.action });
    const want = era && era >= '2026-07-28' ? 'input_required' : 'elicitation/create';
    check(q.via === want, `${label} elicitation[${i}] arrives as ${want} on ${era}`, `it arrived as ${q.via}`);
  }
  const e = step.expectElicitation;
  if (e === undefined) return;
  if (e.count !== undefined) check(asked.length === e.count, `${label} elicitation count`, `expected ${e.count} question(s), the server asked ${asked.length}: ${short(asked.map((q) => q.message))}`);
  checkExpect(`${label} elicitation`, asked, e.expect, e.expectContains);
}

// Walks a list method's pages: v1 (and a v2 single page) with explicit cursors, v2 through its
// own aggregating walk (pages counted from the raw messages). Returns {items, pages}.
async function listAll(method, key) {
  const fn = { 'resources/list': 'listResources', 'resources/templates/list': 'listResourceTemplates', 'prompts/list': 'listPrompts' }[method];
  if (opts.sdk === 'v2') {
    const before = raw.length;
    const all = await client[fn](undefined, { ...reqOpts, cacheMode: 'refresh' });
    return { items: all[key], pages: raw.slice(before).filter((m) => m?.result && Array.isArray(m.result[key])).length };
  }
  const items = [];
  const seen = new Set();
  let cursor, pages = 0;
  do {
    const page = await client[fn](cursor === undefined ? undefined : { cursor }, reqOpts);
    pages++;
    items.push(...page[key]);
    cursor = page.nextCursor;
    if (cursor !== undefined) {
      if (!check(!seen.has(cursor), `${method} pagination terminates`, `cursor ${short(cursor)} repeated`)) break;
      seen.add(cursor);
    }
  } while (cursor !== undefined && pages < 1000);
  return { items, pages };
}

// One listing with its checks: unique identities, and the step's `count`, `expect`,
// `expectContains` (paths into {<key>: [all items]}).
async function listStep(label, step, method, key, id) {
  const s = step === true ? {} : resolveStep(step, label);
  if (!s) return;
  const r = await attempt(() => listAll(method, key));
  if (r.error) {
    check(false, describeThrow(label, r));
    return;
  }
  const { items, pages } = r.result;
  const ids = items.map((x) => x[id]);
  const dup = ids.filter((x, i) => ids.indexOf(x) !== i);
  check(dup.length === 0, `${label} unique ${id}s`, `listed twice: ${dup.join(', ')}`);
  if (s.count !== undefined) check(items.length === s.count, `${label} count`, `expected ${s.count}, got ${items.length}: ${short(ids)}`);
  checkExpect(label, { [key]: items }, s.expect, s.expectContains);
  return { items, pages };
}

function needsCapability(name) {
  const caps = client.getServerCapabilities() ?? {};
  check(caps[name] !== undefined, `server declares the ${name} capability`, `capabilities: ${short(caps)}`);
}

// ---------------------------------------------------------------- resources
if (plan.resources) {
  needsCapability('resources');
  if (plan.resources.list !== undefined) {
    const l = await listStep('resources/list', plan.resources.list, 'resources/list', 'resources', 'uri');
    if (l) [report.resources, report.resourcePages] = [l.items.length, l.pages];
  }
  if (plan.resources.templates !== undefined) {
    const l = await listStep('resources/templates/list', plan.resources.templates, 'resources/templates/list', 'resourceTemplates', 'uriTemplate');
    if (l) [report.resourceTemplates, report.resourceTemplatePages] = [l.items.length, l.pages];
  }
  for (const [i, step] of (plan.resources.read ?? []).entries()) {
    const label = `resources.read[${i}] ${step.uri}`;
    const s = resolveStep(step, label);
    if (!s) continue;
    report.reads++;
    const r = await attempt(() => (opts.sdk === 'v2' ? client.readResource({ uri: s.uri }, { ...reqOpts, cacheMode: 'bypass' }) : client.readResource({ uri: s.uri }, reqOpts)));
    const res = checkOutcome(label, s, r);
    if (res) {
      // Every content item names the URI read (the server may add more items of that URI).
      const uris = (res.contents ?? []).map((c) => c.uri);
      check(uris.length > 0 && uris.every((u) => u === s.uri), `${label} contents carry the URI read`, short(uris));
    }
  }
}

// ---------------------------------------------------------------- prompts
if (plan.prompts) {
  needsCapability('prompts');
  if (plan.prompts.list !== undefined) {
    const l = await listStep('prompts/list', plan.prompts.list, 'prompts/list', 'prompts', 'name');
    if (l) [report.prompts, report.promptPages] = [l.items.length, l.pages];
  }
  for (const [i, step] of (plan.prompts.get ?? []).entries()) {
    const label = `prompts.get[${i}] ${step.name}(${short(step.arguments ?? {}, 120)})`;
    const s = resolveStep(step, label);
    if (!s) continue;
    report.promptGets++;
    const params = { name: s.name, ...(s.arguments !== undefined && { arguments: s.arguments }) };
    checkOutcome(label, s, await attempt(() => client.getPrompt(params, reqOpts)));
  }
}

// ---------------------------------------------------------------- completions
if (plan.completions?.length) {
  needsCapability('completions');
  for (const [i, step] of plan.completions.entries()) {
    const label = `completions[${i}] ${step.ref?.name ?? step.ref?.uri} ${step.argument?.name}=${short(step.argument?.value)}`;
    const s = resolveStep(step, label);
    if (!s) continue;
    report.completions++;
    const params = { ref: s.ref, argument: s.argument, ...(s.context !== undefined && { context: s.context }) };
    checkOutcome(label, s, await attempt(() => client.complete(params, reqOpts)));
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
    const isError = r.rawResponse.result.isError;
    why += ` — the server DID return a result${isError !== undefined ? ` (isError=${isError})` : ''}; the ${sdk.name} client threw on it`;
  } else if (r.rawResponse?.error) {
    why += ` — server sent JSON-RPC error ${r.rawResponse.error.code}`;
  }
  return `${label}: ${why}`;
}

for (const [i, step] of plan.calls.entries()) {
  const label = `calls[${i}] ${step.tool}(${short(step.arguments ?? {}, 120)})`;
  const c = resolveStep(step, label);
  if (!c) continue;
  report.calls++;
  const expectErr = c.isError ?? false;
  currentAnswer = c.elicitation ?? plan.elicitation;
  const asked = elicited.length;
  const r = await callTool(c.tool, c.arguments ?? {});
  checkElicitation(label, c, asked);
  if (c.error !== undefined) {
    // A call the protocol answers with a JSON-RPC error (a missing client capability on
    // 2026-07-28, say), not with a tool result.
    checkOutcome(label, c, r);
    continue;
  }
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
  checkExpect(label, res, c.expect, c.expectContains);
}

for (const [i, step] of plan.invalid.entries()) {
  const label = `invalid[${i}] ${step.tool}(${short(step.arguments ?? {}, 120)})`;
  const c = resolveStep(step, label);
  if (!c) continue;
  report.invalidCalls++;
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
