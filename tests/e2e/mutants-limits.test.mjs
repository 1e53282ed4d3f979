// Limits a mutation of tests/mutations/ found unguarded (issue 9): the
// `memory` and `cpus` a run asks for (below the ceilings, so not the value
// the ceiling tests use) and the pids ceiling are what the kernel holds for
// the sandbox, read back from its cgroup.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { stdioClient, tmpDir } from './lib.mjs';
import { call, nativeBackend, ok } from './tools.mjs';

const T = { timeout: 60000 };
const state = tmpDir('cmcp-mut-lim-');
const open = () => stdioClient({ args: ['serve'], env: { CONTAINER_MCP_STATE_DIR: state } });

// The limits the kernel holds for a container, from its cgroup files.
function cgroupLimits({ cgroup: { mode, dirs } }) {
  const read = (dir, file) => fs.readFileSync(path.join(dir, file), 'utf8').trim();
  if (mode === 'v2' || mode === 'unified') {
    const dir = dirs.memory ?? Object.values(dirs)[0];
    const [quota, period] = read(dirs.cpu ?? dir, 'cpu.max').split(' ');
    return { memory: Number(read(dir, 'memory.max')), cpus: Number(quota) / Number(period), pids: read(dirs.pids ?? dir, 'pids.max') };
  }
  return {
    memory: Number(read(dirs.memory, 'memory.limit_in_bytes')),
    cpus: Number(read(dirs.cpu, 'cpu.cfs_quota_us')) / Number(read(dirs.cpu, 'cpu.cfs_period_us')),
    pids: read(dirs.pids, 'pids.max'),
  };
}

let skipReason = null;
before(async () => {
  const { reason, cgroupReason } = await nativeBackend(open);
  skipReason = reason ?? cgroupReason;
});
after(() => fs.rmSync(state, { recursive: true, force: true }));

describe('asked limits reach the cgroup (mutations)', () => {
  test('memory 256m and cpus 0.5 are the cgroup\'s limits; pids are capped at 512', T, async (t) => {
    if (skipReason) return t.skip(skipReason);
    const s = await open();
    try {
      const pol = ok(await call(s, 'system_status', {})).policy;
      assert.ok(pol.maxMemoryBytes > 256 * 2 ** 20 && pol.maxCpus > 0.5, JSON.stringify(pol));
      const c = ok(await call(s, 'run_container', { image: 'host', command: ['sleep', '300'], memory: '256m', cpus: 0.5 }));
      try {
        const lim = cgroupLimits(ok(await call(s, 'inspect_container', { container: c.id })));
        assert.deepEqual(lim, { memory: 256 * 2 ** 20, cpus: 0.5, pids: '512' });
      } finally {
        ok(await call(s, 'remove_container', { container: c.id, force: true }));
      }
    } finally {
      await s.close().finally(() => s.kill());
    }
  });
});
