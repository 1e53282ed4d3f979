// MCP over stdio with the official SDK client: what an agent host (Claude
// Code, Codex, Cursor…) relies on when it starts `container-mcp`.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { EmptyResultSchema, LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

import { assertProgress, assertSlept, checkSystemStatus, checkToolShape } from './checks.mjs';
import { DIAG, VERSION, deferred, stdioClient, withTimeout } from './lib.mjs';

const T = { timeout: 30000 };

describe('stdio with the SDK client', () => {
  test('initialize: serverInfo, capabilities, instructions, latest version', T, async () => {
    const s = await stdioClient();
    try {
      const info = s.client.getServerVersion();
      assert.equal(info.name, 'container-mcp');
      assert.equal(info.version, VERSION);
      const caps = s.client.getServerCapabilities();
      assert.deepEqual(caps.tools, { listChanged: false });
      assert.equal(typeof caps.logging, 'object');
      const instr = s.client.getInstructions();
      assert.equal(typeof instr, 'string');
      assert.ok(instr.trim().length > 20, `instructions too short: ${JSON.stringify(instr)}`);
      assert.deepEqual(await s.client.ping(), {});
    } finally {
      await s.close().finally(() => s.kill());
    }
  });

  test('tools/list: every tool is fully described; diagnostics only with --toolsets all', T, async () => {
    const s = await stdioClient();
    try {
      const { tools, nextCursor } = await s.client.listTools();
      assert.equal(nextCursor, undefined, 'default page holds every tool');
      for (const t of tools) checkToolShape(t);
      const names = tools.map((t) => t.name);
      assert.equal(new Set(names).size, names.length, 'tool names are unique');
      for (const n of ['system_status', 'echo', 'sleep']) assert.ok(names.includes(n), `${n} is listed`);
      const status = tools.find((t) => t.name === 'system_status');
      assert.equal(status.annotations.readOnlyHint, true, 'system_status is read-only');
    } finally {
      await s.close().finally(() => s.kill());
    }
    const d = await stdioClient({ args: ['serve'], env: { CONTAINER_MCP_TOOLSETS: undefined } });
    try {
      const names = (await d.client.listTools()).tools.map((t) => t.name);
      assert.ok(names.includes('system_status'), 'system_status is on by default');
      assert.ok(!names.includes('sleep') && !names.includes('echo'), `diagnostics tools are off by default: ${names}`);
    } finally {
      await d.close().finally(() => d.kill());
    }
    const e = await stdioClient({ args: ['serve'], env: { CONTAINER_MCP_TOOLSETS: 'all' } });
    try {
      const names = (await e.client.listTools()).tools.map((t) => t.name);
      assert.ok(names.includes('echo') && names.includes('sleep'), `CONTAINER_MCP_TOOLSETS=all enables diagnostics: ${names}`);
    } finally {
      await e.close().finally(() => e.kill());
    }
  });

  test('tools/list paging with --page-size 1 gives the same tools as one page', T, async () => {
    const one = await stdioClient();
    let all;
    try {
      all = (await one.client.listTools()).tools;
    } finally {
      await one.close().finally(() => one.kill());
    }
    assert.ok(all.length >= 3);
    const s = await stdioClient({ args: ['serve', '--page-size', '1', ...DIAG] });
    try {
      const paged = [];
      let cursor;
      let pages = 0;
      do {
        const r = await s.client.listTools(cursor === undefined ? {} : { cursor });
        pages++;
        assert.ok(r.tools.length <= 1, `page ${pages} holds ${r.tools.length} tools`);
        paged.push(...r.tools);
        cursor = r.nextCursor;
        if (cursor !== undefined) assert.equal(typeof cursor, 'string');
        assert.ok(pages <= all.length + 1, 'paging terminates');
      } while (cursor !== undefined);
      assert.ok(pages >= all.length, `${pages} pages for ${all.length} tools`);
      assert.deepEqual(paged, all);
      await assert.rejects(s.client.listTools({ cursor: 'not-a-cursor' }), (e) => e.code === -32602);
      // the server still serves after the bad cursor
      assert.equal((await s.client.listTools()).tools.length, 1);
    } finally {
      await s.close().finally(() => s.kill());
    }
  });

  test('tools/call echo returns structuredContent and text', T, async () => {
    const s = await stdioClient();
    try {
      await s.client.listTools(); // lets the SDK validate against outputSchema
      const text = 'hello, wörld ✓ "quoted" \\ \n newline';
      const r = await s.client.callTool({ name: 'echo', arguments: { text } });
      assert.notEqual(r.isError, true);
      assert.deepEqual(r.structuredContent, { text });
      assert.deepEqual(r.content, [{ type: 'text', text }]);
    } finally {
      await s.close().finally(() => s.kill());
    }
  });

  test('system_status reports backends, policy and the server version', T, async () => {
    const s = await stdioClient();
    try {
      await s.client.listTools();
      checkSystemStatus(await s.client.callTool({ name: 'system_status', arguments: {} }));
    } finally {
      await s.close().finally(() => s.kill());
    }
  });

  test('progress: sleep with onprogress gets increasing progress up to total', T, async () => {
    const s = await stdioClient();
    try {
      const seen = [];
      const r = await s.client.callTool({ name: 'sleep', arguments: { ms: 200, steps: 5 } }, undefined, {
        onprogress: (p) => seen.push(p),
      });
      assert.notEqual(r.isError, true, JSON.stringify(r));
      assertSlept(r.structuredContent.sleptMs, 200);
      assert.equal(r.structuredContent.cancelled, false);
      assertProgress(seen, 5);
    } finally {
      await s.close().finally(() => s.kill());
    }
  });

  test('cancellation: an aborted sleep rejects at once and the server keeps serving', { timeout: 60000 }, async () => {
    const s = await stdioClient();
    try {
      const ac = new AbortController();
      const started = deferred();
      const t0 = Date.now();
      const call = s.client.callTool({ name: 'sleep', arguments: { ms: 60000, steps: 600 } }, undefined, {
        signal: ac.signal,
        onprogress: () => started.resolve(),
        timeout: 120000,
      });
      call.catch(() => {});
      await withTimeout(started.promise, 30000, 'first progress of sleep');
      ac.abort('test cancels');
      // the 60 s call rejects at the abort, not at its end
      await assert.rejects(withTimeout(call, 30000, 'the cancelled call to reject'));
      assert.ok(Date.now() - t0 < 60000);
      assert.deepEqual(await s.client.ping(), {});
      const r = await s.client.callTool({ name: 'echo', arguments: { text: 'after cancel' } });
      assert.deepEqual(r.structuredContent, { text: 'after cancel' });
    } finally {
      await s.close().finally(() => s.kill());
    }
  });

  test('SIGTERM during a call: the call rejects with the server\'s "shutting down" error, not a lost connection', T, async () => {
    const s = await stdioClient();
    try {
      const started = deferred();
      const call = s.client.callTool({ name: 'sleep', arguments: { ms: 600000, steps: 1 } }, undefined, {
        onprogress: () => started.resolve(),
        timeout: 120000,
      });
      call.catch(() => {});
      await withTimeout(started.promise, 30000, 'first progress of sleep');
      const exited = new Promise((resolve) => s.proc.once('exit', (code, signal) => resolve({ code, signal })));
      s.proc.kill('SIGTERM');
      await assert.rejects(withTimeout(call, 30000, 'the call to reject'), (e) => {
        assert.equal(e.code, -32603, `${e.code}: ${e.message}`);
        assert.match(e.message, /server shutting down/);
        return true;
      });
      const r = await withTimeout(exited, 30000, 'server exit after SIGTERM');
      assert.equal(r.code, 0, JSON.stringify(r));
    } finally {
      s.kill();
    }
  });

  test('logging/setLevel then notifications/message at or above the level', T, async () => {
    const s = await stdioClient();
    try {
      const logs = [];
      s.client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => logs.push(n.params));
      assert.deepEqual(await s.client.setLoggingLevel('debug'), {});
      await s.client.callTool({ name: 'sleep', arguments: { ms: 10, steps: 2 } });
      await s.client.callTool({ name: 'echo', arguments: { text: 'log me' } });
      assert.ok(logs.length > 0, 'at level debug, a tool call logs at least one notifications/message');
      const levels = ['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency'];
      for (const l of logs) {
        assert.ok(levels.includes(l.level), `log level ${l.level}`);
        assert.ok('data' in l, 'log message has data');
      }
      // Raise the level: nothing below it may arrive.
      logs.length = 0;
      assert.deepEqual(await s.client.setLoggingLevel('emergency'), {});
      await s.client.callTool({ name: 'sleep', arguments: { ms: 10, steps: 2 } });
      await s.client.callTool({ name: 'echo', arguments: { text: 'quiet' } });
      assert.deepEqual(
        logs.filter((l) => l.level !== 'emergency'),
        [],
        'no messages below the level',
      );
      // A level that does not exist is invalid params.
      await assert.rejects(s.client.request({ method: 'logging/setLevel', params: { level: 'loud' } }, EmptyResultSchema), (e) => e.code === -32602);
    } finally {
      await s.close().finally(() => s.kill());
    }
  });

  test('argument errors are tool results that name the field and the expected type', T, async () => {
    const s = await stdioClient();
    try {
      await s.client.listTools();
      const text = (r) => r.content.map((c) => c.text).join('\n');
      let r = await s.client.callTool({ name: 'echo', arguments: { text: 5 } });
      assert.equal(r.isError, true);
      assert.match(text(r), /\btext\b/);
      assert.match(text(r), /expected string/);
      r = await s.client.callTool({ name: 'echo', arguments: {} });
      assert.equal(r.isError, true, 'missing required field');
      assert.match(text(r), /\btext\b/);
      r = await s.client.callTool({ name: 'echo', arguments: { text: 'x', bogusField: 1 } });
      assert.equal(r.isError, true, 'unknown extra field');
      assert.match(text(r), /bogusField/);
      r = await s.client.callTool({ name: 'sleep', arguments: { ms: 'soon' } });
      assert.equal(r.isError, true);
      assert.match(text(r), /\bms\b/);
      assert.match(text(r), /expected integer|expected number/);
      r = await s.client.callTool({ name: 'sleep', arguments: { ms: 600001 } });
      assert.equal(r.isError, true, 'ms above maximum');
      assert.match(text(r), /\bms\b/);
      r = await s.client.callTool({ name: 'sleep', arguments: { ms: -1 } });
      assert.equal(r.isError, true, 'ms below minimum');
      r = await s.client.callTool({ name: 'sleep', arguments: { ms: 1, steps: 0 } });
      assert.equal(r.isError, true, 'steps below minimum');
      assert.match(text(r), /\bsteps\b/);
      r = await s.client.callTool({ name: 'sleep', arguments: { ms: 1.5 } });
      assert.equal(r.isError, true, 'ms must be an integer');
      // still healthy
      r = await s.client.callTool({ name: 'echo', arguments: { text: 'ok' } });
      assert.deepEqual(r.structuredContent, { text: 'ok' });
    } finally {
      await s.close().finally(() => s.kill());
    }
  });

  test('unknown tool is -32602', T, async () => {
    const s = await stdioClient();
    try {
      await assert.rejects(s.client.callTool({ name: 'no_such_tool', arguments: {} }), (e) => {
        assert.equal(e.code, -32602);
        assert.match(e.message, /no_such_tool/);
        return true;
      });
      assert.deepEqual(await s.client.ping(), {});
    } finally {
      await s.close().finally(() => s.kill());
    }
  });
});
