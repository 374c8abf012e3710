// A real OAuth 2.1 authorization server for the tests: `oidc-provider` (OpenID certified),
// configured the way an MCP deployment uses one: dynamic client registration, authorization
// code with PKCE (required), resource indicators (RFC 8707) with JWT access tokens whose
// audience is the requested resource, and the client_credentials grant for service clients.
//
//   node testkit/ts/oidc-issuer.mjs [--tenant t_777] [--subject alice]
//
// Prints `oidc-issuer: listening on http://127.0.0.1:PORT` on stderr (the line the test
// harness waits for, as for Fusion's servers), then serves until killed, for 10 minutes at most
// (so it never outlives a test run that could not kill it).
//
// What stands in for a person: the login and consent screens. Every interaction is approved at
// once for `--subject`, granting exactly the scopes and resources the client asked for, through
// the provider's own interaction API (interactionDetails / Grant / interactionFinished). The
// client still has to follow the redirects and carry the cookies like a browser.
//
// Statically registered clients (for client_credentials):
//   `service` / `service-secret`: may get tokens for any resource, any scope of SCOPES.
import http from 'node:http';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

// The packages live in .test-deps/node (testkit/install.sh), not next to this script.
const HERE = path.dirname(fileURLToPath(import.meta.url));
const DEPS = process.env.FUSION_TEST_DEPS
  ? path.resolve(process.env.FUSION_TEST_DEPS)
  : path.resolve(HERE, '..', '..', '.test-deps');
const require = createRequire(path.join(DEPS, 'node', 'package.json'));
const load = (name) => import(pathToFileURL(require.resolve(name)).href);
const { generateKeyPair, exportJWK } = await load('jose');
const { default: Provider, errors } = await load('oidc-provider');

const { values: args } = parseArgs({
  options: {
    tenant: { type: 'string', default: 't_777' },
    subject: { type: 'string', default: 'alice' },
  },
});

// The scopes a resource may be granted; billing knows `billing:write`.
const SCOPES = ['billing:read', 'billing:write'];

const { privateKey } = await generateKeyPair('RS256', { extractable: true });
const signingKey = { ...(await exportJWK(privateKey)), kid: 'test-rs256', alg: 'RS256', use: 'sig' };

const server = http.createServer();
// Clients pool their connections to the issuer: node's 5 s keep-alive default could close one
// under a request on a loaded machine.
server.keepAliveTimeout = 60_000;
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;

// Any absolute http(s) URI is a resource this server issues tokens for: the tests pick the
// resource (the MCP server's URL, or another server's for the wrong-audience case).
function resourceServer(resource) {
  let url;
  try {
    url = new URL(resource);
  } catch {
    throw new errors.InvalidTarget('the resource is not an absolute URI');
  }
  if (url.hash || !['http:', 'https:'].includes(url.protocol)) {
    throw new errors.InvalidTarget('the resource must be an http(s) URI without a fragment');
  }
  return {
    scope: SCOPES.join(' '),
    audience: resource,
    accessTokenFormat: 'jwt',
    accessTokenTTL: 600,
    jwt: { sign: { alg: 'RS256' } },
  };
}

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: 'service',
      client_secret: 'service-secret',
      grant_types: ['client_credentials'],
      redirect_uris: [],
      response_types: [],
    },
  ],
  jwks: { keys: [signingKey] },
  cookies: { keys: ['fusion-test-cookie-key'] },
  scopes: ['openid', 'offline_access', ...SCOPES],
  pkce: { required: () => true },
  features: {
    devInteractions: { enabled: false },
    registration: { enabled: true },
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      // A token is always for one resource: the one the client named.
      defaultResource: (_ctx, _client, oneOf) => (oneOf ? oneOf[0] : undefined),
      useGrantedResource: () => true,
      getResourceServerInfo: (_ctx, resource) => resourceServer(resource),
    },
  },
  interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
  findAccount: (_ctx, sub) => ({ accountId: sub, claims: () => ({ sub }) }),
  // The tenant the MCP server scopes data by, in every access token.
  extraTokenClaims: () => ({ tenant: args.tenant }),
  clientBasedCORS: () => true,
});

// The "user" approves everything the client asked for.
async function interact(req, res) {
  const details = await provider.interactionDetails(req, res);
  const { prompt, params } = details;
  if (prompt.name === 'login') {
    await provider.interactionFinished(req, res, { login: { accountId: args.subject } }, {
      mergeWithLastSubmission: false,
    });
    return;
  }
  const grant = details.grantId
    ? await provider.Grant.find(details.grantId)
    : new provider.Grant({ accountId: details.session.accountId, clientId: params.client_id });
  const missing = prompt.details;
  if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
  if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
  for (const [resource, scopes] of Object.entries(missing.missingResourceScopes ?? {})) {
    grant.addResourceScope(resource, scopes.join(' '));
  }
  const grantId = await grant.save();
  await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
}

const callback = provider.callback();
server.on('request', (req, res) => {
  if (req.url.startsWith('/interaction/')) {
    interact(req, res).catch((error) => {
      res.statusCode = 500;
      res.end(`interaction failed: ${error.message}`);
    });
    return;
  }
  callback(req, res);
});

console.error(`oidc-issuer: listening on ${issuer}`);
setTimeout(() => process.exit(0), 10 * 60 * 1000);
