// Streamable HTTP under churn: many sessions, clients that vanish mid-call,
// and sessions that must not wait for each other.
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';

import { assertSlept } from './checks.mjs';
import {
  LATEST,
  deferred,
  eventually,
  fdCount,
  httpClient,
  httpRequest,
  keepAliveAgent,
  procStatus,
  rawHttpCall,
  rawHttpSession,
  startHttp,
  withTimeout,
} from './lib.mjs';

describe('Streamable HTTP under load', () => {
  let srv;
  let target;
  before(async () => {
    srv = await startHttp();
    target = { port: srv.port };
  });
  after(async () => {
    if (srv) await srv.stop().finally(() => srv.kill());
  });

  // Open `n` sessions `width` at a time; each does one call, then (unless
  // `abandon`) is deleted.  Returns the ids of those left open.
  async function churn(n, { width = 16, abandonEvery = 0 } = {}) {
    const agent = keepAliveAgent();
    const left = [];
    try {
      for (let i = 0; i < n; i += width) {
        await Promise.all(
          Array.from({ length: Math.min(width, n - i) }, async (_, j) => {
            const k = i + j;
            const { session } = await rawHttpSession(target, { agent });
            const { response } = await rawHttpCall(target, session, 'tools/call', { name: 'echo', arguments: { text: `s${k}` } }, { agent });
            assert.equal(response.result.structuredContent.text, `s${k}`);
            if (abandonEvery && k % abandonEvery === 0) {
              left.push(session);
              return;
            }
            const del = await httpRequest(target, { method: 'DELETE', headers: { 'Mcp-Session-Id': session }, agent });
            assert.ok([200, 202, 204].includes(del.status), `DELETE → ${del.status}`);
          }),
        );
      }
    } finally {
      agent.destroy();
    }
    return left;
  }

  // RSS is printed, not judged (bench/footprint.mjs has the figures and
  // their targets; LeakSanitizer catches leaks in the ASan run).
  test('1,000 sessions opened and dropped: still serving, fds do not grow', { timeout: 90000 }, async () => {
    await churn(100); // warm up allocator, thread pools, caches
    const fd0 = fdCount(srv.pid);
    const m0 = procStatus(srv.pid);
    const t0 = Date.now();
    // 1,000 sessions; every tenth is abandoned (left open) and deleted at the end
    const abandoned = await churn(1000, { abandonEvery: 10 });
    assert.equal(abandoned.length, 100);
    const agent = keepAliveAgent();
    try {
      for (const s of abandoned) {
        const del = await httpRequest(target, { method: 'DELETE', headers: { 'Mcp-Session-Id': s }, agent });
        assert.ok([200, 202, 204].includes(del.status), `DELETE of an abandoned session → ${del.status}`);
      }
    } finally {
      agent.destroy();
    }
    const elapsed = Date.now() - t0;
    // still serving, and a fresh session works
    const { session } = await rawHttpSession(target);
    assert.equal((await rawHttpCall(target, session, 'ping')).res.status, 200);
    await httpRequest(target, { method: 'DELETE', headers: { 'Mcp-Session-Id': session } });
    // connections are closed server-side once our agents are gone
    const fd1 = await eventually(() => {
      const n = fdCount(srv.pid);
      return n <= fd0 + 2 ? n : 0;
    }, 5000, `server fds back near ${fd0}`).catch(() => fdCount(srv.pid));
    const m1 = procStatus(srv.pid);
    const growthKb = m1.rssKb - m0.rssKb;
    console.log(`1000 sessions in ${elapsed} ms; RSS ${m0.rssKb} → ${m1.rssKb} kB (+${growthKb}); fds ${fd0} → ${fd1}`);
    assert.ok(fd1 <= fd0 + 2, `file descriptors grew from ${fd0} to ${fd1}`);
  });

  // Disconnection is not cancellation (MCP 2025-11-25, Streamable HTTP): the
  // calls run to their end, their results kept for a client that comes back
  // (http-long.test.mjs); the connections are closed at once.
  test('a client that disconnects mid-call: the server closes the connection and keeps serving', { timeout: 30000 }, async () => {
    const { session } = await rawHttpSession(target);
    const fd0 = fdCount(srv.pid);
    for (let i = 0; i < 5; i++) {
      const body = JSON.stringify({
        jsonrpc: '2.0',
        id: `gone-${i}`,
        method: 'tools/call',
        params: { name: 'sleep', arguments: { ms: 2000, steps: 20 }, _meta: { progressToken: `gone-${i}` } },
      });
      const sock = net.connect(srv.port, '127.0.0.1');
      const gotProgress = deferred();
      let buf = '';
      sock.setEncoding('utf8');
      sock.on('data', (d) => {
        buf += d;
        if (buf.includes('notifications/progress')) gotProgress.resolve();
      });
      sock.on('error', () => {});
      sock.write(
        `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${srv.port}\r\nAuthorization: Bearer ${srv.token}\r\nAccept: application/json, text/event-stream\r\n` +
          `Content-Type: application/json\r\nMcp-Session-Id: ${session}\r\nMCP-Protocol-Version: ${LATEST}\r\n` +
          `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      );
      try {
        await withTimeout(gotProgress.promise, 30000, 'progress on the raw socket');
        assert.match(buf, /^HTTP\/1\.1 200/);
      } finally {
        sock.destroy();
      }
    }
    // the same session and new ones still work
    const { response } = await rawHttpCall(target, session, 'tools/call', { name: 'echo', arguments: { text: 'after disconnect' } });
    assert.equal(response.result.structuredContent.text, 'after disconnect');
    const c = await httpClient(srv.url);
    assert.deepEqual(await c.client.ping(), {});
    await c.close();
    // the dropped connections are closed on the server side too, and the
    // calls (each holding an eventfd while it runs) end
    await eventually(() => fdCount(srv.pid) <= fd0 + 1, 30000, `server fds back near ${fd0} (now ${fdCount(srv.pid)})`);
    await httpRequest(target, { method: 'DELETE', headers: { 'Mcp-Session-Id': session } });
  });

  // Not blocked = answered while the 10 s sleep still runs (no stopwatch on
  // the echo, which a loaded machine could slow).
  test('one slow call does not block another session', { timeout: 60000 }, async () => {
    const a = await httpClient(srv.url);
    const b = await httpClient(srv.url);
    try {
      const started = deferred();
      let sleepDoneAt = 0;
      const t0 = Date.now();
      const slow = a.client
        .callTool({ name: 'sleep', arguments: { ms: 10000, steps: 100 } }, undefined, { onprogress: () => started.resolve(), timeout: 60000 })
        .then((r) => {
          sleepDoneAt = Date.now();
          return r;
        });
      await withTimeout(started.promise, 30000, 'the sleep to start');
      const r = await b.client.callTool({ name: 'echo', arguments: { text: 'not blocked' } });
      assert.equal(r.structuredContent.text, 'not blocked');
      assert.equal(sleepDoneAt, 0, 'echo completed before the sleep');
      // the same holds inside one session: a second call is not queued behind the first
      const r2 = await a.client.callTool({ name: 'echo', arguments: { text: 'same session' } });
      assert.equal(r2.structuredContent.text, 'same session');
      assert.equal(sleepDoneAt, 0, 'echo on the same session completed before the sleep');
      const s = await slow;
      assertSlept(s.structuredContent.sleptMs, 10000);
      assert.ok(sleepDoneAt - t0 >= 9900, 'the sleep really slept');
    } finally {
      await a.close();
      await b.close();
    }
  });

  test('50 concurrent calls across 10 sessions all complete', { timeout: 30000 }, async () => {
    const clients = await Promise.all(Array.from({ length: 10 }, () => httpClient(srv.url)));
    try {
      const calls = [];
      for (const [i, c] of clients.entries()) {
        for (let j = 0; j < 5; j++) {
          calls.push(c.client.callTool({ name: 'sleep', arguments: { ms: 100, steps: 2 } }).then((r) => assertSlept(r.structuredContent.sleptMs, 100)));
          calls.push(c.client.callTool({ name: 'echo', arguments: { text: `${i}.${j}` } }).then((r) => assert.equal(r.structuredContent.text, `${i}.${j}`)));
        }
      }
      await Promise.all(calls);
    } finally {
      await Promise.all(clients.map((c) => c.close()));
    }
  });

  test('SIGTERM during a long call: the server exits promptly with 0', { timeout: 60000 }, async () => {
    const s = await startHttp();
    try {
      const c = await httpClient(s.url);
      const started = deferred();
      const call = c.client.callTool({ name: 'sleep', arguments: { ms: 60000, steps: 600 } }, undefined, { onprogress: () => started.resolve(), timeout: 120000 });
      call.catch(() => {});
      await withTimeout(started.promise, 30000, 'the sleep to start');
      // stop() fails unless the server exits cleanly within 30 s, half the
      // sleep it interrupts: the bound is the call's, not the machine's.
      const t0 = Date.now();
      await s.stop('SIGTERM', 30000);
      console.log(`exit after SIGTERM took ${Date.now() - t0} ms`);
      await c.client.close();
    } finally {
      s.kill();
    }
  });

  test('garbage on the socket does not hurt the server', { timeout: 15000 }, async () => {
    for (const junk of ['GARBAGE\r\n\r\n', 'POST /mcp HTTP/1.1\r\nContent-Length: -5\r\n\r\n', '\x00\x01\x02\x03'.repeat(100), 'GET / HTTP/1.1\r\nHost: ' + 'a'.repeat(100000) + '\r\n\r\n']) {
      await new Promise((resolve) => {
        const sock = net.connect(srv.port, '127.0.0.1', () => sock.end(junk));
        sock.on('error', resolve);
        sock.on('close', resolve);
        sock.resume();
        sock.setTimeout(3000, () => sock.destroy());
      });
    }
    const c = await httpClient(srv.url);
    assert.deepEqual(await c.client.ping(), {});
    await c.close();
    assert.ok(srv.alive());
  });
});
