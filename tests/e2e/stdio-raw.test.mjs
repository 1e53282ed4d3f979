// MCP over stdio, byte by byte: version negotiation for every version, and
// bad input the SDK would never send.  The server must answer each with the
// right JSON-RPC error and keep serving.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { assertSlept } from './checks.mjs';
import { DEFAULT_CAP, DIAG, LATEST, RawStdio, SUPPORTED, VERSION, isSanitized, procStatus } from './lib.mjs';

const T = { timeout: 30000 };

// Run `fn` with a raw stdio server, then close stdin and check a clean exit.
async function withRaw(fn, args, opts) {
  const s = new RawStdio(args, opts);
  try {
    await fn(s);
    await s.close();
  } finally {
    s.kill();
  }
}

function assertError(msg, code, id) {
  assert.ok(msg.error, `expected an error, got ${JSON.stringify(msg)}`);
  assert.equal(msg.jsonrpc, '2.0');
  if (Array.isArray(code)) assert.ok(code.includes(msg.error.code), `error code ${msg.error.code} not in ${code}: ${JSON.stringify(msg)}`);
  else assert.equal(msg.error.code, code, JSON.stringify(msg));
  assert.equal(typeof msg.error.message, 'string');
  assert.ok(msg.error.message.length > 0);
  if (id !== undefined) assert.deepEqual(msg.id, id);
}

describe('stdio: version negotiation', () => {
  for (const v of SUPPORTED) {
    test(`client asks for ${v} and gets ${v}`, T, async () => {
      await withRaw(async (s) => {
        const r = await s.initialize(v);
        assert.equal(r.jsonrpc, '2.0');
        assert.equal(r.result.protocolVersion, v);
        assert.equal(r.result.serverInfo.name, 'container-mcp');
        assert.equal(r.result.serverInfo.version, VERSION);
        assert.deepEqual(r.result.capabilities.tools, { listChanged: false });
        assert.equal(typeof r.result.capabilities.logging, 'object');
        assert.ok(typeof r.result.instructions === 'string' && r.result.instructions.length > 20);
        const l = await s.request('tools/list', {});
        assert.ok(l.result.tools.length >= 1);
      });
    });
  }

  for (const v of ['1999-01-01', '2024-10-07', 'latest']) {
    test(`client asks for unsupported ${v} and gets ${LATEST}`, T, async () => {
      await withRaw(async (s) => {
        const r = await s.initialize(v);
        assert.equal(r.result.protocolVersion, LATEST);
      });
    });
  }

  test('initialize without protocolVersion is -32602', T, async () => {
    await withRaw(async (s) => {
      const r = await s.request('initialize', { capabilities: {}, clientInfo: { name: 'x', version: '1' } }, { id: 3 });
      assertError(r, -32602, 3);
      assert.equal((await s.initialize()).result.protocolVersion, LATEST);
    });
  });

  test('batches: accepted for 2025-03-26, refused with -32600 for 2025-11-25', T, async () => {
    await withRaw(async (s) => {
      await s.initialize('2025-03-26');
      await s.write(JSON.stringify([
        { jsonrpc: '2.0', id: 'b1', method: 'ping' },
        { jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 'x', progress: 1 } },
        { jsonrpc: '2.0', id: 'b2', method: 'tools/list' },
      ]));
      const batch = await s.next((m) => Array.isArray(m), 10000, 'a batch response');
      assert.equal(batch.length, 2, `one response per request: ${JSON.stringify(batch).slice(0, 300)}`);
      const byId = Object.fromEntries(batch.map((m) => [m.id, m]));
      assert.deepEqual(byId.b1.result, {});
      assert.ok(Array.isArray(byId.b2.result.tools));
    });
    await withRaw(async (s) => {
      await s.initialize(LATEST);
      await s.write(JSON.stringify([{ jsonrpc: '2.0', id: 'b1', method: 'ping' }]));
      const r = await s.next((m) => !Array.isArray(m) && m.error, 10000, 'the batch refusal');
      assertError(r, -32600);
      assert.deepEqual((await s.request('ping', undefined, { id: 'after' })).result, {});
    });
  });
});

describe('stdio: bad input', () => {
  test('requests before initialize get an error that mentions initialize', T, async () => {
    await withRaw(async (s) => {
      for (const [i, method] of ['tools/list', 'tools/call'].entries()) {
        const r = await s.request(method, method === 'tools/call' ? { name: 'echo', arguments: { text: 'x' } } : {}, { id: i + 1 });
        assert.ok(r.error, `${method} before initialize must fail: ${JSON.stringify(r)}`);
        assert.equal(r.id, i + 1);
        assert.ok(r.error.code < 0);
        assert.match(r.error.message, /initiali[sz]/i);
      }
      // ping is allowed before initialize (the spec lets clients ping early)
      // but we do not insist; after initialize everything works.
      const init = await s.initialize();
      assert.equal(init.result.protocolVersion, LATEST);
      assert.ok((await s.request('tools/list', {})).result.tools.length > 0);
    });
  });

  test('a second initialize on the same session is refused', T, async () => {
    await withRaw(async (s) => {
      await s.initialize();
      const r = await s.request('initialize', { protocolVersion: LATEST, capabilities: {}, clientInfo: { name: 'x', version: '1' } }, { id: 'again' });
      assert.ok(r.error, `second initialize: ${JSON.stringify(r)}`);
      assert.equal(r.id, 'again');
      assert.deepEqual((await s.request('ping')).result, {});
    });
  });

  test('ping answers {}', T, async () => {
    await withRaw(async (s) => {
      await s.initialize();
      const r = await s.request('ping', undefined, { id: 42 });
      assert.deepEqual(r, { jsonrpc: '2.0', id: 42, result: {} });
      const r2 = await s.request('ping', {}, { id: 'str-id' });
      assert.deepEqual(r2, { jsonrpc: '2.0', id: 'str-id', result: {} });
    });
  });

  test('malformed JSON is -32700 with id null; the next line is served', T, async () => {
    await withRaw(async (s) => {
      await s.initialize();
      for (const bad of ['{"jsonrpc":"2.0","id":1,"method":', 'not json at all', '{"a":1}}', '\u0000\u0001garbage', '[1,2']) {
        await s.write(bad);
        const r = await s.next((m) => m.error && m.id === null, 5000, `the parse error for ${JSON.stringify(bad)}`);
        assertError(r, -32700, null);
      }
      assert.deepEqual((await s.request('ping', undefined, { id: 9 })).result, {});
    });
  });

  test('invalid requests are -32600', T, async () => {
    await withRaw(async (s) => {
      await s.initialize();
      // wrong jsonrpc version, id echoed
      await s.send({ jsonrpc: '1.0', id: 11, method: 'ping' });
      assertError(await s.response(11), -32600, 11);
      // method not a string
      await s.send({ jsonrpc: '2.0', id: 12, method: 5 });
      assertError(await s.response(12), -32600, 12);
      // a JSON value that is not a message
      await s.write('42');
      assertError(await s.next((m) => m.error && m.id === null), -32600, null);
      // an id that is neither string nor number
      await s.send({ jsonrpc: '2.0', id: { x: 1 }, method: 'ping' });
      assertError(await s.next((m) => m.error && m.id === null), -32600, null);
      assert.deepEqual((await s.request('ping', undefined, { id: 13 })).result, {});
    });
  });

  test('unknown method is -32601 with the id echoed; unknown notifications get no reply', T, async () => {
    await withRaw(async (s) => {
      await s.initialize();
      assertError(await s.request('no/such/method', {}, { id: 77 }), -32601, 77);
      assertError(await s.request('tools/frobnicate', {}, { id: 'abc-77' }), -32601, 'abc-77');
      // notifications (no id) never get a reply, even unknown or malformed ones
      await s.notify('notifications/no_such_thing', { x: 1 });
      await s.notify('notifications/cancelled', { requestId: 'never-sent' });
      await s.notify('notifications/progress', 'not an object');
      const before = s.messages.length;
      const p = await s.request('ping', undefined, { id: 'after-notes' });
      assert.deepEqual(p.result, {});
      assert.equal(s.messages.length, before + 1, `replies to notifications: ${JSON.stringify(s.messages.slice(before))}`);
    });
  });

  test('wrong-typed params are -32602 with the id echoed', T, async () => {
    await withRaw(async (s) => {
      await s.initialize();
      assertError(await s.request('tools/call', { name: 5 }, { id: 21 }), -32602, 21);
      assertError(await s.request('tools/call', { name: 'echo', arguments: 'text' }, { id: 22 }), -32602, 22);
      assertError(await s.request('tools/call', {}, { id: 23 }), -32602, 23);
      assertError(await s.request('tools/call', { name: 'no_such_tool', arguments: {} }, { id: 24 }), -32602, 24);
      assertError(await s.request('tools/list', { cursor: 17 }, { id: 25 }), -32602, 25);
      assertError(await s.request('tools/list', { cursor: 'garbage' }, { id: 26 }), -32602, 26);
      assertError(await s.request('logging/setLevel', { level: 3 }, { id: 27 }), -32602, 27);
      assertError(await s.request('tools/call', 'params as a string', { id: 28 }), [-32602, -32600], 28);
      const ok = await s.request('tools/call', { name: 'echo', arguments: { text: 'fine' } }, { id: 29 });
      assert.deepEqual(ok.result.structuredContent, { text: 'fine' });
    });
  });

  test('tool argument errors are isError results', T, async () => {
    await withRaw(async (s) => {
      await s.initialize();
      const r = await s.request('tools/call', { name: 'echo', arguments: { text: 5 } });
      assert.equal(r.result?.isError, true, JSON.stringify(r));
      const text = r.result.content.map((c) => c.text).join('\n');
      assert.match(text, /\btext\b/);
      assert.match(text, /expected string/);
    });
  });

  test('cancellation stops the call: no more progress and no result for its id', T, async () => {
    await withRaw(async (s) => {
      await s.initialize();
      await s.send({ jsonrpc: '2.0', id: 'long', method: 'tools/call', params: { name: 'sleep', arguments: { ms: 60000, steps: 600 }, _meta: { progressToken: 'tok-long' } } });
      const first = await s.next((m) => m.method === 'notifications/progress' && m.params.progressToken === 'tok-long', 5000, 'first progress');
      assert.ok(first.params.progress <= 1, `first progress: ${first.params.progress}`);
      assert.equal(first.params.total, 600);
      await s.notify('notifications/cancelled', { requestId: 'long', reason: 'test' });
      assert.deepEqual((await s.request('ping', undefined, { id: 'p1' })).result, {});
      const mark = s.messages.length;
      // A 400 ms call of our own: the cancelled one (100 ms slices) would send
      // about four more progress notifications meanwhile.
      const r = await s.request('tools/call', { name: 'sleep', arguments: { ms: 400, steps: 1 } }, { id: 'barrier' });
      assertSlept(r.result.structuredContent.sleptMs, 400);
      const late = s.messages.slice(mark).filter((m) => m.params?.progressToken === 'tok-long');
      assert.ok(late.length <= 1, `progress after cancel: ${late.length}`);
      assert.equal(s.messages.filter((m) => m.id === 'long').length, 0, 'no response for the cancelled request');
      const e = await s.request('tools/call', { name: 'echo', arguments: { text: 'still here' } });
      assert.equal(e.result.structuredContent.text, 'still here');
    });
  });

  test('stdin closed while a call runs: its result is still written, then the server exits 0', T, async () => {
    const s = new RawStdio();
    try {
      await s.initialize();
      await s.send({ jsonrpc: '2.0', id: 'last', method: 'tools/call', params: { name: 'sleep', arguments: { ms: 300, steps: 3 } } });
      await s.close(5000);
      const r = s.messages.find((m) => m.id === 'last');
      assert.ok(r, 'the result of the call in flight at EOF');
      assertSlept(r.result.structuredContent.sleptMs, 300);
    } finally {
      s.kill();
    }
  });

  test('SIGTERM during a long call: the server exits promptly with 0', { timeout: 60000 }, async () => {
    const s = new RawStdio();
    try {
      await s.initialize();
      await s.send({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'sleep', arguments: { ms: 60000, steps: 600 }, _meta: { progressToken: 1 } } });
      await s.next((m) => m.method === 'notifications/progress', 5000, 'progress');
      // stop() fails unless the server exits cleanly within 30 s, half the
      // sleep it interrupts: the bound is the call's, not the machine's.
      await s.srv.stop('SIGTERM', 30000);
    } finally {
      s.kill();
    }
  });

  test('SIGTERM while idle exits 0', T, async () => {
    const s = new RawStdio();
    try {
      await s.initialize();
      await s.srv.stop('SIGTERM');
    } finally {
      s.kill();
    }
  });

  test('hostile JSON: deep nesting, invalid UTF-8, NUL bytes; CRLF line ends are fine', T, async () => {
    await withRaw(async (s) => {
      await s.initialize();
      await s.write('['.repeat(200000));
      assertError(await s.next((m) => m.error && m.id === null, 5000, 'the error for deep nesting'), -32700, null);
      const deep = '{"a":'.repeat(1500) + '1' + '}'.repeat(1500);
      await s.write(`{"jsonrpc":"2.0","id":"deep","method":"tools/call","params":{"name":"echo","arguments":{"text":"x","extra":${deep}}}}`);
      const d = await s.response('deep');
      assert.ok(d.error || d.result?.isError, `deeply nested arguments are refused: ${JSON.stringify(d).slice(0, 200)}`);
      await s.write(Buffer.concat([Buffer.from('{"jsonrpc":"2.0","id":"utf","method":"tools/call","params":{"name":"echo","arguments":{"text":"'), Buffer.from([0xff, 0xfe, 0xc3]), Buffer.from('"}}}')]));
      const u = await s.next((m) => m.error && (m.id === null || m.id === 'utf'), 5000, 'the error for invalid UTF-8');
      assert.ok([-32700, -32600, -32602].includes(u.error.code), JSON.stringify(u));
      await s.write('{"jsonrpc":"2.0","id":"nul","method":"tools/call","params":{"name":"echo","arguments":{"text":"a\\u0000b"}}}');
      const n = await s.response('nul');
      assert.ok(n.result || n.error, 'an escaped NUL gets an answer');
      if (n.result && !n.result.isError) assert.equal(n.result.structuredContent.text, 'a\u0000b', 'the NUL survives the round trip');
      await s.write('{"jsonrpc":"2.0","id":"crlf","method":"ping"}\r');
      assert.deepEqual((await s.response('crlf')).result, {});
      await s.write('{"jsonrpc":"2.0","id":12345,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":1,"steps":1},"_meta":{"progressToken":987654321}}}');
      const p = await s.next((m) => m.method === 'notifications/progress', 5000, 'progress with an integer token');
      assert.strictEqual(p.params.progressToken, 987654321, 'an integer token is echoed as an integer');
      assert.ok((await s.response(12345)).result);
    });
  });

  test('a message just under the cap is served', T, async () => {
    await withRaw(
      async (s) => {
        await s.initialize();
        const line = JSON.stringify({ jsonrpc: '2.0', id: 'near', method: 'ping', params: { pad: 'q'.repeat(1024 * 1024 - 100) } });
        assert.ok(line.length < 1024 * 1024);
        await s.write(line);
        assert.deepEqual((await s.response('near')).result, {});
      },
      ['serve', '--max-message-bytes', String(1024 * 1024), ...DIAG],
    );
  });

  test('ordering: every progress notification of a call arrives before its result', T, async () => {
    await withRaw(async (s) => {
      await s.initialize();
      for (let round = 0; round < 5; round++) {
        const id = `burst-${round}`;
        const r = await s.request('tools/call', { name: 'sleep', arguments: { ms: 0, steps: 1000 }, _meta: { progressToken: id } }, { id });
        assert.ok(r.result, JSON.stringify(r));
        const at = s.messages.indexOf(r);
        const before = s.messages.slice(0, at).filter((m) => m.params?.progressToken === id).length;
        const after = s.messages.slice(at).filter((m) => m.params?.progressToken === id).length;
        assert.equal(after, 0, `${after} progress notifications arrived after the result`);
        assert.equal(before, 1000);
      }
      // a later message proves nothing more was in flight
      await s.request('ping');
      for (let round = 0; round < 5; round++) {
        const id = `burst-${round}`;
        const res = s.messages.findIndex((m) => m.id === id);
        assert.equal(s.messages.slice(res).filter((m) => m.params?.progressToken === id).length, 0);
      }
    });
  });

  test('1000 pings in a row are all answered', T, async () => {
    await withRaw(async (s) => {
      await s.initialize();
      const lines = [];
      for (let i = 0; i < 1000; i++) lines.push(JSON.stringify({ jsonrpc: '2.0', id: i, method: 'ping' }));
      await s.write(lines.join('\n'));
      const ids = new Set();
      for (let i = 0; i < 1000; i++) {
        const r = await s.response(i, 10000);
        assert.deepEqual(r.result, {});
        ids.add(r.id);
      }
      assert.equal(ids.size, 1000);
    });
  });

  test('many concurrent tool calls all complete', T, async () => {
    await withRaw(async (s) => {
      await s.initialize();
      const lines = [];
      for (let i = 0; i < 200; i++) lines.push(JSON.stringify({ jsonrpc: '2.0', id: `c${i}`, method: 'tools/call', params: { name: 'echo', arguments: { text: `n${i}` } } }));
      await s.write(lines.join('\n'));
      for (let i = 0; i < 200; i++) {
        const r = await s.response(`c${i}`);
        assert.deepEqual(r.result.structuredContent, { text: `n${i}` });
      }
    });
  });
});

describe('stdio: message size cap', () => {
  test('a line over --max-message-bytes is refused with an error naming the cap; the next line is served', T, async () => {
    await withRaw(
      async (s) => {
        await s.initialize();
        const ok = JSON.stringify({ jsonrpc: '2.0', id: 'fits', method: 'tools/call', params: { name: 'echo', arguments: { text: 'x'.repeat(3000) } } });
        assert.ok(ok.length < 4096);
        await s.write(ok);
        assert.equal((await s.response('fits')).result.structuredContent.text.length, 3000);
        const big = JSON.stringify({ jsonrpc: '2.0', id: 'big', method: 'tools/call', params: { name: 'echo', arguments: { text: 'y'.repeat(10000) } } });
        await s.write(big);
        const r = await s.next((m) => m.error, 5000, 'the error for the oversized line');
        assertError(r, [-32700, -32600], null);
        assert.match(r.error.message, /4096|4 ?KiB|max|limit|too (large|long|big)|exceed/i);
        assert.deepEqual((await s.request('ping', undefined, { id: 'next' })).result, {});
        assert.equal(s.messages.filter((m) => m.id === 'big').length, 0, 'the oversized request is not run');
      },
      ['serve', '--max-message-bytes', '4096', ...DIAG],
    );
  });

  test('CONTAINER_MCP_MAX_MESSAGE_BYTES sets the cap too', T, async () => {
    await withRaw(
      async (s) => {
        await s.initialize();
        await s.write(JSON.stringify({ jsonrpc: '2.0', id: 'big', method: 'ping', params: { pad: 'z'.repeat(5000) } }));
        assertError(await s.next((m) => m.error, 5000, 'the error for the oversized line'), [-32700, -32600], null);
        assert.deepEqual((await s.request('ping', undefined, { id: 'next' })).result, {});
      },
      ['serve', ...DIAG],
      { env: { CONTAINER_MCP_MAX_MESSAGE_BYTES: '4096' } },
    );
  });

  test('a 100 MB line: refused above the default 16 MiB cap, memory stays bounded, next request answered', { timeout: 60000 }, async () => {
    await withRaw(async (s) => {
      await s.initialize();
      const base = procStatus(s.pid);
      const chunk = 'A'.repeat(1 << 20); // 1 MiB
      const head = '{"jsonrpc":"2.0","id":"huge","method":"tools/call","params":{"name":"echo","arguments":{"text":"';
      await s.write(head, { raw: true });
      let errorSeenAt = -1;
      let written = head.length;
      const errP = s.next((m) => m.error && m.id === null, 55000, 'the error for the 100 MB line').then((m) => {
        errorSeenAt = written;
        return m;
      });
      // The refusal comes as soon as the line passes the cap, while it is
      // still open: the line's end is sent only after the error arrived
      // (a server that buffered to the newline would never answer).
      for (let i = 0; i < 100 && errorSeenAt < 0; i++) {
        await s.write(chunk, { raw: true });
        written += chunk.length;
      }
      const r = await errP;
      assert.ok(errorSeenAt > DEFAULT_CAP, `refused after ${errorSeenAt} bytes, before the ${DEFAULT_CAP}-byte cap was passed`);
      await s.write('"}}}');
      assertError(r, [-32700, -32600], null);
      assert.match(r.error.message, new RegExp(`${DEFAULT_CAP}|16 ?MiB|16 ?MB|max|limit|too (large|long|big)|exceed`, 'i'));
      const p = await s.request('ping', undefined, { id: 'after-huge', ms: 20000 });
      assert.deepEqual(p.result, {});
      assert.equal(s.messages.filter((m) => m.id === 'huge').length, 0, 'the huge request is not run');
      const st = procStatus(s.pid);
      const msg = `VmHWM ${st.hwmKb} kB (before: RSS ${base.rssKb} kB, HWM ${base.hwmKb} kB); error seen after ${errorSeenAt} bytes written`;
      console.log(`${msg}`);
      if (isSanitized()) {
        console.log('sanitizer build: RSS bound not checked');
      } else {
        assert.ok(st.hwmKb < 64 * 1024, `memory not bounded: ${msg}`);
      }
      // the refusal is at most one per oversized line
      assert.equal(s.messages.filter((m) => m.error && m.id === null).length, 1, 'exactly one error for the oversized line');
    });
  });
});

// Issue 8, points 5 and 4: stdio never loses a cancel, never stops reading,
// and answers every call it abandons itself.
describe('stdio: cancels, a full pool and shutdown', () => {
  // The stdio transport runs at most this many tool calls at once; more wait
  // in its queue (src/transport/stdio.c, MAX_RUNNING).
  const RUNNING = 64;
  const LONG = 600000; // sleep's maximum: these calls end only when stopped

  const sleepCall = (id) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'sleep', arguments: { ms: LONG, steps: 1 }, _meta: { progressToken: id } } });
  const cancel = (id) => ({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason: 'test' } });
  const lines = (msgs) => msgs.map((m) => JSON.stringify(m)).join('\n');
  // The first progress of a sleep is sent as it starts: proof it has a worker.
  const startedOf = (s, id) => s.messages.some((m) => m.method === 'notifications/progress' && m.params.progressToken === id);
  async function waitStarted(s, ids, ms = 20000) {
    try {
      await s.next(() => ids.every((id) => startedOf(s, id)), ms, `the first progress of all ${ids.length} calls`);
    } catch (e) {
      throw new Error(`${ids.filter((id) => startedOf(s, id)).length} of ${ids.length} calls started: ${e.message}`);
    }
  }
  const responsesTo = (s, id) => s.messages.filter((m) => m.id === id && ('result' in m || 'error' in m));

  function assertShutdownError(s, id) {
    const r = responsesTo(s, id);
    assert.equal(r.length, 1, `exactly one response for ${id}: ${JSON.stringify(r)}`);
    assert.equal(r[0].error?.code, -32603, JSON.stringify(r[0]));
    assert.match(r[0].error.message, /shutting down/);
  }

  test('a call and its cancel in one write, 50 times: no response, and every worker is free again', { timeout: 60000 }, async () => {
    const s = new RawStdio();
    try {
      await s.initialize();
      const cancelled = [];
      for (let i = 0; i < 50; i++) {
        const id = `c${i}`;
        cancelled.push(id);
        await s.write(lines([sleepCall(id), cancel(id)]));
        assert.deepEqual((await s.request('ping', undefined, { id: `after-${id}` })).result, {});
      }
      // A lost cancel keeps its worker asleep for 10 minutes: then fewer than
      // RUNNING new calls could start.
      const fresh = Array.from({ length: RUNNING }, (_, i) => `w${i}`);
      await s.write(lines(fresh.map(sleepCall)));
      await waitStarted(s, fresh);
      await s.srv.stop('SIGTERM', 10000);
      for (const id of cancelled) assert.deepEqual(responsesTo(s, id), [], `no response for the cancelled ${id}`);
      for (const id of fresh) assertShutdownError(s, id);
    } finally {
      s.kill();
    }
  });

  test(`${RUNNING + 6} long calls in flight: ping is answered at once, a cancel frees a worker for a waiting call`, { timeout: 60000 }, async () => {
    const s = new RawStdio();
    try {
      await s.initialize();
      const ids = Array.from({ length: RUNNING + 6 }, (_, i) => `q${i}`);
      await s.write(lines(ids.map(sleepCall)));
      const running = () => ids.filter((id) => startedOf(s, id));
      await s.next(() => running().length >= RUNNING, 20000, `${RUNNING} calls to start`);
      // ping is answered while every worker is still busy (their sleeps
      // end only when stopped): not queued behind them.
      const t0 = Date.now();
      assert.deepEqual((await s.request('ping', undefined, { id: 'busy-ping', ms: 30000 })).result, {});
      console.log(`ping took ${Date.now() - t0} ms with every worker busy`);
      assert.deepEqual(ids.filter((id) => responsesTo(s, id).length), [], 'no call ended before the ping was answered');
      const waiting = ids.filter((id) => !startedOf(s, id));
      assert.ok(waiting.length > 0, 'some calls wait for a worker');
      const victim = running()[0];
      await s.notify('notifications/cancelled', { requestId: victim, reason: 'test' });
      // The cancelled call's worker takes the next waiting call.
      await s.next(() => waiting.some((id) => startedOf(s, id)), 10000, 'a waiting call to start after the cancel');
      assert.deepEqual((await s.request('ping', undefined, { id: 'after-cancel' })).result, {});
      await s.srv.stop('SIGTERM', 10000);
      assert.deepEqual(responsesTo(s, victim), [], 'no response for the cancelled call');
      for (const id of ids) if (id !== victim) assertShutdownError(s, id);
    } finally {
      s.kill();
    }
  });

  test('SIGTERM with calls in flight: each gets an error naming the shutdown; a call the client cancelled stays silent', T, async () => {
    const s = new RawStdio();
    try {
      await s.initialize();
      await s.write(lines(['a', 'b', 'x'].map(sleepCall)));
      await waitStarted(s, ['a', 'b', 'x']);
      await s.notify('notifications/cancelled', { requestId: 'x', reason: 'test' });
      assert.deepEqual((await s.request('ping')).result, {});
      await s.srv.stop('SIGTERM', 10000);
      assertShutdownError(s, 'a');
      assertShutdownError(s, 'b');
      assert.deepEqual(responsesTo(s, 'x'), [], 'no response for the cancelled call');
    } finally {
      s.kill();
    }
  });

  test('stdin closed while a long call runs: after the grace period it gets an error naming the shutdown', T, async () => {
    const s = new RawStdio();
    try {
      await s.initialize();
      await s.send(sleepCall('long'));
      await waitStarted(s, ['long']);
      await s.close(10000);
      assertShutdownError(s, 'long');
      assert.match(responsesTo(s, 'long')[0].error.message, /stdin/);
    } finally {
      s.kill();
    }
  });
});
