// Every tool's results against the outputSchema it publishes in tools/list
// (src/tools/defs/*.json): each tool is called with typical arguments through
// the official SDK client, which validates structuredContent against the
// listed outputSchema itself once listTools has run, and each result is
// checked again here with Ajv in strict JSON Schema 2020-12 mode (the
// dialect MCP names), which also checks each schema against the meta-schema.
// A tool that appears in tools/list with no call here fails the test: a new
// tool needs a case below.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import Ajv2020 from 'ajv/dist/2020.js';

import { DIAG, stdioClient, tmpDir } from './lib.mjs';
import { call, nativeBackend } from './tools.mjs';

const T = { timeout: 120000 };

const state = tmpDir('cmcp-state-');
const allowed = tmpDir('cmcp-allowed-');
const ENV = { CONTAINER_MCP_STATE_DIR: state, CONTAINER_MCP_ALLOWED_MOUNTS: allowed };

const open = () => stdioClient({ args: ['serve', ...DIAG], env: ENV });

// The calls, in an order that leaves nothing behind.  `name` is the tool,
// `args` its arguments (a function of what earlier calls returned), `expect`
// a check of the result's content beyond its schema.
const cases = [
  { name: 'system_status', args: () => ({}) },
  {
    name: 'system_status', shape: 'start',
    args: () => ({ start: true }),
    expect: (r) => assert.equal(r.service.backend, r.activeBackend),
  },
  { name: 'echo', args: () => ({ text: 'hi' }), expect: (r) => assert.equal(r.text, 'hi') },
  { name: 'sleep', args: () => ({ ms: 20, steps: 2 }), expect: (r) => assert.equal(r.cancelled, false) },
  {
    name: 'run_container', shape: 'wait',
    args: () => ({ image: 'host', command: ['sh', '-c', 'echo out; echo err >&2; exit 3'], wait: true }),
    expect: (r) => assert.deepEqual([r.exitCode, r.stdout, r.stderr], [3, 'out\n', 'err\n']),
  },
  {
    name: 'run_container', shape: 'detached',
    args: () => ({ image: 'host', name: 'outputs-keeper', command: ['sh', '-c', 'echo started; exec sleep 300'] }),
    expect: (r, ctx) => { ctx.id = r.id; assert.equal(r.state, 'running'); },
  },
  {
    name: 'run_container', shape: 'detached, no name',
    args: () => ({ image: 'host', command: ['sleep', '300'] }),
    expect: (r, ctx) => { ctx.unnamed = r.id; assert.equal(r.name, null); assert.equal(r.state, 'running'); },
  },
  {
    name: 'exec_in_container', args: (ctx) => ({ container: ctx.id, command: ['sh', '-c', 'echo hi'] }),
    expect: (r) => assert.equal(r.stdout, 'hi\n'),
  },
  {
    name: 'dexec', args: (ctx) => ({ container: ctx.id, command: 'echo out; echo err >&2; exit 3' }),
    expect: (r) => assert.deepEqual([r.exit_code, r.preview, r.truncated_bytes, r.timed_out], [3, 'out\nerr\n', 0, false]),
  },
  {
    name: 'dexec', shape: 'timed out', args: (ctx) => ({ container: ctx.id, command: 'sleep 30', timeout_sec: 1 }),
    expect: (r) => assert.equal(r.timed_out, true),
  },
  {
    name: 'dexec', shape: 'over the run log cap', args: (ctx) => ({ container: ctx.id, command: 'head -c 9000000 /dev/zero' }),
    expect: (r) => assert.deepEqual([r.runlog_cut, r.truncated_bytes], [true, 9000000 - 4096]),
  },
  {
    name: 'list_containers', args: () => ({ all: true }),
    expect: (r, ctx) => assert.ok(r.containers.some((c) => c.id === ctx.id), 'the running container is listed'),
  },
  { name: 'container_logs', args: (ctx) => ({ container: ctx.id }), expect: (r) => assert.match(r.logs, /started/) },
  { name: 'container_stats', args: (ctx) => ({ container: ctx.id }) },
  { name: 'inspect_container', args: (ctx) => ({ container: ctx.id }), expect: (r, ctx) => assert.equal(r.id, ctx.id) },
  {
    name: 'dinspect', shape: 'running', args: (ctx) => ({ container: ctx.id }),
    expect: (r, ctx) => assert.deepEqual([r.id, r.source, r.privileged], [ctx.id, 'kernel', false]),
  },
  {
    name: 'copy_files', shape: 'to_container',
    args: (ctx) => ({ container: ctx.id, direction: 'to_container', source: path.join(allowed, 'in.txt'), destination: '/workspace' }),
    expect: (r) => assert.equal(r.files, 1),
  },
  {
    name: 'copy_files', shape: 'from_container',
    args: (ctx) => ({ container: ctx.id, direction: 'from_container', source: '/workspace/in.txt', destination: path.join(allowed, 'back.txt') }),
    expect: () => assert.equal(fs.readFileSync(path.join(allowed, 'back.txt'), 'utf8'), 'copied\n'),
  },
  // the session sandbox's tools (made by the first of them, removed with the session)
  {
    name: 'system_run_command', args: () => ({ command: 'echo out; echo err >&2; exit 3' }),
    expect: (r) => assert.deepEqual(r, { stdout: 'out\n', stderr: 'err\n', exit_code: 3, success: false }),
  },
  {
    name: 'system_run_command', shape: 'timed out', args: () => ({ command: 'sleep 30', timeout: 1 }),
    expect: (r) => assert.deepEqual([r.success, r.timed_out], [false, true]),
  },
  {
    name: 'system_run_command', shape: 'in container', args: (ctx) => ({ command: 'cat /workspace/in.txt', container: ctx.id }),
    expect: (r) => assert.equal(r.stdout, 'copied\n'),
  },
  {
    name: 'system_run_python', args: () => ({ code: "print('Hello, world!')\n_ = 42" }),
    expect: (r) => assert.deepEqual(r, { output: 'Hello, world!\n', error: '', result: 42, success: true }),
  },
  { name: 'system_run_python', shape: 'repr', args: () => ({ code: '_ = {1}' }), expect: (r) => assert.equal(r.result, '{1}') },
  {
    name: 'system_run_python', shape: 'exception, no result', args: () => ({ code: 'raise ValueError(7)' }),
    expect: (r) => { assert.equal(r.success, false); assert.ok(!('result' in r)); assert.match(r.error, /ValueError: 7/); },
  },
  {
    name: 'system_run_python', shape: 'timed out', args: () => ({ code: 'import time\ntime.sleep(30)', timeout: 1 }),
    expect: (r) => assert.deepEqual([r.success, r.timed_out], [false, true]),
  },
  { name: 'system_env_var', args: () => ({ var_name: 'PATH' }), expect: (r) => assert.equal(r.requested_var, r.variables.PATH) },
  { name: 'system_env_var', shape: 'unset', args: () => ({ var_name: 'NOT_SET_HERE' }), expect: (r) => assert.equal(r.requested_var, null) },
  { name: 'system_env_var', shape: 'all', args: () => ({}), expect: (r) => assert.ok(!('requested_var' in r)) },
  {
    name: 'file_write', args: (ctx) => ({ container: ctx.id, path: 'sub/f.txt', content: 'grüße\n' }),
    expect: (r) => assert.deepEqual([r.success, r.path], [true, '/workspace/sub/f.txt']),
  },
  {
    name: 'file_read', args: (ctx) => ({ container: ctx.id, path: 'sub/f.txt' }),
    expect: (r) => assert.deepEqual([r.content, r.size, r.success], ['grüße\n', 8, true]),
  },
  {
    name: 'file_list', args: (ctx) => ({ container: ctx.id, recursive: true }),
    expect: (r) => assert.deepEqual(r.entries.map((e) => [e.path, e.is_directory, e.size]),
      [['/workspace/in.txt', false, 7], ['/workspace/sub', true, null], ['/workspace/sub/f.txt', false, 8]]),
  },
  {
    name: 'file_move', args: (ctx) => ({ container: ctx.id, source: 'sub/f.txt', destination: 'g.txt' }),
    expect: (r) => assert.deepEqual([r.success, r.source, r.destination], [true, '/workspace/sub/f.txt', '/workspace/g.txt']),
  },
  {
    name: 'dpatch',
    args: (ctx) => ({
      container: ctx.id,
      patch: '*** Begin Patch\n*** Update File: /workspace/g.txt\n*** Move to: /workspace/h.txt\n@@\n-grüße\n+grüß dich\n'
        + '*** Add File: /workspace/g.txt\n+new\n*** Delete File: /workspace/in.txt\n*** End Patch\n',
    }),
    expect: (r, ctx) => assert.deepEqual(r, {
      success: true, container: ctx.id, files: [
        { path: '/workspace/h.txt', action: 'moved', from: '/workspace/g.txt', hunks: 1 },
        { path: '/workspace/g.txt', action: 'added' },
        { path: '/workspace/in.txt', action: 'deleted' },
      ],
    }),
  },
  {
    name: 'file_delete', args: (ctx) => ({ container: ctx.id, path: '/workspace/g.txt' }),
    expect: (r) => assert.deepEqual([r.success, r.path], [true, '/workspace/g.txt']),
  },
  { name: 'stop_container', args: (ctx) => ({ container: ctx.id, timeout: 1 }), expect: (r) => assert.equal(r.stopped, true) },
  {
    name: 'dinspect', shape: 'stopped', args: (ctx) => ({ container: ctx.id }),
    expect: (r, ctx) => assert.deepEqual([r.id, r.source], [ctx.id, 'record']),
  },
  { name: 'remove_container', args: (ctx) => ({ container: ctx.id, force: true }), expect: (r) => assert.equal(r.removed, true) },
  {
    name: 'remove_container', shape: 'running',
    args: (ctx) => ({ container: ctx.unnamed, force: true }), expect: (r) => assert.equal(r.removed, true),
  },
  // the native image store: a rootfs tarball made in before()
  {
    name: 'pull_image', shape: 'import', args: () => ({ import: path.join(allowed, 'rootfs.tar.gz'), image: 'outputs:1' }),
    expect: (r) => assert.deepEqual(r.names, ['docker.io/library/outputs:1']),
  },
  {
    name: 'list_images', args: () => ({}),
    expect: (r) => assert.ok(r.images.some((i) => i.names.includes('docker.io/library/outputs:1')), JSON.stringify(r)),
  },
  {
    name: 'build_image', args: () => ({ context: path.join(allowed, 'build'), tag: 'outputs:2' }),
    expect: (r) => assert.deepEqual(r.names, ['docker.io/library/outputs:2']),
  },
  { name: 'remove_image', args: () => ({ image: 'outputs:2' }) },
  { name: 'remove_image', args: () => ({ image: 'outputs:1' }) },
  // remove_image collected the layers already
  { name: 'prune_images', args: () => ({}), expect: (r) => assert.deepEqual(r, { reclaimed_bytes: 0, images_removed: 0 }) },
];

let nativeReason = null;

before(async () => {
  ({ reason: nativeReason } = await nativeBackend(open));
  fs.writeFileSync(path.join(allowed, 'in.txt'), 'copied\n');
  fs.mkdirSync(path.join(allowed, 'build'));
  fs.writeFileSync(path.join(allowed, 'build', 'Dockerfile'), 'FROM outputs:1\nCOPY Dockerfile /\nCMD ["true"]\n');
  const root = path.join(state, 'rootfs');
  fs.mkdirSync(path.join(root, 'bin'), { recursive: true });
  fs.copyFileSync('/bin/sh', path.join(root, 'bin', 'sh'));
  const tar = spawnSync('tar', ['-C', root, '-czf', path.join(allowed, 'rootfs.tar.gz'), '.']);
  assert.equal(tar.status, 0, String(tar.stderr));
});

after(() => {
  for (const d of [state, allowed]) fs.rmSync(d, { recursive: true, force: true });
});

describe('output schemas', () => {
  test('every tool: its outputSchema is valid, not empty, and its results match it', T, async (t) => {
    if (nativeReason) return t.skip(nativeReason);
    // strictRequired off: run_container's two result shapes are alternatives
    // (anyOf) that name required fields of the properties around them.
    const ajv = new Ajv2020({ strict: true, strictRequired: false, allErrors: true });
    const s = await open();
    try {
      // listTools makes the SDK client compile each outputSchema and check
      // every later callTool result against it (it throws on a mismatch).
      const { tools } = await s.client.listTools();
      const validators = new Map();
      for (const tool of tools) {
        assert.ok(tool.outputSchema, `${tool.name} has no outputSchema`);
        assert.equal(typeof s.client.getToolOutputValidator(tool.name), 'function',
          `the SDK client does not validate ${tool.name}'s results`);
        const v = ajv.compile(tool.outputSchema);
        // Not a placeholder: an empty result must not pass.
        assert.equal(v({}), false, `${tool.name}'s outputSchema accepts {}: give it required fields`);
        validators.set(tool.name, v);
      }

      const ctx = {};
      const called = new Set();
      for (const c of cases) {
        const what = c.shape ? `${c.name} (${c.shape})` : c.name;
        assert.ok(validators.has(c.name), `${c.name} is not in tools/list`);
        const r = await call(s, c.name, c.args(ctx));
        assert.notEqual(r.isError, true, `${what}: ${r.content?.[0]?.text}`);
        assert.ok(r.structuredContent, `${what} returned no structuredContent`);
        const v = validators.get(c.name);
        assert.ok(v(r.structuredContent),
          `${what}: structuredContent does not match its outputSchema: ${ajv.errorsText(v.errors)}\n` +
          JSON.stringify(r.structuredContent));
        c.expect?.(r.structuredContent, ctx);
        called.add(c.name);
      }
      const missing = tools.map((x) => x.name).filter((n) => !called.has(n));
      assert.deepEqual(missing, [], 'tools with no case in outputs.test.mjs: add one');
    } finally {
      await s.close().finally(() => s.kill());
    }
  });
});
