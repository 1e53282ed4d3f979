// The same HTTP over a Unix socket (serve --socket PATH): only the owner may
// connect (mode 0600), and the SDK client works through a custom fetch.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { Agent, fetch as undiciFetch } from 'undici';

import { assertProgress, assertSlept, checkSystemStatus } from './checks.mjs';
import { httpClient, httpRequest, initBody, mcpHeaders, rawHttpCall, rawHttpSession, startSocket, tmpDir } from './lib.mjs';

const T = { timeout: 30000 };

describe('Unix socket', () => {
  let dir;
  let srv;
  let agent;
  let fetchViaSocket;
  before(async () => {
    dir = tmpDir();
    srv = await startSocket({ socketPath: path.join(dir, 'mcp.sock') });
    agent = new Agent({ connect: { socketPath: srv.socketPath } });
    fetchViaSocket = (url, init) => undiciFetch(url, { ...init, dispatcher: agent });
  });
  after(async () => {
    try {
      if (srv) await srv.stop().finally(() => srv.kill());
      await agent?.close();
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test('the socket is created with mode 0600', T, () => {
    const st = fs.statSync(srv.socketPath);
    assert.ok(st.isSocket(), 'a socket file');
    assert.equal((st.mode & 0o777).toString(8), '600');
  });

  test('SDK client over the socket: initialize, list, call', T, async () => {
    const c = await httpClient('http://localhost/mcp', { fetch: fetchViaSocket });
    try {
      assert.equal(c.client.getServerVersion().name, 'container-mcp');
      const { tools } = await c.client.listTools();
      assert.ok(tools.some((t) => t.name === 'echo'));
      const r = await c.client.callTool({ name: 'echo', arguments: { text: 'through the socket' } });
      assert.deepEqual(r.structuredContent, { text: 'through the socket' });
      checkSystemStatus(await c.client.callTool({ name: 'system_status', arguments: {} }));
      const seen = [];
      const s = await c.client.callTool({ name: 'sleep', arguments: { ms: 100, steps: 2 } }, undefined, { onprogress: (p) => seen.push(p) });
      assertSlept(s.structuredContent.sleptMs, 100);
      assertProgress(seen, 2);
    } finally {
      await c.close();
    }
    assert.deepEqual(c.errors.map(String), []);
  });

  test('raw HTTP over the socket: session, call, DELETE, checks still apply', T, async () => {
    const t = { socketPath: srv.socketPath };
    const { session } = await rawHttpSession(t, { headers: { Host: 'localhost' } });
    const { res, response } = await rawHttpCall(t, session, 'ping', undefined, { headers: { Host: 'localhost' } });
    assert.equal(res.status, 200);
    assert.deepEqual(response.result, {});
    const bad = await httpRequest(t, { headers: mcpHeaders({ extra: { Host: 'localhost', Origin: 'http://evil.example' } }), body: initBody() });
    assert.equal(bad.status, 403, 'foreign Origin refused over the socket too');
    const del = await httpRequest(t, { method: 'DELETE', headers: { Host: 'localhost', 'Mcp-Session-Id': session } });
    assert.ok([200, 202, 204].includes(del.status));
  });

  test('the server can be restarted on the same socket path', T, async () => {
    const d = tmpDir();
    try {
      const sock = path.join(d, 'x.sock');
      const s1 = await startSocket({ socketPath: sock });
      await s1.stop().finally(() => s1.kill());
      const s2 = await startSocket({ socketPath: sock });
      try {
        const { session } = await rawHttpSession({ socketPath: sock });
        assert.ok(session);
        assert.equal((fs.statSync(sock).mode & 0o777).toString(8), '600');
      } finally {
        await s2.stop().finally(() => s2.kill());
      }
    } finally {
      fs.rmSync(d, { recursive: true, force: true });
    }
  });
});
