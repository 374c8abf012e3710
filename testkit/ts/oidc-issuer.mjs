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
//   `gateway` / `gateway-secret`: the same, and token exchange (RFC 8693, see below).
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
const { generateKeyPair, exportJWK, jwtVerify, SignJWT } = await load('jose');
const { default: Provider, errors } = await load('oidc-provider');

const { values: args } = parseArgs({
  options: {
    tenant: { type: 'string', default: 't_777' },
    subject: { type: 'string', default: 'alice' },
  },
});

// The scopes a resource may be granted; billing knows `billing:write`.
const SCOPES = ['billing:read', 'billing:write'];

const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true });
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

const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: 'service',
      client_secret: 'service-secret',
      grant_types: ['client_credentials'],
      redirect_uris: [],
      response_types: [],
    },
    {
      client_id: 'user-app',
      token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code'],
      redirect_uris: ['http://127.0.0.1/callback'],
      response_types: ['code'],
    },
    {
      client_id: 'gateway',
      client_secret: 'gateway-secret',
      grant_types: ['client_credentials', TOKEN_EXCHANGE],
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

// Token exchange (RFC 8693), which oidc-provider 9 does not implement: an authenticated client
// (the gateway) trades a user's access token that this server issued for a JWT access token for
// one other resource, naming the user (`sub`) and the client as the actor (`act`, §4.1). The
// subject token must be an access token issued to a person (a client_credentials token, an
// expired, revoked or foreign one is `invalid_grant`); the scopes asked for must be among the
// subject token's.
async function tokenExchange(ctx) {
  const { params, client } = ctx.oidc;
  if (params.subject_token_type !== ACCESS_TOKEN_TYPE) {
    throw new errors.InvalidRequest('subject_token_type must be an access token');
  }
  if (params.actor_token) {
    throw new errors.InvalidRequest('actor tokens are not supported; the client is the actor');
  }
  let subject;
  try {
    ({ payload: subject } = await jwtVerify(params.subject_token, publicKey, { issuer }));
  } catch {
    throw new errors.InvalidGrant('the subject token is not a valid access token of this server');
  }
  // Signed by this server is not enough: it must be an access token issued to a person (the
  // authorization code grant's), not a client_credentials token or an exchanged one.
  // oidc-provider does not store JWT access tokens, so the issued ones are remembered here.
  if (!peoplesTokens.has(subject.jti) || subject.sub === undefined) {
    throw new errors.InvalidGrant('the subject token is not an exchangeable access token');
  }
  const resources = [params.resource, params.audience].flat().filter(Boolean);
  if (resources.length !== 1) {
    throw new errors.InvalidTarget('name exactly one resource or audience');
  }
  const resource = resourceServer(resources[0]);
  const held = new Set(String(subject.scope ?? '').split(' ').filter(Boolean));
  const asked = params.scope ? params.scope.split(' ').filter(Boolean) : [...held];
  const unheld = asked.filter((scope) => !held.has(scope) || !resource.scope.split(' ').includes(scope));
  if (unheld.length) {
    throw new errors.InvalidScope(`the subject token does not hold ${unheld.join(' ')}`);
  }
  const now = Math.floor(Date.now() / 1000);
  const expiresIn = Math.max(1, Math.min(resource.accessTokenTTL, subject.exp - now));
  const claims = {
    client_id: client.clientId,
    act: { sub: client.clientId },
    tenant: subject.tenant,
    ...(asked.length ? { scope: asked.join(' ') } : {}),
  };
  const accessToken = await new SignJWT(claims)
    .setProtectedHeader({ alg: 'RS256', kid: signingKey.kid, typ: 'at+jwt' })
    .setIssuer(issuer)
    .setSubject(subject.sub)
    .setAudience(resources[0])
    .setIssuedAt(now)
    .setExpirationTime(now + expiresIn)
    .setJti(crypto.randomUUID())
    .sign(privateKey);
  ctx.body = {
    access_token: accessToken,
    issued_token_type: ACCESS_TOKEN_TYPE,
    token_type: 'Bearer',
    expires_in: expiresIn,
    ...(asked.length ? { scope: asked.join(' ') } : {}),
  };
}
const peoplesTokens = new Set();
provider.on('access_token.issued', (token) => {
  if (token.accountId) peoplesTokens.add(token.jti);
});
provider.registerGrantType(
  TOKEN_EXCHANGE,
  tokenExchange,
  ['subject_token', 'subject_token_type', 'actor_token', 'actor_token_type', 'requested_token_type',
    'resource', 'audience', 'scope'],
  ['resource', 'audience'],
);

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

// A person's access token without the browser dance (which the official clients' tests go
// through): `POST /test/access-token` with a form `sub`, `resource` and `scope` answers
// `{access_token}`, a token of the provider's own (stored, revocable, as the authorization code
// grant issues it) to the dynamically-registrable `user-app` client. Token exchange tests need
// two people's tokens; the login flow adds nothing to what they prove.
async function personsToken(req, res) {
  let body = '';
  for await (const chunk of req) body += chunk;
  const form = new URLSearchParams(body);
  const client = await provider.Client.find('user-app');
  const token = new provider.AccessToken({
    accountId: form.get('sub'),
    client,
    gty: 'authorization_code',
    scope: form.get('scope') || undefined,
    extra: { tenant: form.get('tenant') || args.tenant },
  });
  token.resourceServer = resourceServer(form.get('resource'));
  const accessToken = await token.save();
  res.setHeader('content-type', 'application/json');
  res.end(JSON.stringify({ access_token: accessToken }));
}

const callback = provider.callback();
server.on('request', (req, res) => {
  if (req.url === '/test/access-token' && req.method === 'POST') {
    personsToken(req, res).catch((error) => {
      res.statusCode = 400;
      res.end(`no token: ${error.message}`);
    });
    return;
  }
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
