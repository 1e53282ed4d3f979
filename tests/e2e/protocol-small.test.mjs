// The smaller protocol points of issue 8 (point 7), with raw HTTP requests
// and the SDK client: initialize is not refused for its MCP-Protocol-Version
// header, "params": null is no params, /.well-known/ is 404 (so clients do
// not start an OAuth flow the server does not offer), and CORS answers the
// pages of the origins the operator allowed, and no others.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

import {
  LATEST,
  RawStdio,
  httpRequest,
  initBody,
  mcpHeaders,
  mcpMessages,
  rawHttpSession,
  runCli,
  startHttp,
  withTimeout,
} from './lib.mjs';

const T = { timeout: 30000 };
const ALLOWED = 'http://localhost:6274';

describe('MCP-Protocol-Version and params null', () => {
  let srv;
  let target;
  before(async () => {
    srv = await startHttp();
    target = { port: srv.port };
  });
  after(async () => srv && (await srv.stop()));

  test('initialize with an unsupported MCP-Protocol-Version header negotiates; later requests are still checked', T, async () => {
    const res = await httpRequest(target, { headers: mcpHeaders({ version: '1999-01-01' }), body: initBody(1, LATEST) });
    assert.equal(res.status, 200, res.body);
    const [msg] = mcpMessages(res);
    assert.equal(msg.result.protocolVersion, LATEST);
    const session = res.headers['mcp-session-id'];
    assert.ok(session);
    const bad = await httpRequest(target, {
      headers: mcpHeaders({ session, version: '1999-01-01' }),
      body: { jsonrpc: '2.0', id: 2, method: 'ping' },
    });
    assert.equal(bad.status, 400);
    assert.match(JSON.parse(bad.body).error.message, /MCP-Protocol-Version "1999-01-01"/);
  });

  test('"params": null on ping and tools/list is no params', T, async () => {
    const { session, version } = await rawHttpSession(target);
    for (const [id, method] of [[3, 'ping'], [4, 'tools/list']]) {
      const res = await httpRequest(target, {
        headers: mcpHeaders({ session, version }),
        body: { jsonrpc: '2.0', id, method, params: null },
      });
      assert.equal(res.status, 200, res.body);
      const [msg] = mcpMessages(res);
      assert.equal(msg.id, id);
      assert.equal(msg.error, undefined, JSON.stringify(msg));
      if (method === 'ping') assert.deepEqual(msg.result, {});
      else assert.ok(msg.result.tools.length > 0);
    }
    // params of another type are still refused
    const res = await httpRequest(target, {
      headers: mcpHeaders({ session, version }),
      body: { jsonrpc: '2.0', id: 5, method: 'ping', params: [] },
    });
    assert.equal(mcpMessages(res)[0].error.code, -32602);
  });

  test('over stdio too', T, async () => {
    const s = new RawStdio();
    try {
      await s.initialize();
      const r = await s.request('ping', null, { id: 9 });
      assert.deepEqual(r.result, {}, JSON.stringify(r));
    } finally {
      await s.close();
    }
  });
});

describe('/.well-known/ is 404, so no OAuth flow starts', () => {
  let srv;
  let target;
  before(async () => {
    srv = await startHttp();
    target = { port: srv.port };
  });
  after(async () => srv && (await srv.stop()));

  test('every /.well-known/ path is 404, with or without a token; other paths still need one', T, async () => {
    for (const p of [
      '/.well-known/oauth-protected-resource',
      '/.well-known/oauth-protected-resource/mcp',
      '/.well-known/oauth-authorization-server',
      '/.well-known/oauth-authorization-server/mcp',
      '/.well-known/openid-configuration',
    ]) {
      for (const auth of [false, true]) {
        const res = await httpRequest(target, { method: 'GET', path: p, auth, headers: { 'MCP-Protocol-Version': LATEST } });
        assert.equal(res.status, 404, `${p} (token: ${auth}): ${res.status} ${res.body}`);
        assert.match(JSON.parse(res.body).error.message, /offers no OAuth/);
        assert.equal(res.headers['www-authenticate'], undefined);
      }
    }
    for (const p of ['/mcp', '/', '/register', '/authorize']) {
      const res = await httpRequest(target, { method: 'GET', path: p, auth: false });
      assert.equal(res.status, 401, `${p}: ${res.status}`);
      // The challenge names no resource metadata: nothing for OAuth to follow.
      assert.doesNotMatch(res.headers['www-authenticate'], /resource_metadata/);
    }
  });

  test('the SDK client with an OAuth provider, without the token: its discovery finds 404s, no authorization starts', T, async () => {
    const seen = [];
    const recording = async (url, init) => {
      const res = await fetch(url, init);
      seen.push({ path: new URL(String(url)).pathname, status: res.status });
      return res;
    };
    let redirected = null;
    const provider = {
      get redirectUrl() { return 'http://localhost:1/callback'; },
      get clientMetadata() { return { redirect_uris: ['http://localhost:1/callback'], client_name: 'e2e' }; },
      clientInformation: () => undefined,
      saveClientInformation: () => {},
      tokens: () => undefined,
      saveTokens: () => {},
      redirectToAuthorization: (u) => { redirected = u; },
      saveCodeVerifier: () => {},
      codeVerifier: () => '',
    };
    const client = new Client({ name: 'container-mcp-e2e', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(srv.url), { authProvider: provider, fetch: recording });
    await assert.rejects(withTimeout(client.connect(transport), 10000, 'connect'));
    await client.close().catch(() => {});
    const wellKnown = seen.filter((s) => s.path.startsWith('/.well-known/'));
    assert.ok(wellKnown.length >= 2, JSON.stringify(seen));
    for (const s of wellKnown) assert.equal(s.status, 404, JSON.stringify(seen));
    assert.equal(redirected, null);
  });
});

describe('CORS for the origins the operator allowed', () => {
  let srv;
  let plain;
  let target;
  before(async () => {
    srv = await startHttp({ args: ['--allow-origin', ALLOWED], env: { CONTAINER_MCP_ALLOWED_ORIGINS: 'https://app.example' } });
    plain = await startHttp();
    target = { port: srv.port };
  });
  after(async () => {
    await srv?.stop();
    await plain?.stop();
  });

  const preflightHeaders = (origin) => ({
    Origin: origin,
    'Access-Control-Request-Method': 'POST',
    'Access-Control-Request-Headers': 'authorization, content-type, mcp-session-id, mcp-protocol-version',
  });

  test('a preflight from an allowed origin: 204 with the methods and headers, no token needed', T, async () => {
    for (const origin of [ALLOWED, 'https://app.example']) {
      const res = await httpRequest(target, { method: 'OPTIONS', auth: false, headers: preflightHeaders(origin) });
      assert.equal(res.status, 204, res.body);
      assert.equal(res.body, '');
      assert.equal(res.headers['access-control-allow-origin'], origin);
      assert.match(res.headers['access-control-allow-methods'], /\bPOST\b/);
      assert.match(res.headers['access-control-allow-methods'], /\bGET\b/);
      assert.match(res.headers['access-control-allow-methods'], /\bDELETE\b/);
      const allowed = res.headers['access-control-allow-headers'].toLowerCase().split(/\s*,\s*/);
      for (const h of ['authorization', 'content-type', 'mcp-session-id', 'mcp-protocol-version', 'last-event-id'])
        assert.ok(allowed.includes(h), `${h} in ${allowed}`);
      assert.equal(res.headers['access-control-allow-credentials'], undefined);
      assert.match(res.headers.vary, /Origin/);
    }
  });

  test('requests from an allowed origin: the token is still needed, and responses carry the CORS headers', T, async () => {
    const noToken = await httpRequest(target, { auth: false, headers: mcpHeaders({ extra: { Origin: ALLOWED } }), body: initBody() });
    assert.equal(noToken.status, 401);
    assert.equal(noToken.headers['access-control-allow-origin'], ALLOWED);
    const res = await httpRequest(target, { headers: mcpHeaders({ extra: { Origin: ALLOWED } }), body: initBody() });
    assert.equal(res.status, 200, res.body);
    assert.equal(res.headers['access-control-allow-origin'], ALLOWED);
    assert.match(res.headers['access-control-expose-headers'], /Mcp-Session-Id/i);
    assert.ok(res.headers['mcp-session-id']);
    // a request without Origin (not a browser) gets no CORS header
    const other = await httpRequest(target, { headers: mcpHeaders(), body: initBody() });
    assert.equal(other.status, 200);
    assert.equal(other.headers['access-control-allow-origin'], undefined);
  });

  test('another origin: 403 on the preflight and on the request, no CORS header', T, async () => {
    for (const origin of ['http://localhost:6275', 'https://localhost:6274', 'http://evil.example', 'null']) {
      const pre = await httpRequest(target, { method: 'OPTIONS', auth: false, headers: preflightHeaders(origin) });
      assert.equal(pre.status, 403, `${origin}: ${pre.status}`);
      assert.equal(pre.headers['access-control-allow-origin'], undefined);
      assert.match(JSON.parse(pre.body).error.message, /--allow-(origin|host)/);
    }
    const evil = await httpRequest(target, { headers: mcpHeaders({ extra: { Origin: 'http://evil.example' } }), body: initBody() });
    assert.equal(evil.status, 403);
    assert.equal(evil.headers['access-control-allow-origin'], undefined);
    // the Host check stands whatever the Origin: DNS rebinding is still stopped
    const rebound = await httpRequest(target, {
      headers: mcpHeaders({ extra: { Origin: ALLOWED, Host: 'evil.example' } }),
      body: initBody(),
    });
    assert.equal(rebound.status, 403);
    assert.equal(rebound.headers['access-control-allow-origin'], undefined);
  });

  test('without --allow-origin no origin is allowed cross-origin', T, async () => {
    const pre = await httpRequest({ port: plain.port }, { method: 'OPTIONS', auth: false, headers: preflightHeaders(ALLOWED) });
    assert.equal(pre.status, 403);
    assert.equal(pre.headers['access-control-allow-origin'], undefined);
    const res = await httpRequest({ port: plain.port }, { headers: mcpHeaders({ extra: { Origin: ALLOWED } }), body: initBody() });
    assert.equal(res.status, 200);
    assert.equal(res.headers['access-control-allow-origin'], undefined);
  });

  test('an allowed origin that is not one is refused at start', T, async () => {
    for (const bad of ['*', 'http://localhost:6274/', 'localhost:6274']) {
      const r = await runCli(['serve', '--http', '127.0.0.1:0', '--no-auth', '--allow-origin', bad]);
      assert.notEqual(r.code, 0);
      assert.match(r.stderr, /is not an origin/);
      assert.match(r.stderr, /scheme:\/\/host\[:port\]/);
    }
  });
});
