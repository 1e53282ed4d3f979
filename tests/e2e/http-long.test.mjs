// Long calls, lost connections, abandoned requests and session floods over
// Streamable HTTP (issue 8, points 1, 2, 4 and 6).
//
// Point 1: a call still running after CONTAINER_MCP_HTTP_STREAM_AFTER_MS is
// answered as an event stream with keep-alives, so a client whose fetch gives
// up without headers (Node's: 300 s) sees them long before; here both are
// scaled down (a 1 s headers/body timeout against a 3 s call).
// Point 2: request streams are resumable: GET /mcp with Last-Event-ID gets
// what the client missed, the final result included, by raw HTTP and by the
// SDK client's own reconnection.
// Point 4: a request the server gives up (SIGTERM, session deleted) gets an
// error response, not silence.
// Point 6: sessions that never get past initialize are dropped after a grace,
// and a credential (the TCP token, a peer uid on the socket) has a cap.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Agent, fetch as undiciFetch } from 'undici';

import { assertSlept } from './checks.mjs';
import {
  LATEST,
  deferred,
  eventually,
  httpClient,
  httpOpen,
  httpRequest,
  initBody,
  mcpHeaders,
  mcpMessages,
  parseSse,
  rawHttpCall,
  rawHttpSession,
  startHttp,
  startSocket,
  tmpDir,
  tokenFor,
  withTimeout,
} from './lib.mjs';

const T = { timeout: 30000 };

// The sleep ran to its end: not cancelled (by a disconnection, say).
function fullSleep(sc, ms) {
  assert.equal(sc.cancelled, false, `cancelled: ${JSON.stringify(sc)}`);
  assertSlept(sc.sleptMs, ms);
}
const FAST = { CONTAINER_MCP_HTTP_STREAM_AFTER_MS: '300', CONTAINER_MCP_HTTP_KEEPALIVE_MS: '200' };

const callBody = (id, args, meta) => ({
  jsonrpc: '2.0',
  id,
  method: 'tools/call',
  params: { name: 'sleep', arguments: args, ...(meta ? { _meta: meta } : {}) },
});

// A raw POST on its own socket: resolves `firstId` with the first SSE event
// id seen, and `text` grows as bytes arrive.
function rawPost(srv, session, body) {
  const payload = JSON.stringify(body);
  const sock = net.connect(srv.port, '127.0.0.1');
  const st = { sock, text: '', firstId: deferred(), closed: deferred(), waits: [] };
  // resolves once `s` has arrived
  st.waitFor = (s) => {
    const w = { s, d: deferred() };
    st.waits.push(w);
    if (st.text.includes(s)) w.d.resolve();
    return w.d.promise;
  };
  sock.setEncoding('utf8');
  sock.on('data', (d) => {
    st.text += d;
    for (const w of st.waits) if (st.text.includes(w.s)) w.d.resolve();
    const m = st.text.match(/\nid: (\S+)\n/);
    if (m) st.firstId.resolve(m[1]);
  });
  sock.on('error', () => {});
  sock.on('close', () => st.closed.resolve());
  sock.write(
    `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${srv.port}\r\nAuthorization: Bearer ${srv.token}\r\n` +
      `Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\nMcp-Session-Id: ${session}\r\n` +
      `MCP-Protocol-Version: ${LATEST}\r\nContent-Length: ${Buffer.byteLength(payload)}\r\n\r\n${payload}`,
  );
  return st;
}

// GET /mcp with Last-Event-ID, read until the response to `id` arrives.
async function replay(srv, session, lastId, id) {
  const { res, status } = await httpOpen({ port: srv.port }, {
    headers: { ...mcpHeaders({ session }), Accept: 'text/event-stream', 'Last-Event-ID': lastId },
  });
  let text = '';
  const got = deferred();
  res.setEncoding('utf8');
  res.on('data', (d) => {
    text += d;
    if (parseSse(text).some((e) => e.data && JSON.parse(e.data).id === id)) got.resolve();
  });
  res.on('end', () => got.resolve());
  try {
    assert.equal(status, 200, `GET with Last-Event-ID: HTTP ${status}`);
    await withTimeout(got.promise, 10000, `the replayed response to ${id}`);
  } finally {
    res.destroy();
  }
  return parseSse(text).filter((e) => e.data).map((e) => ({ id: e.id, msg: JSON.parse(e.data) }));
}

describe('HTTP long calls (point 1)', () => {
  let srv;
  let agent;
  let shortFetch;
  before(async () => {
    srv = await startHttp({ env: FAST });
    // A client that gives up after 1 s without headers or body bytes: what
    // Node's fetch does after 300 s, scaled down with the server's timings.
    agent = new Agent({ headersTimeout: 1000, bodyTimeout: 1000 });
    shortFetch = (url, init) => undiciFetch(url, { ...init, dispatcher: agent });
  });
  after(async () => {
    if (srv) await srv.stop().finally(() => srv.kill());
    await agent?.close();
  });

  test('a call longer than the client\'s header timeout streams with keep-alives and ends with its result', T, async () => {
    const { session } = await rawHttpSession({ port: srv.port });
    const res = await shortFetch(srv.url, {
      method: 'POST',
      headers: { ...mcpHeaders({ session }), Authorization: `Bearer ${srv.token}` },
      body: JSON.stringify(callBody('long', { ms: 3000, steps: 1 })),
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type'), /^text\/event-stream/);
    const text = await res.text(); // would throw UND_ERR_BODY_TIMEOUT without keep-alives
    const keepalives = text.split('\n').filter((l) => l.startsWith(': keepalive')).length;
    assert.ok(keepalives >= 5, `keep-alive comments while the call ran: ${keepalives}`);
    const resp = parseSse(text).filter((e) => e.data).map((e) => JSON.parse(e.data)).find((m) => m.id === 'long');
    fullSleep(resp.result.structuredContent, 3000);
  });

  test('a quick call stays one plain JSON body', T, async () => {
    const { session } = await rawHttpSession({ port: srv.port });
    const { res, response } = await rawHttpCall({ port: srv.port }, session, 'tools/call', { name: 'echo', arguments: { text: 'hi' } });
    assert.match(res.headers['content-type'], /^application\/json/);
    assert.equal(response.result.structuredContent.text, 'hi');
  });

  test('the SDK client with a 1 s header/body timeout gets a 3 s result', T, async () => {
    const c = await httpClient(srv.url, { fetch: shortFetch });
    try {
      const r = await c.client.callTool({ name: 'sleep', arguments: { ms: 3000, steps: 1 } }, undefined, { timeout: 20000 });
      fullSleep(r.structuredContent, 3000);
    } finally {
      await c.close();
    }
  });
});

describe('HTTP resumability (point 2)', () => {
  let srv;
  before(async () => {
    srv = await startHttp({ env: FAST });
  });
  after(async () => {
    if (srv) await srv.stop().finally(() => srv.kill());
  });

  for (const [what, meta] of [
    ['a long call', undefined],
    ['a call with a progressToken', { progressToken: 'pt' }],
  ]) {
    test(`${what}: the connection dies after the first event; GET with Last-Event-ID gets the result, and again once it is over`, T, async () => {
      const { session } = await rawHttpSession({ port: srv.port });
      const st = rawPost(srv, session, callBody('cut', { ms: 1200, steps: 4 }, meta));
      const first = await withTimeout(st.firstId.promise, 30000, 'the first event id');
      st.sock.destroy(); // the client's connection is gone mid-call
      await st.closed.promise;
      assert.ok(!st.text.includes('"id":"cut"'), 'the result had not come yet');
      const evs = await replay(srv, session, first, 'cut');
      const resp = evs.find((e) => e.msg.id === 'cut');
      assert.ok(resp, `replayed events: ${JSON.stringify(evs)}`);
      // not cancelled by the disconnection: the call ran to its end
      fullSleep(resp.msg.result.structuredContent, 1200);
      assert.ok(evs.every((e) => e.id !== first), 'nothing at or before Last-Event-ID is sent again');
      // The call is over now: a client back only now still gets its result.
      const again = await replay(srv, session, first, 'cut');
      assert.deepEqual(again.find((e) => e.msg.id === 'cut').msg, resp.msg);
      // From the last event on there is nothing more: 405, "no stream here",
      // so a client stops reconnecting.
      const done = await httpRequest({ port: srv.port }, {
        method: 'GET',
        headers: { ...mcpHeaders({ session }), Accept: 'text/event-stream', 'Last-Event-ID': resp.id },
      });
      assert.equal(done.status, 405, `GET after the last event: HTTP ${done.status} ${done.body}`);
    });
  }

  test('event ids name their stream and are unique; another session cannot replay them', T, async () => {
    const a = await rawHttpSession({ port: srv.port });
    const b = await rawHttpSession({ port: srv.port });
    const s1 = rawPost(srv, a.session, callBody('x1', { ms: 400, steps: 2 }, { progressToken: 1 }));
    const s2 = rawPost(srv, a.session, callBody('x2', { ms: 400, steps: 2 }, { progressToken: 2 }));
    await withTimeout(Promise.all([s1.waitFor('"id":"x1"'), s2.waitFor('"id":"x2"')]), 10000, 'both results');
    s1.sock.destroy();
    s2.sock.destroy();
    const ids = [...parseSse(s1.text), ...parseSse(s2.text)].map((e) => e.id).filter(Boolean);
    assert.equal(new Set(ids).size, ids.length, `ids: ${ids}`);
    const res = await httpRequest({ port: srv.port }, {
      method: 'GET',
      headers: { ...mcpHeaders({ session: b.session }), Accept: 'text/event-stream', 'Last-Event-ID': ids[0] },
    });
    assert.equal(res.status, 404, `another session's stream: HTTP ${res.status}`);
    assert.match(JSON.parse(res.body).error.message, /CONTAINER_MCP_HTTP_REPLAY_SEC/);
  });

  test('the SDK client reconnects on its own (GET with Last-Event-ID) and gets the result', T, async () => {
    let cut = true;
    // Breaks the body of the first streamed tools/call response after its
    // first event, as a dropped connection does.
    const cuttingFetch = async (url, init) => {
      const res = await undiciFetch(url, init);
      const isCall = init?.method === 'POST' && String(init.body).includes('"tools/call"');
      if (!cut || !isCall || !String(res.headers.get('content-type')).includes('text/event-stream')) return res;
      cut = false;
      const reader = res.body.getReader();
      let seen = '';
      const body = new ReadableStream({
        async pull(ctrl) {
          const { value, done } = await reader.read();
          if (done) return ctrl.close();
          seen += new TextDecoder().decode(value);
          const end = seen.indexOf('\n\n', seen.indexOf('id: '));
          if (seen.includes('id: ') && end >= 0) {
            ctrl.enqueue(new TextEncoder().encode(seen.slice(0, end + 2)));
            await reader.cancel();
            ctrl.error(new Error('connection cut by the test'));
            return;
          }
        },
      });
      return new Response(body, { status: res.status, headers: res.headers });
    };
    const transport = new StreamableHTTPClientTransport(new URL(srv.url), {
      fetch: cuttingFetch,
      requestInit: { headers: { Authorization: `Bearer ${tokenFor(srv.port)}` } },
      reconnectionOptions: { initialReconnectionDelay: 50, maxReconnectionDelay: 200, reconnectionDelayGrowFactor: 1.5, maxRetries: 5 },
    });
    const client = new Client({ name: 'resume-e2e', version: '1.0.0' }, { capabilities: {} });
    client.onerror = () => {};
    await client.connect(transport);
    try {
      const r = await client.callTool({ name: 'sleep', arguments: { ms: 1500, steps: 1 } }, undefined, { timeout: 15000 });
      assert.equal(cut, false, 'the connection was cut');
      fullSleep(r.structuredContent, 1500);
    } finally {
      await transport.terminateSession().catch(() => {});
      await client.close();
    }
  });
});

describe('HTTP requests the server gives up get an error (point 4)', () => {
  test('DELETE of the session while a call streams: the call gets an error response', T, async () => {
    const srv = await startHttp({ env: FAST });
    try {
      const { session } = await rawHttpSession({ port: srv.port });
      for (const meta of [undefined, { progressToken: 'p' }]) {
        const st = rawPost(srv, session, callBody('del', { ms: 20000, steps: 200 }, meta));
        await withTimeout(st.firstId.promise, 30000, 'the call\'s stream');
        if (meta) {
          // plain: stream after 300 ms (priming event); with a token: at once
          await eventually(() => st.text.includes('notifications/progress'), 30000, 'progress');
        }
        const d = await httpRequest({ port: srv.port }, { method: 'DELETE', headers: mcpHeaders({ session }) });
        assert.equal(d.status, 200);
        await withTimeout(st.waitFor('"id":"del"'), 30000, 'an answer to the abandoned call');
        st.sock.destroy();
        const resp = parseSse(st.text).filter((e) => e.data).map((e) => JSON.parse(e.data)).find((m) => m.id === 'del');
        assert.ok(resp, `an answer to the abandoned call: ${st.text.slice(-400)}`);
        assert.equal(resp.error.code, -32000);
        assert.match(resp.error.message, /session was ended/);
        if (!meta) break; // the session is gone: the second round needs a new one
      }
    } finally {
      await srv.stop().finally(() => srv.kill());
    }
  });

  test('SIGTERM: a plain call and a streamed SDK call get an error response before the server exits', T, async () => {
    const srv = await startHttp({ env: { CONTAINER_MCP_HTTP_STREAM_AFTER_MS: '60000' } });
    try {
      // The plain call first: by the time the SDK call reports progress it
      // has long been running (its reply is plain JSON: no event says so).
      const { session } = await rawHttpSession({ port: srv.port });
      const plain = httpRequest({ port: srv.port }, {
        headers: mcpHeaders({ session }),
        body: callBody('plain', { ms: 20000, steps: 1 }),
        timeout: 15000,
      });
      const c = await httpClient(srv.url);
      const progressed = deferred();
      const sdkCall = c.client.callTool({ name: 'sleep', arguments: { ms: 20000, steps: 200 } }, undefined, {
        timeout: 20000,
        onprogress: () => progressed.resolve(),
      });
      sdkCall.catch(() => {});
      await withTimeout(progressed.promise, 30000, 'progress of the SDK call');
      srv.proc.kill('SIGTERM');
      const err = await withTimeout(sdkCall.then(() => null, (e) => e), 30000, 'the SDK call to be answered');
      assert.ok(err, 'the SDK call failed');
      assert.equal(err.code, -32000, String(err));
      assert.match(err.message, /shutting down/);
      const p = await plain;
      const msg = mcpMessages(p).find((x) => x.id === 'plain');
      assert.equal(msg.id, 'plain', `the error names the request: ${p.body}`);
      assert.equal(msg.error.code, -32000);
      await withTimeout(srv.exited, 10000, 'server exit');
    } finally {
      srv.kill();
    }
  });
});

describe('HTTP session floods (point 6)', () => {
  let dir;
  let srv;
  before(async () => {
    dir = tmpDir();
    srv = await startHttp({
      args: ['--socket', path.join(dir, 'mcp.sock')],
      env: { CONTAINER_MCP_HTTP_MAX_SESSIONS: '8', CONTAINER_MCP_HTTP_CREDENTIAL_SESSIONS: '4', CONTAINER_MCP_HTTP_INIT_GRACE: '1' },
    });
    await srv.waitStderr(/listening on unix:/);
  });
  after(async () => {
    try {
      if (srv) await srv.stop().finally(() => srv.kill());
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  // the socket takes the token too here (CONTAINER_MCP_TOKEN is set), but
  // counts its sessions by the peer's uid
  const init = (target) =>
    httpRequest(target, { headers: mcpHeaders({ extra: target.socketPath ? { Authorization: `Bearer ${srv.token}` } : {} }), body: initBody() });

  test('initialize floods: the credential is capped, other credentials get in, unused sessions go after the grace', T, async () => {
    const tcp = { port: srv.port };
    const good = await rawHttpSession(tcp); // past initialize: it stays
    for (let i = 0; i < 3; i++) assert.equal((await init(tcp)).status, 200);
    const full = await init(tcp);
    assert.equal(full.status, 503, `the token's fifth session: HTTP ${full.status}`);
    assert.equal(full.headers['retry-after'], '1');
    const m = JSON.parse(full.body).error.message;
    assert.match(m, /CONTAINER_MCP_HTTP_CREDENTIAL_SESSIONS/);
    assert.match(m, /DELETE \/mcp/);
    // another credential (the socket's peer uid) is not locked out
    const sock = { socketPath: path.join(dir, 'mcp.sock') };
    assert.equal((await init(sock)).status, 200, 'a socket client still gets a session');
    // the three sessions that never got past initialize are dropped soon
    await eventually(async () => (await init(tcp)).status === 200, 30000, 'a new TCP session after the grace');
    const { response } = await rawHttpCall(tcp, good.session, 'ping');
    assert.deepEqual(response.result, {}, 'the session in use was kept');
  });
});
