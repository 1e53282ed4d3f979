// Idle and half-sent connections (issue 7, point 9): they cost no thread,
// the server closes them after CONTAINER_MCP_HTTP_TIMEOUT, and connections
// are capped per client address (CONTAINER_MCP_HTTP_CLIENT_CONNECTIONS) and
// in all (CONTAINER_MCP_HTTP_MAX_CONNECTIONS), while real clients, long calls
// and open event streams go on being served.
import assert from 'node:assert/strict';
import net from 'node:net';
import { describe, test } from 'node:test';

import { deferred, eventually, heldConnections, httpOpen, httpRequest, procStatus, rawHttpCall, rawHttpSession, startHttp, withTimeout } from './lib.mjs';

// A raw connection from `from` (a loopback address) that sends `send` and
// then nothing.  `closed` resolves when the server ends it: read returns 0
// (end) or the connection is reset.
function idleConnection(port, from, send = '') {
  const opened = deferred();
  const closed = deferred();
  const sock = net.connect({ port, host: '127.0.0.1', localAddress: from }, () => {
    if (send) sock.write(send);
    opened.resolve();
  });
  sock.on('error', (e) => {
    opened.reject(e);
    closed.resolve(e.code);
  });
  sock.on('end', () => closed.resolve('end'));
  sock.on('close', () => closed.resolve('close'));
  sock.resume();
  return { sock, opened: opened.promise, closed: closed.promise, isClosed: () => sock.destroyed || sock.readableEnded };
}

// One request from a given source address on a fresh connection: the status,
// or the error when the server closes it first.
function requestFrom(port, from, token) {
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'limits', version: '1' } } });
  return withTimeout(
    new Promise((resolve) => {
      let buf = '';
      const sock = net.connect({ port, host: '127.0.0.1', localAddress: from }, () =>
        sock.write(
          `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${token}\r\n` +
            `Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n` +
            `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
        ),
      );
      sock.setEncoding('utf8');
      sock.on('data', (d) => (buf += d));
      sock.on('error', (e) => resolve(e.code));
      sock.on('close', () => resolve(buf.match(/^HTTP\/1\.1 (\d+)/)?.[1] ?? 'closed'));
    }),
    10000,
    `a request from ${from}`,
  );
}

// Closed without an HTTP status line: refused at accept.
const refused = (r) => !/^\d+$/.test(r);

const HALF = (port) => `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nContent-Le`;

describe('HTTP connection limits', () => {
  test('150 idle and half-sent connections: no thread each, closed after the timeout, others served meanwhile', { timeout: 60000 }, async () => {
    const srv = await startHttp({ env: { CONTAINER_MCP_HTTP_TIMEOUT: '3' } });
    const conns = [];
    try {
      const target = { port: srv.port, token: srv.token };
      const threads0 = procStatus(srv.pid).threads;
      // a legacy event stream, open across the timeout
      const { res } = await httpOpen(target, { path: '/sse', headers: { Accept: 'text/event-stream' } });
      let text = '';
      const endpoint = deferred();
      const pong = deferred();
      res.setEncoding('utf8');
      res.on('data', (d) => {
        text += d;
        const m = text.match(/event: ?endpoint\r?\ndata: ?([^\r\n]+)/);
        if (m) endpoint.resolve(m[1]);
        if (/"id":"after-timeout"/.test(text)) pong.resolve();
      });
      const ep = await withTimeout(endpoint.promise, 30000, 'the endpoint event');
      // and a long call (no progress token: a plain JSON reply), longer than the timeout
      const { session } = await rawHttpSession(target);
      const longCall = rawHttpCall(target, session, 'tools/call', { name: 'sleep', arguments: { ms: 4000 } }, { id: 'long' });

      for (let i = 0; i < 150; i++) conns.push(idleConnection(srv.port, '127.0.0.1', i % 2 ? HALF(srv.port) : ''));
      await Promise.all(conns.map((c) => c.opened));
      // the server has accepted them all (its fd count says so) ...
      const { session: s2 } = await rawHttpSession(target);
      const echo = await rawHttpCall(target, s2, 'tools/call', { name: 'echo', arguments: { text: 'served' } });
      assert.equal(echo.response?.result?.structuredContent?.text, 'served', 'a normal client is served while 150 connections idle');
      const threads = procStatus(srv.pid).threads;
      console.log(`threads: ${threads0} before, ${threads} with 150 idle connections open`);
      assert.ok(threads <= threads0 + 8, `threads grew from ${threads0} to ${threads} with 150 idle connections`);
      assert.ok(conns.every((c) => !c.isClosed()), 'none was closed before the timeout');

      // ... and closes every one of them after the timeout
      const how = await withTimeout(Promise.all(conns.map((c) => c.closed)), 20000, 'the server to close 150 idle connections');
      assert.ok(how.every((h) => ['end', 'close', 'ECONNRESET'].includes(h)), `closed by the server: ${[...new Set(how)]}`);

      // the long call outlived the timeout and got its reply
      const long = await longCall;
      assert.equal(long.res.status, 200);
      assert.ok(long.response?.result?.structuredContent?.sleptMs >= 4000, `the long call's reply: ${long.res.body}`);
      // the event stream too: a message posted now is answered on it
      const u = new URL(ep, srv.base);
      const post = await httpRequest(target, { path: u.pathname + u.search, headers: { 'Content-Type': 'application/json' }, body: { jsonrpc: '2.0', id: 'after-timeout', method: 'ping' } });
      assert.equal(post.status, 202);
      await withTimeout(pong.promise, 30000, 'the reply on the event stream opened before the timeout');
      res.destroy();
    } finally {
      for (const c of conns) c.sock.destroy();
      await srv.stop().finally(() => srv.kill());
    }
  });

  test('over the per-client cap connections are closed at once, past the global cap none is accepted; others are served', { timeout: 60000 }, async () => {
    const srv = await startHttp({
      // one pool thread: the cap is split among the threads, and a thread
      // whose share is full accepts nothing, so with several the server may
      // hold a few less than 30 (never more)
      env: { CONTAINER_MCP_HTTP_TIMEOUT: '600', CONTAINER_MCP_HTTP_CLIENT_CONNECTIONS: '20', CONTAINER_MCP_HTTP_MAX_CONNECTIONS: '30', CONTAINER_MCP_HTTP_THREADS: '1' },
    });
    const conns = [];
    try {
      // 25 from one address: 20 stay, 5 are closed by the server
      const a = Array.from({ length: 25 }, () => idleConnection(srv.port, '127.0.0.1'));
      conns.push(...a);
      await Promise.all(a.map((c) => c.opened.catch(() => {})));
      const closedA = await withTimeout(Promise.all(a.slice(20).map((c) => c.closed)), 10000, 'the 5 connections over the per-client cap to be closed');
      console.log(`over the per-client cap: ${closedA}`);
      assert.ok(a.slice(0, 20).every((c) => !c.isClosed()), 'the first 20 stay open');
      assert.ok(refused(await requestFrom(srv.port, '127.0.0.1', srv.token)), 'a 21st connection from 127.0.0.1 is refused');
      assert.equal(await requestFrom(srv.port, '127.0.0.2', srv.token), '200', 'another address is served');
      // 15 more from a second address: 10 fit under the global cap of 30; past
      // it the server accepts nothing more (the rest wait in the backlog)
      const held = () => heldConnections(srv.pid, srv.port);
      await eventually(() => held() === 20, 10000, `the server to hold the 20 connections of the first address (it holds ${held()})`);
      const b = Array.from({ length: 15 }, () => idleConnection(srv.port, '127.0.0.2'));
      conns.push(...b);
      await Promise.all(b.map((c) => c.opened));
      await eventually(() => held() === 30, 30000, `the server to hold 30 connections (it holds ${held()})`);
      let served = false;
      const pending = requestFrom(srv.port, '127.0.0.3', srv.token).then((r) => ((served = true), r));
      // a request on a connection the server did accept is answered ...
      const accepted = b.find((c) => !c.isClosed());
      const answered = deferred();
      accepted.sock.on('data', () => answered.resolve());
      accepted.sock.write(`GET / HTTP/1.1\r\nHost: 127.0.0.1:${srv.port}\r\nAuthorization: Bearer ${srv.token}\r\n\r\n`);
      await withTimeout(answered.promise, 30000, 'an answer on an accepted connection');
      // ... while one from a third address is not, until connections are freed
      assert.equal(served, false, 'a connection past the global cap was served');
      assert.ok(held() <= 30, `the server holds ${held()} connections, over the cap of 30`);
      for (const c of a.slice(0, 5)) c.sock.destroy();
      assert.equal(await pending, '200', 'served once connections are freed');
    } finally {
      for (const c of conns) c.sock.destroy();
      await srv.stop().finally(() => srv.kill());
    }
  });
});
