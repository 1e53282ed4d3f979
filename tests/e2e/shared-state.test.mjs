// Servers sharing one state dir (several agents' stdio servers on one
// machine with the default state dir): each one's start-up reaps what dead
// servers left, and must never take what a live one is making.  Six start
// at once, each runs a container and execs in it while the others start,
// ten rounds (a reaper that took what a starting server made failed about
// one round in twenty); then nothing of theirs is left.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, test } from 'node:test';

import { stdioClient, tmpDir } from './lib.mjs';
import { call, nativeBackend, ok } from './tools.mjs';

const state = tmpDir('cmcp-shared-state-');
const open = () => stdioClient({ args: ['serve'], env: { CONTAINER_MCP_STATE_DIR: state } });

let nativeReason = null;
before(async () => {
  ({ reason: nativeReason } = await nativeBackend(open));
});
after(() => fs.rmSync(state, { recursive: true, force: true }));

test('six servers on one state dir start containers at once: every run and exec works, none removes another\'s', { timeout: 300000 }, async (t) => {
  if (nativeReason) return t.skip(nativeReason);
  const one = async (k) => {
    const s = await open();
    try {
      const c = ok(await call(s, 'run_container', { image: 'host', command: ['sleep', '600'] }));
      const e = ok(await call(s, 'exec_in_container', { container: c.id, command: ['echo', `server ${k}`] }));
      assert.equal(e.stdout, `server ${k}\n`);
      const w = ok(await call(s, 'run_container', { image: 'host', command: ['echo', `wait ${k}`], wait: true }));
      assert.match(JSON.stringify(w), new RegExp(`wait ${k}`));
      ok(await call(s, 'remove_container', { container: c.id, force: true }));
    } finally {
      await s.close({ grace: 60000 }).finally(() => s.kill());
    }
  };
  for (let round = 0; round < 10; round++) {
    const results = await Promise.allSettled(Array.from({ length: 6 }, (_, k) => one(k)));
    const failed = results.filter((r) => r.status === 'rejected').map((r) => String(r.reason?.message ?? r.reason));
    assert.deepEqual(failed, [], `round ${round}: ${failed.length} of 6 servers failed`);
  }
  const s = await open();
  try {
    const left = ok(await call(s, 'list_containers', { all: true }));
    assert.equal(JSON.stringify(left).includes('"id"'), false, `containers left: ${JSON.stringify(left).slice(0, 300)}`);
  } finally {
    await s.close().finally(() => s.kill());
  }
});
