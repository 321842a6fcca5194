// An MCP client built on the TypeScript SDK (@modelcontextprotocol/sdk), for the tests of
// `mcs-host serve --http`.
//
//   node ts_client.mjs URL [AUTH] list
//   node ts_client.mjs URL [AUTH] call NAME JSON_ARGS
//
// AUTH is one of:
//   --token TOKEN                sent as "Authorization: Bearer TOKEN" on every request;
//   --client-id ID --client-secret SECRET [--scope SCOPE] [--issuer ISSUER]
//                                the SDK's ClientCredentialsProvider: on a 401 the SDK reads
//                                the server's protected resource metadata, discovers its
//                                authorization server and fetches a token (client_credentials,
//                                client_secret_basic, with the resource); --issuer is passed
//                                as expectedIssuer, so the credentials go only to that server.
//                                The SDK (1.32.2) requests exactly --scope for this grant (none
//                                without it): not the scope of WWW-Authenticate or of the
//                                metadata's scopes_supported, and a 403 insufficient_scope
//                                gets the same scope again, then fails.
// No AUTH: no Authorization header.
//
// Prints one JSON line on stdout and nothing else there:
//   list -> {"tools": [name, ...]}
//   call -> {"isError": bool, "text": "text contents joined by newlines", "structured": ...}
//   failure -> {"error": "message", "status": HTTP status or null, "code": JSON-RPC code
//              or null}, and exit status 1. "status" is the MCP endpoint's (a failure at the
//              authorization server reports the endpoint's 401 that led there).
//
// tests/system/_oidc.py runs it from a copy beside the node_modules it installs from
// package-lock.json. By hand: `npm ci` in this directory (node_modules is not committed).
import { parseArgs } from 'node:util';

// Keep stdout for the one JSON line.
console.log = (...args) => console.error(...args);
console.info = (...args) => console.error(...args);

const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport, StreamableHTTPError } = await import(
  '@modelcontextprotocol/sdk/client/streamableHttp.js'
);
const { ClientCredentialsProvider } = await import(
  '@modelcontextprotocol/sdk/client/auth-extensions.js'
);
const { UnauthorizedError } = await import('@modelcontextprotocol/sdk/client/auth.js');
const { McpError } = await import('@modelcontextprotocol/sdk/types.js');

function emit(value) {
  process.stdout.write(`${JSON.stringify(value)}\n`);
}

function fail(message, status = null, code = null) {
  emit({ error: message, status, code });
  process.exit(1);
}

let parsed;
try {
  parsed = parseArgs({
    allowPositionals: true,
    options: {
      token: { type: 'string' },
      'client-id': { type: 'string' },
      'client-secret': { type: 'string' },
      scope: { type: 'string' },
      issuer: { type: 'string' },
    },
  });
} catch (err) {
  fail(`usage: ${err.message}`);
}
const { values, positionals } = parsed;
const [url, action, ...rest] = positionals;
if (!url || !['list', 'call'].includes(action) || (action === 'call' && rest.length !== 2)) {
  fail('usage: ts_client.mjs URL [--token T | --client-id I --client-secret S] list|call NAME JSON_ARGS');
}
if (values.token && values['client-id']) {
  fail('usage: --token and --client-id exclude each other');
}
if (Boolean(values['client-id']) !== Boolean(values['client-secret'])) {
  fail('usage: --client-id and --client-secret go together');
}

// The status of the last response the MCP endpoint itself gave that was not a success.
let lastStatus = null;
const target = new URL(url).href;
const recordingFetch = async (input, init) => {
  const response = await fetch(input, init);
  const href = input instanceof Request ? input.url : new URL(String(input)).href;
  if (href === target && !response.ok) {
    lastStatus = response.status;
  }
  return response;
};

const options = { fetch: recordingFetch };
if (values.token) {
  options.requestInit = { headers: { Authorization: `Bearer ${values.token}` } };
} else if (values['client-id']) {
  options.authProvider = new ClientCredentialsProvider({
    clientId: values['client-id'],
    clientSecret: values['client-secret'],
    clientName: 'mcs-host tests (TypeScript SDK)',
    ...(values.scope ? { scope: values.scope } : {}),
    ...(values.issuer ? { expectedIssuer: values.issuer } : {}),
  });
}

function describe(err) {
  const cause = err?.cause ? ` (${err.cause.code ?? err.cause.message ?? err.cause})` : '';
  return `${err?.message ?? String(err)}${cause}`;
}

const client = new Client({ name: 'mcs-host-tests-ts', version: '0.0.0' });
const transport = new StreamableHTTPClientTransport(new URL(url), options);
let result;
try {
  await client.connect(transport);
  if (action === 'list') {
    const { tools } = await client.listTools();
    result = { tools: tools.map((t) => t.name) };
  } else {
    const [name, json] = rest;
    const out = await client.callTool({ name, arguments: JSON.parse(json) });
    const text = (out.content ?? [])
      .filter((c) => c.type === 'text')
      .map((c) => c.text)
      .join('\n');
    result = {
      isError: Boolean(out.isError),
      text,
      structured: out.structuredContent ?? null,
    };
  }
} catch (err) {
  let status = null;
  let code = null;
  if (err instanceof StreamableHTTPError && err.code > 0) {
    status = err.code;
  } else if (err instanceof UnauthorizedError) {
    status = lastStatus ?? 401;
  } else if (err instanceof McpError) {
    code = err.code;
  } else {
    status = lastStatus;
  }
  try {
    await transport.close();
  } catch {
    // the error above is the one to report
  }
  fail(describe(err), status, code);
}
emit(result);
try {
  await client.close();
} catch {
  // the result is out already
}
process.exit(0);
