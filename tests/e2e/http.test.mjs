// Streamable HTTP at /mcp: the SDK client end to end, then every status code
// the spec (and the DNS-rebinding and token rules) asks for, with raw requests.
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';

import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

import { assertProgress, assertSlept, checkSystemStatus, checkToolShape } from './checks.mjs';
import {
  LATEST,
  SUPPORTED,
  VERSION,
  deferred,
  httpClient,
  httpOpen,
  httpRequest,
  initBody,
  isSanitized,
  mcpHeaders,
  mcpMessages,
  parseSse,
  procStatus,
  rawHttpCall,
  rawHttpSession,
  spawnServer,
  startHttp,
  withTimeout,
} from './lib.mjs';

const T = { timeout: 30000 };

describe('Streamable HTTP with the SDK client', () => {
  let srv;
  before(async () => {
    srv = await startHttp();
  });
  after(async () => {
    if (srv) await srv.stop().finally(() => srv.kill());
  });

  test('initialize, list, call echo and system_status, DELETE', T, async () => {
    const c = await httpClient(srv.url);
    try {
      assert.equal(c.client.getServerVersion().name, 'container-mcp');
      assert.equal(c.client.getServerVersion().version, VERSION);
      assert.ok(c.client.getInstructions()?.length > 20);
      assert.deepEqual(c.client.getServerCapabilities().tools, { listChanged: false });
      assert.ok(c.transport.sessionId, 'the server gave a session id');
      assert.equal(c.transport.protocolVersion, LATEST);
      const { tools } = await c.client.listTools();
      for (const t of tools) checkToolShape(t);
      const r = await c.client.callTool({ name: 'echo', arguments: { text: 'über http' } });
      assert.deepEqual(r.structuredContent, { text: 'über http' });
      assert.deepEqual(r.content, [{ type: 'text', text: 'über http' }]);
      checkSystemStatus(await c.client.callTool({ name: 'system_status', arguments: {} }));
      assert.deepEqual(await c.client.ping(), {});
    } finally {
      await c.close();
    }
    assert.deepEqual(c.errors.map(String), []);
  });

  test('progress over the POST response stream', T, async () => {
    const c = await httpClient(srv.url);
    try {
      const seen = [];
      const r = await c.client.callTool({ name: 'sleep', arguments: { ms: 200, steps: 4 } }, undefined, { onprogress: (p) => seen.push(p) });
      assertSlept(r.structuredContent.sleptMs, 200);
      assert.equal(r.structuredContent.cancelled, false);
      assertProgress(seen, 4);
    } finally {
      await c.close();
    }
  });

  test('cancellation: an aborted sleep rejects at once; the session keeps serving', T, async () => {
    const c = await httpClient(srv.url);
    try {
      const ac = new AbortController();
      const started = deferred();
      const call = c.client.callTool({ name: 'sleep', arguments: { ms: 60000, steps: 600 } }, undefined, {
        signal: ac.signal,
        onprogress: () => started.resolve(),
        timeout: 120000,
      });
      call.catch(() => {});
      await withTimeout(started.promise, 30000, 'first progress');
      ac.abort('cancelled by test');
      await assert.rejects(withTimeout(call, 30000, 'the cancelled call to reject'), (e) => !/timed out after/.test(e.message));
      assert.deepEqual(await c.client.ping(), {});
      const r = await c.client.callTool({ name: 'echo', arguments: { text: 'after cancel' } });
      assert.equal(r.structuredContent.text, 'after cancel');
    } finally {
      await c.close();
    }
  });

  test('tools/list paging with --page-size 1', T, async () => {
    const c = await httpClient(srv.url);
    const all = (await c.client.listTools()).tools;
    await c.close();
    const paged = await startHttp({ args: ['--page-size', '1'] });
    try {
      const p = await httpClient(paged.url);
      const got = [];
      let cursor;
      let n = 0;
      do {
        const r = await p.client.listTools(cursor === undefined ? {} : { cursor });
        assert.ok(r.tools.length <= 1);
        got.push(...r.tools);
        cursor = r.nextCursor;
        assert.ok(++n <= all.length + 1, 'paging terminates');
      } while (cursor !== undefined);
      assert.deepEqual(got, all);
      await assert.rejects(p.client.listTools({ cursor: '!!bogus!!' }), (e) => e.code === -32602);
      await p.close();
    } finally {
      await paged.stop().finally(() => paged.kill());
    }
  });

  test('logging/setLevel and unknown tool', T, async () => {
    const c = await httpClient(srv.url);
    try {
      const logs = [];
      c.client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => logs.push(n.params));
      assert.deepEqual(await c.client.setLoggingLevel('debug'), {});
      await c.client.callTool({ name: 'sleep', arguments: { ms: 10, steps: 2 } });
      assert.ok(logs.length > 0, 'notifications/message at level debug');
      await assert.rejects(c.client.callTool({ name: 'nope', arguments: {} }), (e) => e.code === -32602);
      const bad = await c.client.callTool({ name: 'echo', arguments: { text: 5 } });
      assert.equal(bad.isError, true);
      assert.match(bad.content[0].text, /text/);
      assert.match(bad.content[0].text, /expected string/);
    } finally {
      await c.close();
    }
  });
});

describe('Streamable HTTP status codes (raw requests)', () => {
  let srv;
  let target;
  let session;
  before(async () => {
    srv = await startHttp();
    target = { port: srv.port };
    ({ session } = await rawHttpSession(target));
  });
  after(async () => {
    if (srv) await srv.stop().finally(() => srv.kill());
  });

  const ping = (id = 5) => ({ jsonrpc: '2.0', id, method: 'ping' });

  test('initialize answers 200 with Mcp-Session-Id; versions negotiated as over stdio', T, async () => {
    for (const v of [...SUPPORTED, '1999-01-01']) {
      const res = await httpRequest(target, { headers: mcpHeaders(), body: initBody(1, v) });
      assert.equal(res.status, 200, res.body);
      assert.ok(res.headers['mcp-session-id'], 'Mcp-Session-Id header');
      assert.match(res.headers['mcp-session-id'], /^[\x21-\x7e]+$/, 'session id is visible ASCII');
      const [m] = mcpMessages(res);
      assert.equal(m.result.protocolVersion, SUPPORTED.includes(v) ? v : LATEST);
      const del = await httpRequest(target, { method: 'DELETE', headers: { 'Mcp-Session-Id': res.headers['mcp-session-id'] } });
      assert.ok([200, 202, 204].includes(del.status), `DELETE: ${del.status}`);
    }
  });

  test('a request on the session answers 200 with the result', T, async () => {
    const { res, response } = await rawHttpCall(target, session, 'ping', undefined, { id: 'p' });
    assert.equal(res.status, 200, res.body);
    assert.deepEqual(response, { jsonrpc: '2.0', id: 'p', result: {} });
  });

  test('406 when Accept lacks application/json or text/event-stream', T, async () => {
    for (const accept of ['application/json', 'text/event-stream', 'text/html', undefined]) {
      const h = mcpHeaders({ session, extra: { Accept: accept } });
      if (accept === undefined) delete h.Accept;
      const res = await httpRequest(target, { headers: h, body: ping() });
      assert.equal(res.status, 406, `Accept: ${accept} → ${res.status} ${res.body}`);
    }
    const res = await httpRequest(target, { headers: mcpHeaders({ extra: { Accept: 'text/html' } }), body: initBody() });
    assert.equal(res.status, 406, 'initialize with a bad Accept');
  });

  test('415 on a wrong Content-Type', T, async () => {
    for (const ct of ['text/plain', 'application/x-www-form-urlencoded']) {
      const res = await httpRequest(target, { headers: mcpHeaders({ session, extra: { 'Content-Type': ct } }), body: ping() });
      assert.equal(res.status, 415, `Content-Type: ${ct} → ${res.status} ${res.body}`);
    }
    const ok = await httpRequest(target, { headers: mcpHeaders({ session, extra: { 'Content-Type': 'application/json; charset=utf-8' } }), body: ping() });
    assert.equal(ok.status, 200, 'a charset parameter is fine');
  });

  test('400 for a non-initialize POST without Mcp-Session-Id', T, async () => {
    const res = await httpRequest(target, { headers: mcpHeaders(), body: ping() });
    assert.equal(res.status, 400, res.body);
  });

  test('404 for an unknown session id', T, async () => {
    const res = await httpRequest(target, { headers: mcpHeaders({ session: 'f'.repeat(32) }), body: ping() });
    assert.equal(res.status, 404, res.body);
    const get = await httpRequest(target, { method: 'GET', headers: { Accept: 'text/event-stream', 'Mcp-Session-Id': '0'.repeat(32) } });
    assert.equal(get.status, 404, 'GET with an unknown session');
  });

  test('405 for PUT and PATCH', T, async () => {
    for (const method of ['PUT', 'PATCH']) {
      const res = await httpRequest(target, { method, headers: mcpHeaders({ session }), body: ping() });
      assert.equal(res.status, 405, `${method} → ${res.status}`);
    }
  });

  test('400 for an unsupported MCP-Protocol-Version; supported ones pass', T, async () => {
    const bad = await httpRequest(target, { headers: mcpHeaders({ session, version: '1999-01-01' }), body: ping() });
    assert.equal(bad.status, 400, bad.body);
    const good = await httpRequest(target, { headers: mcpHeaders({ session, version: LATEST }), body: ping() });
    assert.equal(good.status, 200, good.body);
  });

  test('403 for a foreign Host or Origin; local ones pass', T, async () => {
    let res = await httpRequest(target, { headers: mcpHeaders({ extra: { Host: 'evil.example' } }), body: initBody() });
    assert.equal(res.status, 403, `Host: evil.example → ${res.status}`);
    res = await httpRequest(target, { headers: mcpHeaders({ extra: { Host: `evil.example:${srv.port}` } }), body: initBody() });
    assert.equal(res.status, 403, `Host: evil.example:port → ${res.status}`);
    res = await httpRequest(target, { headers: mcpHeaders({ extra: { Origin: 'http://evil.example' } }), body: initBody() });
    assert.equal(res.status, 403, `Origin: http://evil.example → ${res.status}`);
    res = await httpRequest(target, { headers: mcpHeaders({ session, extra: { Origin: 'http://evil.example' } }), body: ping() });
    assert.equal(res.status, 403, 'foreign Origin on an existing session');
    res = await httpRequest(target, { method: 'GET', path: '/sse', headers: { Accept: 'text/event-stream', Origin: 'http://evil.example' } });
    assert.equal(res.status, 403, 'foreign Origin on /sse');
    res = await httpRequest(target, { headers: mcpHeaders({ extra: { Host: `localhost:${srv.port}` } }), body: initBody() });
    assert.equal(res.status, 200, `Host: localhost:port → ${res.status}`);
    res = await httpRequest(target, { headers: mcpHeaders({ extra: { Origin: `http://127.0.0.1:${srv.port}` } }), body: initBody() });
    assert.equal(res.status, 200, `Origin: http://127.0.0.1:port → ${res.status}`);
    res = await httpRequest(target, { headers: mcpHeaders({ extra: { Origin: `http://localhost:${srv.port}` } }), body: initBody() });
    assert.equal(res.status, 200, `Origin: http://localhost:port → ${res.status}`);
  });

  test('--http PORT alone listens on 127.0.0.1', T, async () => {
    const token = 'port-alone-0123456789abcdef0123456789';
    const s2 = spawnServer(['serve', '--http', '0', '--toolsets', 'all'], { env: { CONTAINER_MCP_TOKEN: token } });
    try {
      const m = await s2.waitStderr(/listening on http:\/\/([^/]+):(\d+)\/mcp/);
      assert.equal(m[1], '127.0.0.1', `listens on ${m[1]}`);
      const { session: s } = await rawHttpSession({ port: Number(m[2]) }, { headers: { Authorization: `Bearer ${token}` } });
      assert.ok(s);
      await s2.stop();
    } finally {
      s2.kill();
    }
  });

  test('--allow-host admits one more Host name', T, async () => {
    const s2 = await startHttp({ args: ['--allow-host', 'mcp.internal.test'] });
    try {
      const t2 = { port: s2.port };
      let res = await httpRequest(t2, { headers: mcpHeaders({ extra: { Host: `mcp.internal.test:${s2.port}` } }), body: initBody() });
      assert.equal(res.status, 200, `allowed Host → ${res.status} ${res.body}`);
      res = await httpRequest(t2, { headers: mcpHeaders({ extra: { Host: 'evil.example' } }), body: initBody() });
      assert.equal(res.status, 403, 'other names still refused');
    } finally {
      await s2.stop().finally(() => s2.kill());
    }
  });

  test('DELETE ends the session: afterwards 404', T, async () => {
    const { session: s } = await rawHttpSession(target);
    assert.equal((await rawHttpCall(target, s, 'ping')).res.status, 200);
    const del = await httpRequest(target, { method: 'DELETE', headers: { 'Mcp-Session-Id': s } });
    assert.ok([200, 202, 204].includes(del.status), `DELETE → ${del.status}`);
    assert.equal((await rawHttpCall(target, s, 'ping')).res.status, 404);
    const again = await httpRequest(target, { method: 'DELETE', headers: { 'Mcp-Session-Id': s } });
    assert.equal(again.status, 404, 'second DELETE');
    const none = await httpRequest(target, { method: 'DELETE' });
    assert.equal(none.status, 400, 'DELETE without a session id');
  });

  test('notifications and responses POSTed answer 202 with no body', T, async () => {
    const res = await httpRequest(target, { headers: mcpHeaders({ session }), body: { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'x' } } });
    assert.equal(res.status, 202);
    assert.equal(res.body, '');
  });

  test('malformed JSON is 400 with a -32700 body; unknown method is -32601', T, async () => {
    const res = await httpRequest(target, { headers: mcpHeaders({ session }), body: '{"jsonrpc":"2.0","id":1,' });
    assert.equal(res.status, 400, res.body);
    const [m] = mcpMessages(res);
    assert.equal(m.error.code, -32700);
    assert.equal(m.id, null);
    const { response } = await rawHttpCall(target, session, 'nope/nope', {}, { id: 99 });
    assert.equal(response.error.code, -32601);
    assert.equal(response.id, 99);
  });

  test('progress: a request with a progressToken gets an SSE reply: progress, then the result', T, async () => {
    const res = await httpRequest(target, {
      headers: mcpHeaders({ session }),
      body: { jsonrpc: '2.0', id: 'slp', method: 'tools/call', params: { name: 'sleep', arguments: { ms: 150, steps: 3 }, _meta: { progressToken: 'pt-1' } } },
    });
    assert.equal(res.status, 200);
    assert.match(String(res.headers['content-type']), /^text\/event-stream/);
    const msgs = parseSse(res.body).map((e) => JSON.parse(e.data));
    const progress = msgs.filter((m) => m.method === 'notifications/progress');
    assert.ok(progress.every((m) => m.params.progressToken === 'pt-1'), 'the token is echoed');
    assertProgress(progress.map((m) => m.params), 3);
    assert.equal(msgs.at(-1).id, 'slp', 'the result comes last');
    assertSlept(msgs.at(-1).result.structuredContent.sleptMs, 150);
  });

  test('batches over HTTP: answered for a 2025-03-26 session, refused for 2025-11-25', T, async () => {
    const old = await rawHttpSession(target, { version: '2025-03-26' });
    const res = await httpRequest(target, {
      headers: mcpHeaders({ session: old.session, version: '2025-03-26' }),
      body: [
        { jsonrpc: '2.0', id: 'a', method: 'ping' },
        { jsonrpc: '2.0', id: 'b', method: 'tools/call', params: { name: 'echo', arguments: { text: 'batched' } } },
      ],
    });
    assert.equal(res.status, 200, res.body);
    const msgs = mcpMessages(res).flat();
    assert.deepEqual(msgs.find((m) => m.id === 'a')?.result, {});
    assert.equal(msgs.find((m) => m.id === 'b')?.result?.structuredContent?.text, 'batched');
    const now = await httpRequest(target, { headers: mcpHeaders({ session, version: LATEST }), body: [{ jsonrpc: '2.0', id: 'a', method: 'ping' }] });
    assert.ok([200, 400].includes(now.status), `batch on a ${LATEST} session → ${now.status}`);
    const [err] = mcpMessages(now).flat();
    assert.equal(err?.error?.code, -32600, now.body);
  });

  test('ordering: every progress notification arrives on the POST stream before the result', T, async () => {
    for (let round = 0; round < 5; round++) {
      const res = await httpRequest(target, {
        headers: mcpHeaders({ session }),
        body: { jsonrpc: '2.0', id: `b${round}`, method: 'tools/call', params: { name: 'sleep', arguments: { ms: 0, steps: 1000 }, _meta: { progressToken: `b${round}` } } },
      });
      assert.equal(res.status, 200);
      const msgs = parseSse(res.body).map((e) => JSON.parse(e.data));
      assert.equal(msgs.at(-1).id, `b${round}`, 'the result is the last message of the stream');
      assert.equal(msgs.filter((m) => m.method === 'notifications/progress').length, 1000);
    }
  });

  test('GET /mcp with Accept: text/event-stream opens the standalone stream', T, async () => {
    const { res, status, headers } = await httpOpen(target, { headers: { Accept: 'text/event-stream', 'Mcp-Session-Id': session } });
    try {
      assert.equal(status, 200);
      assert.match(String(headers['content-type']), /^text\/event-stream/);
    } finally {
      res.destroy();
    }
    const noAccept = await httpRequest(target, { method: 'GET', headers: { Accept: 'application/json', 'Mcp-Session-Id': session } });
    assert.ok([405, 406].includes(noAccept.status), `GET without text/event-stream → ${noAccept.status}`);
    assert.equal((await rawHttpCall(target, session, 'ping')).res.status, 200, 'still serving');
  });

  test('cancellation over HTTP: no result and no more progress for the cancelled request', T, async () => {
    const { res } = await httpOpen(target, {
      method: 'POST',
      headers: mcpHeaders({ session }),
      body: { jsonrpc: '2.0', id: 'long', method: 'tools/call', params: { name: 'sleep', arguments: { ms: 60000, steps: 600 }, _meta: { progressToken: 'pt-long' } } },
    });
    let text = '';
    const first = deferred();
    const closed = deferred();
    res.setEncoding('utf8');
    res.on('data', (d) => {
      text += d;
      if (text.includes('notifications/progress')) first.resolve();
    });
    res.on('close', () => closed.resolve());
    try {
      await withTimeout(first.promise, 30000, 'first progress');
      const c = await httpRequest(target, { headers: mcpHeaders({ session }), body: { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'long' } } });
      assert.equal(c.status, 202);
      const mark = parseSse(text).length;
      // The server ends the request's stream once the cancelled call has
      // stopped: everything it sent for it is in `text` by then.
      await withTimeout(closed.promise, 30000, 'the cancelled request\'s stream to end');
      const evs = parseSse(text).map((e) => JSON.parse(e.data));
      assert.ok(evs.length - mark <= 1, `progress after cancel: ${evs.length - mark}`);
      assert.equal(evs.filter((m) => m.id === 'long').length, 0, 'no response to the cancelled request');
    } finally {
      res.destroy();
    }
  });

  // A notifications/cancelled may overtake its request (another HTTP
  // connection, another pool thread): the server remembers it, and the
  // call that then begins with that id ends unanswered without running.
  test('a cancel that arrives before its call: the call ends unanswered and its tool never runs', T, async () => {
    const c = await httpRequest(target, { headers: mcpHeaders({ session }), body: { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'early' } } });
    assert.equal(c.status, 202);
    const { res } = await httpOpen(target, {
      method: 'POST',
      headers: mcpHeaders({ session }),
      body: { jsonrpc: '2.0', id: 'early', method: 'tools/call', params: { name: 'sleep', arguments: { ms: 600000, steps: 6000 }, _meta: { progressToken: 'pt-early' } } },
    });
    let text = '';
    const closed = deferred();
    res.setEncoding('utf8');
    res.on('data', (d) => (text += d));
    res.on('close', () => closed.resolve());
    try {
      await withTimeout(closed.promise, 30000, 'the early-cancelled call to end (its 600 s sleep ran)');
      const evs = parseSse(text).map((e) => JSON.parse(e.data));
      assert.equal(evs.filter((m) => m.method === 'notifications/progress').length, 0, 'the tool ran: it sent progress');
      assert.equal(evs.filter((m) => m.id === 'early').length, 0, 'the cancelled call was answered');
    } finally {
      res.destroy();
    }
    // a cancel counts once: the next call with that id runs
    const again = await rawHttpCall(target, session, 'tools/call', { name: 'echo', arguments: { text: 'again' } }, { id: 'early' });
    assert.equal(again.response?.result?.structuredContent?.text, 'again');
  });
});

describe('HTTP bearer token and size cap', () => {
  test('CONTAINER_MCP_TOKEN: missing or wrong bearer is 401; the right one works with the SDK', T, async () => {
    const srv = await startHttp({ env: { CONTAINER_MCP_TOKEN: 's3cret-token' } });
    try {
      const t = { port: srv.port };
      let res = await httpRequest(t, { headers: mcpHeaders(), body: initBody() });
      assert.equal(res.status, 401, `no token → ${res.status}`);
      res = await httpRequest(t, { headers: mcpHeaders({ extra: { Authorization: 'Bearer wrong' } }), body: initBody() });
      assert.equal(res.status, 401, `wrong token → ${res.status}`);
      res = await httpRequest(t, { headers: mcpHeaders({ extra: { Authorization: 's3cret-token' } }), body: initBody() });
      assert.equal(res.status, 401, `token without the Bearer scheme → ${res.status}`);
      res = await httpRequest(t, { method: 'GET', path: '/sse', headers: { Accept: 'text/event-stream' } });
      assert.equal(res.status, 401, `/sse without token → ${res.status}`);
      res = await httpRequest(t, { headers: mcpHeaders({ extra: { Authorization: 'Bearer s3cret-token' } }), body: initBody() });
      assert.equal(res.status, 200, `right token → ${res.status}`);
      const c = await httpClient(srv.url, { requestInit: { headers: { Authorization: 'Bearer s3cret-token' } } });
      const r = await c.client.callTool({ name: 'echo', arguments: { text: 'authorized' } });
      assert.equal(r.structuredContent.text, 'authorized');
      await c.close();
    } finally {
      await srv.stop().finally(() => srv.kill());
    }
  });

  test('413 for a body over --max-message-bytes; the server keeps serving', T, async () => {
    const srv = await startHttp({ args: ['--max-message-bytes', '4096'] });
    try {
      const t = { port: srv.port };
      const { session } = await rawHttpSession(t);
      const big = { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'echo', arguments: { text: 'x'.repeat(10000) } } };
      const res = await httpRequest(t, { headers: mcpHeaders({ session }), body: big });
      assert.equal(res.status, 413, `${res.status} ${res.body}`);
      const { response } = await rawHttpCall(t, session, 'tools/call', { name: 'echo', arguments: { text: 'small' } });
      assert.equal(response.result.structuredContent.text, 'small');
    } finally {
      await srv.stop().finally(() => srv.kill());
    }
  });

  test('a 100 MB chunked body (no Content-Length) is refused with 413 and memory stays bounded', { timeout: 60000 }, async () => {
    const srv = await startHttp();
    try {
      const t = { port: srv.port };
      const { session } = await rawHttpSession(t);
      const res = await new Promise((resolve, reject) => {
        const req = http.request({ host: '127.0.0.1', port: srv.port, method: 'POST', path: '/mcp', headers: mcpHeaders({ session, extra: { Authorization: `Bearer ${srv.token}` } }), agent: false }, (r) => {
          r.resume();
          resolve({ status: r.statusCode });
        });
        req.on('error', (e) => (req.res ? undefined : reject(e)));
        const chunk = Buffer.alloc(1 << 20, 0x41);
        let i = 0;
        const pump = () => {
          while (i < 100 && !req.destroyed) {
            i++;
            if (i === 1) req.write('{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"');
            if (!req.write(chunk)) return req.once('drain', pump);
          }
          if (!req.destroyed) req.end('"}}');
        };
        req.on('response', () => (i = 100));
        pump();
      });
      assert.equal(res.status, 413);
      const st = procStatus(srv.pid);
      console.log(`HTTP server VmHWM after a 100 MB chunked body: ${st.hwmKb} kB`);
      if (!isSanitized()) assert.ok(st.hwmKb < 64 * 1024, `VmHWM ${st.hwmKb} kB`);
      assert.equal((await rawHttpCall(t, session, 'ping')).res.status, 200, 'still serving');
    } finally {
      await srv.stop().finally(() => srv.kill());
    }
  });

  test('legacy /messages refuses a body over the cap with 413', T, async () => {
    const srv = await startHttp({ args: ['--max-message-bytes', '4096'] });
    try {
      const t = { port: srv.port };
      const { res } = await httpOpen(t, { path: '/sse', headers: { Accept: 'text/event-stream' } });
      try {
        let text = '';
        const ep = deferred();
        res.setEncoding('utf8');
        res.on('data', (d) => {
          text += d;
          const m = text.match(/event: ?endpoint\r?\ndata: ?([^\r\n]+)/);
          if (m) ep.resolve(m[1]);
        });
        const u = new URL(await withTimeout(ep.promise, 30000, 'the endpoint event'), srv.base);
        const big = await httpRequest(t, { path: u.pathname + u.search, headers: { 'Content-Type': 'application/json' }, body: { jsonrpc: '2.0', id: 1, method: 'ping', params: { pad: 'x'.repeat(10000) } } });
        assert.equal(big.status, 413);
      } finally {
        res.destroy();
      }
    } finally {
      await srv.stop().finally(() => srv.kill());
    }
  });

  test('413 for a 17 MiB body at the default 16 MiB cap', T, async () => {
    const srv = await startHttp();
    try {
      const t = { port: srv.port };
      const { session } = await rawHttpSession(t);
      const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'echo', arguments: { text: 'x'.repeat(17 * 1024 * 1024) } } });
      const res = await httpRequest(t, { headers: mcpHeaders({ session }), body, timeout: 20000 });
      assert.equal(res.status, 413, `${res.status}`);
      assert.equal((await rawHttpCall(t, session, 'ping')).res.status, 200);
    } finally {
      await srv.stop().finally(() => srv.kill());
    }
  });
});

