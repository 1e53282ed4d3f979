// The text a model reads (content[0].text) carries the whole result of a
// run: stdout past a NUL byte, stderr and the exit code, with each NUL
// shown as \0 (issue 8, point 3).  Most clients show a model only
// `content`, never structuredContent.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, before, describe, test } from 'node:test';

import { eventually, stdioClient, tmpDir } from './lib.mjs';
import { call, nativeBackend, ok } from './tools.mjs';

const T = { timeout: 60000 };
const state = tmpDir('cmcp-state-');
const open = () => stdioClient({ args: ['serve'], env: { CONTAINER_MCP_STATE_DIR: state } });

// stdout holds two NULs and a backslash, stderr a NUL too; the exit code is 3.
const SCRIPT = "printf 'one\\0two\\0three\\n'; printf 'back\\\\slash\\n'; printf 'warn\\0ing\\n' >&2; exit 3";

let reason = null;
let netReason = null;
before(async () => {
  ({ reason, netReason } = await nativeBackend(open));
});
after(() => fs.rmSync(state, { recursive: true, force: true }));

// The text, as the model sees it, of a result whose structuredContent is
// right (checked too, so a failure says which of the two is wrong).
function textOf(r) {
  const st = ok(r);
  assert.equal(st.exitCode, 3, JSON.stringify(st));
  assert.equal(st.stdout, 'one\0two\0three\nback\\slash\n');
  assert.equal(st.stderr, 'warn\0ing\n');
  assert.equal(r.content.length, 1);
  assert.equal(r.content[0].type, 'text');
  return r.content[0].text;
}

function assertWhole(text) {
  // Every byte of stdout and stderr is there, NUL as \0 and (so that stays
  // unambiguous) a backslash doubled; no raw NUL reaches the model.
  assert.ok(!text.includes('\0'), JSON.stringify(text));
  assert.ok(text.startsWith('one\\0two\\0three\nback\\\\slash\n'), JSON.stringify(text));
  assert.match(text, /\[stderr\]\nwarn\\0ing\n/);
  assert.match(text, /\[exit code 3, \d+ ms; NUL bytes shown as \\0, backslashes as \\\\\]$/);
}

describe('the text content of a run', () => {
  test('run_container wait:true: stdout past a NUL, stderr and the exit code', T, async (t) => {
    if (reason) return t.skip(reason);
    const s = await open();
    try {
      const r = await call(s, 'run_container', { image: 'host', command: ['sh', '-c', SCRIPT], wait: true });
      assertWhole(textOf(r));
    } finally {
      await s.close().finally(() => s.kill());
    }
  });

  test('exec_in_container and container_logs: the same', T, async (t) => {
    if (reason) return t.skip(reason);
    const s = await open();
    try {
      const c = ok(await call(s, 'run_container', {
        image: 'host', command: ['sh', '-c', "printf 'log\\0line\\n'; exec sleep 300"],
      }));
      assertWhole(textOf(await call(s, 'exec_in_container', { container: c.id, command: ['sh', '-c', SCRIPT] })));
      // Output without a NUL stays as it was: no escaping, no note.
      const plain = await call(s, 'exec_in_container', { container: c.id, command: ['printf', '%s\n', 'a\\b'] });
      assert.equal(plain.content[0].text.split('\n')[0], 'a\\b');
      assert.doesNotMatch(plain.content[0].text, /NUL/);

      const logs = await eventually(async () => {
        const r = await call(s, 'container_logs', { container: c.id });
        return ok(r).logs === 'log\0line\n' ? r : null;
      }, 20000, 'the container\'s first line in its log');
      assert.equal(logs.content[0].text, 'log\\0line\n[NUL bytes shown as \\0, backslashes as \\\\]');
      ok(await call(s, 'remove_container', { container: c.id, force: true }));
    } finally {
      await s.close().finally(() => s.kill());
    }
  });

  test('a detached run: the text names the container and its published ports', T, async (t) => {
    if (reason || netReason) return t.skip(reason || netReason);
    const s = await open();
    try {
      const r = await call(s, 'run_container', {
        image: 'host', name: 'texted', network: true, ports: [{ containerPort: 8000 }], command: ['sleep', '300'],
      });
      const c = ok(r);
      const port = c.ports?.[0]?.hostPort;
      assert.ok(port > 0, JSON.stringify(c));
      const text = r.content[0].text;
      assert.ok(text.includes(c.id), text);
      assert.match(text, /named "texted"/);
      assert.ok(text.includes(`127.0.0.1:${port}->8000/tcp`), text);
      ok(await call(s, 'remove_container', { container: c.id, force: true }));
    } finally {
      await s.close().finally(() => s.kill());
    }
  });
});
