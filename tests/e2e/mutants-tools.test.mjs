// Tool parameters a mutation of tests/mutations/ found unguarded (issue 9),
// each checked by what the sandbox's processes really saw or did: run's
// `env`, `workdir`, `readonlyRootfs` and `mounts[].readonly`, exec's `workdir`, the logs' `tail`,
// list's `all`, and remove's `force` (without it a running container is
// refused and keeps running).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { eventually, stdioClient, tmpDir } from './lib.mjs';
import { call, nativeBackend, ok, refused } from './tools.mjs';

const T = { timeout: 60000 };
const state = tmpDir('cmcp-mut-tools-');
const allowed = tmpDir('cmcp-mut-tools-allowed-');
fs.chmodSync(allowed, 0o777); // writable to the sandbox's root whatever its host uid
const open = () => stdioClient({ args: ['serve'], env: { CONTAINER_MCP_STATE_DIR: state, CONTAINER_MCP_ALLOWED_MOUNTS: allowed } });

let nativeReason = null;
let s;
before(async () => {
  nativeReason = (await nativeBackend(open)).reason;
  if (!nativeReason) s = await open();
});
after(async () => {
  if (s) await s.close().finally(() => s.kill());
  for (const d of [state, allowed]) fs.rmSync(d, { recursive: true, force: true });
});

const run = async (command, extra = {}) => ok(await call(s, 'run_container', { image: 'host', command, wait: true, ...extra }));

describe('tool parameters (mutations)', () => {
  test('run_container env and workdir are the process\'s environment and working directory', T, async (t) => {
    if (nativeReason) return t.skip(nativeReason);
    const r = await run(['sh', '-c', 'echo "$GREETING"; pwd'], { env: { GREETING: 'hello there' }, workdir: '/tmp' });
    assert.equal(r.exitCode, 0, r.stderr);
    assert.equal(r.stdout, 'hello there\n/tmp\n');
  });

  test('readonlyRootfs: true makes / read-only, /tmp and /workspace stay writable; without it / is writable', T, async (t) => {
    if (nativeReason) return t.skip(nativeReason);
    const script = 'for d in / /tmp /workspace; do touch $d/probe 2>/dev/null && echo "$d rw" || echo "$d ro"; done';
    assert.equal((await run(['sh', '-c', script])).stdout, '/ rw\n/tmp rw\n/workspace rw\n');
    assert.equal((await run(['sh', '-c', script], { readonlyRootfs: true })).stdout, '/ ro\n/tmp rw\n/workspace rw\n');
  });

  test('mounts[].readonly: true: the sandbox cannot write the host directory; without it, it can', T, async (t) => {
    if (nativeReason) return t.skip(nativeReason);
    const write = (name, readonly) => run(['sh', '-c', `echo hi > /data/${name} && echo wrote || echo refused`],
      { mounts: [{ source: allowed, target: '/data', readonly }] });
    assert.equal((await write('ro', true)).stdout, 'refused\n');
    assert.equal(fs.existsSync(path.join(allowed, 'ro')), false, 'a read-only mount was written on the host');
    assert.equal((await write('rw', false)).stdout, 'wrote\n');
    assert.equal(fs.readFileSync(path.join(allowed, 'rw'), 'utf8'), 'hi\n');
  });

  test('exec workdir, logs tail, list all, remove without force', T, async (t) => {
    if (nativeReason) return t.skip(nativeReason);
    const c = ok(await call(s, 'run_container', {
      image: 'host', command: ['sh', '-c', 'for i in 1 2 3 4 5; do echo line$i; done; exec sleep 300'],
    }));
    try {
      const e = ok(await call(s, 'exec_in_container', { container: c.id, command: ['pwd'], workdir: '/tmp' }));
      assert.equal(e.stdout, '/tmp\n');
      await eventually(async () => ok(await call(s, 'container_logs', { container: c.id })).logs.includes('line5\n'),
        20000, 'the five lines in the log');
      assert.equal(ok(await call(s, 'container_logs', { container: c.id, tail: 2 })).logs, 'line4\nline5\n');

      // Running: remove without force is refused, and it really still runs.
      refused(await call(s, 'remove_container', { container: c.id }), /running/, /force/);
      assert.equal(ok(await call(s, 'exec_in_container', { container: c.id, command: ['echo', 'alive'] })).stdout, 'alive\n');

      // Stopped: listed only with all: true.
      ok(await call(s, 'stop_container', { container: c.id, timeout: 1 }));
      const ids = async (args) => ok(await call(s, 'list_containers', args)).containers.map((x) => x.id);
      assert.ok(!(await ids({})).includes(c.id), 'a stopped container is listed without all');
      assert.ok((await ids({ all: true })).includes(c.id), 'a stopped container is missing from all: true');
    } finally {
      ok(await call(s, 'remove_container', { container: c.id, force: true }));
    }
  });
});
