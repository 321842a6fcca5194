// An OpenID provider (oidc-provider) on 127.0.0.1 for the tests of `mcs-host serve --http`.
//
//   node provider.mjs --port PORT --keys FILE [--issuer URL]
//
// --port 0 lets the system choose. --keys names a JSON file holding a list of private JWKs:
// all are published at jwks_uri, the first RS256 one signs. --issuer sets the issuer URL the
// provider names itself by (default http://127.0.0.1:PORT). Once listening it prints one JSON
// line on stdout, {"issuer": ..., "port": ...}, and nothing else there; everything else goes
// to stderr. It exits when its standard input closes, on SIGTERM and on SIGINT.
//
// Clients (static, confidential, client_credentials only; client_secret_basic or _post):
// mcs-test, whose access tokens live 300 s, and mcs-short, whose access tokens live 1 s.
// Any http(s) URL is accepted as an RFC 8707 resource and becomes the token's audience; the
// token is then an RFC 9068 JWT (typ at+jwt, RS256) whose scope is the requested scopes among
// SCOPES. A token request without a resource is refused (invalid_target).
//
// tests/system/_oidc.py runs it from a copy beside the node_modules it installs from
// package-lock.json. By hand: `npm ci` in this directory (node_modules is not committed).
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

// oidc-provider prints its notices with console.info, onto stdout: keep stdout for our line.
console.info = (...args) => console.error(...args);
const { default: Provider, errors } = await import('oidc-provider');

const SCOPES = 'mcs:call csv:read csv:write files:read mcs:metrics';
const CLIENTS = [
  { id: 'mcs-test', secret: 'mcs-test-secret-7f3a9c1e5b', ttl: 300 },
  { id: 'mcs-short', secret: 'mcs-short-secret-2d8e4b6a1f', ttl: 1 },
];

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '0' },
    keys: { type: 'string' },
    issuer: { type: 'string' },
  },
});
if (!values.keys) {
  console.error('provider.mjs: --keys FILE is required');
  process.exit(2);
}
const keys = JSON.parse(readFileSync(values.keys, 'utf8'));

const ttlOf = (client) => CLIENTS.find((c) => c.id === client?.clientId)?.ttl ?? 300;

const configuration = {
  clients: CLIENTS.map((c) => ({
    client_id: c.id,
    client_secret: c.secret,
    grant_types: ['client_credentials'],
    response_types: [],
    redirect_uris: [],
    token_endpoint_auth_method: 'client_secret_basic',
    scope: SCOPES,
  })),
  jwks: { keys },
  scopes: SCOPES.split(' '),
  cookies: { keys: ['mcs-host-test-cookie-key'] },
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: async () => {
        throw new errors.InvalidTarget('a resource parameter (RFC 8707) is required');
      },
      useGrantedResource: async () => true,
      getResourceServerInfo: async (_ctx, resourceIndicator, client) => {
        const { protocol } = new URL(resourceIndicator);
        if (protocol !== 'http:' && protocol !== 'https:') {
          throw new errors.InvalidTarget('the resource must be an http or https URL');
        }
        return {
          scope: SCOPES,
          audience: resourceIndicator,
          accessTokenFormat: 'jwt',
          accessTokenTTL: ttlOf(client),
          jwt: { sign: { alg: 'RS256' } },
        };
      },
    },
  },
  ttl: {
    AccessToken: (_ctx, token, client) => token.resourceServer?.accessTokenTTL ?? ttlOf(client),
    ClientCredentials: (_ctx, token, client) =>
      token.resourceServer?.accessTokenTTL ?? ttlOf(client),
  },
  renderError: async (ctx, out) => {
    ctx.type = 'json';
    ctx.body = out;
  },
};

const port = Number(values.port);
// With --port 0 the issuer (which names the port) is known only once listening: bind first.
const { createServer } = await import('node:http');
const server = createServer();
await new Promise((resolve, reject) => {
  server.once('error', reject);
  server.listen(port, '127.0.0.1', resolve);
});
const bound = server.address().port;
const issuer = (values.issuer ?? `http://127.0.0.1:${bound}`).replace(/\/+$/, '');
const provider = new Provider(issuer, configuration);
provider.on('server_error', (_ctx, err) => console.error('server_error', err));
server.on('request', provider.callback());

function stop() {
  server.close();
  server.closeAllConnections();
  process.exit(0);
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
process.stdin.on('end', stop);
process.stdin.on('close', stop);
process.stdin.resume();

process.stdout.write(`${JSON.stringify({ issuer, port: bound })}\n`);
