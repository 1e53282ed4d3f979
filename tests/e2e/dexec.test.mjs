// dexec and its run log (issue 11, the third seed), through the SDK client,
// checked by effect:
// - the preview is the output's real head and tail (also past the run
//   log's cap) with the exact number of bytes left out; stdin, exit codes,
//   sh where there is no bash;
// - the run log: one file per conversation (_meta.threadId, else the
//   session) and day, 0600 in a 0700 directory, one whole JSON record per
//   run, also from concurrent calls of two servers; hostile threadIds stay
//   inside the directory and never share a file;
// - progress notifications while it runs; timeout and cancellation kill
//   the whole tree (found in /proc by a marker argument);
// - which containers: the session's own, the allowlisted ones (managed or
//   not); an unmanaged one off the list is refused naming --allow-container,
//   even with CONTAINER_MCP_ALLOW_UNMANAGED.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { eventually, runCli, stdioClient, tmpDir } from './lib.mjs';
import { AS_NOBODY, call, nativeBackend, ok, procsWith, refused, relabelManaged, busyboxImage } from './tools.mjs';

const T = { timeout: 120000 };
const state = tmpDir('cmcp-dexec-state-');
const allowed = tmpDir('cmcp-dexec-allowed-');
fs.chmodSync(allowed, 0o777); // the sandbox's root (an unprivileged host id) writes markers here
const ENV = { CONTAINER_MCP_STATE_DIR: state, CONTAINER_MCP_ALLOWED_MOUNTS: allowed };
const RUNLOG = path.join(state, 'runlog');
const open = (env = {}, args = []) => stdioClient({ args: ['serve', ...args], env: { ...ENV, ...env } });
const marker = () => String(100000000 + crypto.randomInt(800000000));
const thread = () => `thread-${crypto.randomUUID()}`;

// dexec with an optional _meta (threadId) and request options (onprogress,
// signal).
const dexec = (s, args, { meta, ...opts } = {}) =>
  s.client.callTool({ name: 'dexec', arguments: args, ...(meta ? { _meta: meta } : {}) }, undefined, opts);
// A run log file's records: every line one whole JSON object, the last one
// ended by a newline.
function records(file) {
  const text = fs.readFileSync(file, 'utf8');
  assert.ok(text === '' || text.endsWith('\n'), `${file} ends in the middle of a record`);
  return text.split('\n').slice(0, -1).map((l, i) => {
    try {
      return JSON.parse(l);
    } catch (e) {
      assert.fail(`${file} line ${i + 1} is not one JSON record (${e.message}): ${l.slice(0, 200)}`);
    }
  });
}
const today = () => new Date().toISOString().slice(0, 10);
const keeper = async (s, extra = {}) => ok(await call(s, 'run_container', { image: 'host', command: ['sleep', '600'], ...extra })).id;

let skip = null;
before(async () => {
  skip = (await nativeBackend(open)).reason;
});
after(async () => {
  // the containers every test left running, whoever's session made them
  if (!skip) {
    const s = await open({ CONTAINER_MCP_SHARE_CONTAINERS: '1', CONTAINER_MCP_ALLOW_UNMANAGED: '1' });
    try {
      for (const c of ok(await call(s, 'list_containers', { all: true })).containers)
        await call(s, 'remove_container', { container: c.id, force: true });
    } finally {
      await s.close().finally(() => s.kill());
    }
  }
  for (const d of [state, allowed]) fs.rmSync(d, { recursive: true, force: true });
});

describe('the preview', () => {
  test('100 KB of output: the real head and tail, the exact number of bytes left out between', T, async (t) => {
    if (skip) return t.skip(skip);
    const s = await open();
    try {
      const id = await keeper(s);
      const full = Array.from({ length: 20000 }, (_, i) => `${i + 1}\n`).join('');
      const r = ok(await dexec(s, { container: id, command: 'seq 1 20000' }));
      assert.equal(r.exit_code, 0);
      assert.equal(r.truncated_bytes, full.length - 4096);
      assert.equal(r.preview, `${full.slice(0, 2048)}\n[... ${full.length - 4096} bytes left out ...]\n${full.slice(-2048)}`);
      // a few bytes: the whole output, nothing left out
      const few = ok(await dexec(s, { container: id, command: 'printf abc' }));
      assert.deepEqual([few.preview, few.truncated_bytes], ['abc', 0]);
      const small = ok(await dexec(s, { container: id, command: 'printf abc; printf def >&2' }));
      assert.deepEqual([small.preview, small.truncated_bytes], ['abcdef', 0]);
      // A multibyte character is never cut: the bytes of a split one count
      // as left out, and shown + left out is still all of it.
      const wide = ok(await dexec(s, { container: id, command: "printf x; for i in $(seq 3000); do printf 'é'; done" }));
      assert.ok(!wide.preview.includes('\uFFFD'), 'a character was cut in two');
      const [head, tail] = wide.preview.split(/\n\[\.\.\. \d+ bytes left out \.\.\.\]\n/);
      assert.equal(Buffer.byteLength(head) + Buffer.byteLength(tail) + wide.truncated_bytes, 6001);
      assert.equal(tail, 'é'.repeat(1024));
    } finally {
      await s.close().finally(() => s.kill());
    }
  });

  test('CONTAINER_MCP_DEXEC_PREVIEW_BYTES sets its size; past CONTAINER_MCP_RUNLOG_MAX_BYTES the tail is still the real end', T, async (t) => {
    if (skip) return t.skip(skip);
    const s = await open({ CONTAINER_MCP_DEXEC_PREVIEW_BYTES: '100', CONTAINER_MCP_RUNLOG_MAX_BYTES: '4096' });
    try {
      const id = await keeper(s);
      const full = Array.from({ length: 20000 }, (_, i) => `${i + 1}\n`).join('');
      const r = ok(await dexec(s, { container: id, command: 'seq 1 20000' }, { meta: { threadId: 'capped' } }));
      assert.equal(r.preview, `${full.slice(0, 50)}\n[... ${full.length - 100} bytes left out ...]\n${full.slice(-50)}`);
      assert.equal(r.truncated_bytes, full.length - 100);
      assert.equal(r.runlog_cut, true);
      const [rec] = records(r.runlog);
      assert.deepEqual([rec.stdout, rec.stdout_bytes, rec.cut, rec.cap_bytes], [full.slice(0, 4096), full.length, true, 4096]);
    } finally {
      await s.close().finally(() => s.kill());
    }
  });
});

describe('running', () => {
  test('stdin, exit codes, a signal, and the run log\'s record of each', T, async (t) => {
    if (skip) return t.skip(skip);
    const s = await open();
    try {
      const id = await keeper(s, { name: `dexec-runs-${marker()}` });
      const meta = { threadId: thread() };
      const a = ok(await dexec(s, { container: id, command: 'cat; echo; wc -c', stdin: 'hello\nworld' }, { meta }));
      assert.equal(a.preview, 'hello\nworld\n0\n');
      const script = ok(await dexec(s, { container: id, command: 'bash -s', stdin: 'echo from-script; exit 4' }, { meta }));
      assert.deepEqual([script.preview, script.exit_code], ['from-script\n', 4]);
      const killed = ok(await dexec(s, { container: id, command: 'kill -9 $$' }, { meta }));
      assert.equal(killed.exit_code, 137);
      const b = ok(await dexec(s, { container: id, command: 'echo out; echo err >&2; exit 3' }, { meta }));
      assert.deepEqual([b.exit_code, b.preview, b.timed_out], [3, 'out\nerr\n', false]);
      // bash -l: a login shell (its profile ran)
      assert.equal(ok(await dexec(s, { container: id, command: 'shopt -q login_shell && echo login' }, { meta })).preview, 'login\n');

      assert.equal(path.dirname(b.runlog), RUNLOG);
      assert.equal(path.basename(b.runlog), `${meta.threadId}.${today()}.jsonl`);
      assert.equal(fs.statSync(b.runlog).mode & 0o777, 0o600);
      assert.equal(fs.statSync(RUNLOG).mode & 0o777, 0o700);
      const recs = records(b.runlog);
      assert.equal(recs.length, 5);
      const [r0, , r2, r3] = recs;
      assert.deepEqual([r0.command, r0.stdin_bytes, r0.stdout, r0.exit_code, r0.container_id, r0.thread_id],
        ['cat; echo; wc -c', 11, 'hello\nworld\n0\n', 0, id, meta.threadId]);
      assert.equal(r2.exit_code, 137);
      assert.deepEqual([r3.stdout, r3.stderr, r3.exit_code, r3.stdin_bytes, r3.shell, r3.cut, r3.timed_out, r3.cancelled],
        ['out\n', 'err\n', 3, 0, 'bash', false, false, false]);
      assert.ok(Math.abs(Date.parse(r3.time) - Date.now()) < 600000, `record time ${r3.time}`);
      assert.ok(Number.isInteger(r3.duration_ms) && r3.duration_ms >= 0);
    } finally {
      await s.close().finally(() => s.kill());
    }
  });

  test('a container without bash: sh -c, and the result and the record say so', T, async (t) => {
    if (skip) return t.skip(skip);
    const img = busyboxImage('cmcp-dexec-images-');
    if (!img) return t.skip('no /usr/bin/busybox (apt-get install busybox-static)');
    const { images, rootfs } = img;
    const s = await open({ CONTAINER_MCP_IMAGE_DIRS: images });
    try {
      const id = await keeper(s, { image: rootfs, command: ['/bin/sleep', '600'] });
      // (no stdin here: an exec with stdin in a directory image can hang
      // under load on main too, an older bug of the native exec; stdin is
      // checked above, in the host image)
      const r = ok(await dexec(s, { container: id, command: 'echo hi; echo $0' }));
      assert.deepEqual([r.shell, r.preview, r.exit_code], ['sh', 'hi\nsh\n', 0]);
      assert.equal(records(r.runlog).at(-1).shell, 'sh');
    } finally {
      await s.close().finally(() => s.kill());
      fs.rmSync(images, { recursive: true, force: true });
    }
  });

  test('progress notifications while it runs: elapsed time and bytes so far', T, async (t) => {
    if (skip) return t.skip(skip);
    const s = await open();
    try {
      const id = await keeper(s);
      const seen = [];
      let go;
      // the command waits for a file only a second call makes, once a
      // notification has counted its first output: no timing involved
      // (its timeout only ends a broken run sooner than the test's)
      const p = dexec(s, { container: id, command: 'printf abc; while [ ! -e /tmp/go ]; do sleep 0.05; done; echo done', timeout_sec: 60 }, {
        onprogress: (n) => {
          seen.push(n);
          if (!go && / 3 bytes of output/.test(n.message)) go = dexec(s, { container: id, command: 'touch /tmp/go' });
        },
        resetTimeoutOnProgress: true,
      });
      const r = ok(await p);
      assert.equal(r.timed_out, false, 'no notification counted the first output');
      ok(await go);
      assert.equal(r.preview, 'abcdone\n');
      assert.ok(seen.length >= 1);
      for (let i = 1; i < seen.length; i++) assert.ok(seen[i].progress > seen[i - 1].progress, 'progress must grow');
      for (const n of seen) assert.match(n.message, /^running for \d+\.\d s, \d+ bytes of output so far$/);
      assert.ok(seen.some((n) => n.message.endsWith(' 3 bytes of output so far')));
    } finally {
      await s.close().finally(() => s.kill());
    }
  });
});

// A tree of four: a background child, one in its own session, a grandchild
// left by a subshell that exits, and the shell waiting.
const tree = (m) => `sleep ${m} & setsid sleep ${m} & (sleep ${m} &); sleep ${m}`;

describe('timeout and cancellation', () => {
  test('timeout_sec kills the command\'s whole tree; the record says timed out', T, async (t) => {
    if (skip) return t.skip(skip);
    const s = await open();
    try {
      const id = await keeper(s);
      const m = marker();
      const r = ok(await dexec(s, { container: id, command: `echo started; ${tree(m)}`, timeout_sec: 5 }));
      assert.deepEqual([r.timed_out, r.preview], [true, 'started\n']);
      await eventually(() => procsWith(m).length === 0, 20000, `every "sleep ${m}" to be gone after the timeout`);
      const rec = records(r.runlog).at(-1);
      assert.deepEqual([rec.timed_out, rec.stdout, rec.exit_code], [true, 'started\n', r.exit_code]);
    } finally {
      await s.close().finally(() => s.kill());
    }
  });

  test('cancellation kills the whole tree; the run is recorded as cancelled', T, async (t) => {
    if (skip) return t.skip(skip);
    const s = await open();
    try {
      const id = await keeper(s);
      const m = marker();
      const meta = { threadId: thread() };
      const ac = new AbortController();
      const p = dexec(s, { container: id, command: `echo started; ${tree(m)}` }, { meta, signal: ac.signal });
      p.catch(() => {});
      await eventually(() => procsWith(m).length === 4, 20000, `the four "sleep ${m}" (${procsWith(m)})`);
      ac.abort();
      await assert.rejects(p);
      await eventually(() => procsWith(m).length === 0, 20000, `every "sleep ${m}" to be gone after the cancel`);
      const file = path.join(RUNLOG, `${meta.threadId}.${today()}.jsonl`);
      await eventually(() => fs.existsSync(file) && fs.statSync(file).size > 0, 20000, 'the cancelled run\'s record');
      const [rec] = records(file);
      assert.deepEqual([rec.cancelled, rec.exit_code, rec.stdout], [true, null, 'started\n']);
      assert.equal(ok(await dexec(s, { container: id, command: 'echo up' })).preview, 'up\n', 'the container stays');
    } finally {
      await s.close().finally(() => s.kill());
    }
  });
});

describe('the run log', () => {
  test('two conversations, two files; no threadId: the session\'s own file, without its id', T, async (t) => {
    if (skip) return t.skip(skip);
    const s = await open();
    const s2 = await open();
    try {
      const id = await keeper(s);
      const [a, b] = [thread(), thread()];
      const ra = ok(await dexec(s, { container: id, command: 'echo A' }, { meta: { threadId: a } }));
      const rb = ok(await dexec(s, { container: id, command: 'echo B' }, { meta: { threadId: b } }));
      assert.notEqual(ra.runlog, rb.runlog);
      assert.deepEqual(records(ra.runlog).map((r) => r.stdout), ['A\n']);
      assert.deepEqual(records(rb.runlog).map((r) => r.stdout), ['B\n']);
      const n1 = ok(await dexec(s, { container: id, command: 'echo none' }));
      const n2 = ok(await dexec(s, { container: id, command: 'echo again' }));
      assert.equal(n1.runlog, n2.runlog, 'one session, one file');
      assert.match(path.basename(n1.runlog), /^session-[0-9a-f]{32}\.\d{4}-\d{2}-\d{2}\.jsonl$/);
      assert.deepEqual(records(n1.runlog).map((r) => r.stdout), ['none\n', 'again\n']);
      // another session: another file
      const id2 = await keeper(s2);
      assert.notEqual(ok(await dexec(s2, { container: id2, command: 'true' })).runlog, n1.runlog);
    } finally {
      await s.close().finally(() => s.kill());
      await s2.close().finally(() => s2.kill());
    }
  });

  test('concurrent calls from two servers: every record whole, none lost', T, async (t) => {
    if (skip) return t.skip(skip);
    const servers = [await open(), await open()];
    try {
      const meta = { threadId: thread() };
      const ids = await Promise.all(servers.map((s) => keeper(s)));
      // 6 calls each at once, 300 KB of output each: big enough for
      // interleaved writes to show
      const runs = await Promise.all(servers.flatMap((s, k) => Array.from({ length: 6 }, (_, i) =>
        dexec(s, { container: ids[k], command: `yes run-${k}-${i} | head -c 300000; echo run-${k}-${i}-end >&2` }, { meta }))));
      const files = new Set(runs.map((r) => ok(r).runlog));
      assert.equal(files.size, 1);
      const recs = records([...files][0]);
      assert.equal(recs.length, 12);
      for (let k = 0; k < 2; k++)
        for (let i = 0; i < 6; i++) {
          const tag = `run-${k}-${i}`;
          const rec = recs.find((r) => r.stderr === `${tag}-end\n`);
          assert.ok(rec, `no record of ${tag}`);
          assert.equal(rec.stdout, `${tag}\n`.repeat(300000 / (tag.length + 1) + 1).slice(0, 300000));
          assert.equal(rec.stdout_bytes, 300000);
        }
    } finally {
      for (const s of servers) await s.close().finally(() => s.kill());
    }
  });

  test('hostile threadIds: every file inside the directory, a safe name, never shared', T, async (t) => {
    if (skip) return t.skip(skip);
    const s = await open();
    try {
      const id = await keeper(s);
      const ids = ['../../x', '/etc/passwd', 'a'.repeat(10240), 'a\nb', 'a\tb', '\x7f\x01', 'Ünïcödé-🙂', '.', '..', '-rf', '.hidden',
        'a/b', 'a_b', 'a:b', 'x'.repeat(64), 'x'.repeat(65), 'CON', '~', `a${'_'.repeat(39)}~0123456789abcdef`];
      const files = new Map();
      for (const threadId of ids) {
        const r = ok(await dexec(s, { container: id, command: 'echo hostile' }, { meta: { threadId } }));
        const name = path.basename(r.runlog);
        assert.equal(path.dirname(r.runlog), RUNLOG, `${JSON.stringify(threadId)} left the directory: ${r.runlog}`);
        assert.match(name, /^[A-Za-z0-9_][A-Za-z0-9_.~-]*\.\d{4}-\d{2}-\d{2}\.jsonl$/, JSON.stringify(threadId));
        assert.ok(name.length <= 100, `${name.length} bytes of name`);
        assert.ok(!files.has(name), `${JSON.stringify(threadId)} and ${JSON.stringify(files.get(name))} share ${name}`);
        files.set(name, threadId);
        const [rec] = records(r.runlog);
        assert.equal(rec.thread_id, threadId, 'the record keeps the id as the client sent it');
      }
      assert.deepEqual(fs.readdirSync(RUNLOG).filter((f) => files.has(f)).length, ids.length);
      // a NUL never reaches dexec: the server refuses it in any string of a call
      const n = fs.readdirSync(RUNLOG).length;
      await assert.rejects(dexec(s, { container: id, command: 'echo hostile' }, { meta: { threadId: 'a\0b' } }), /NUL/);
      assert.equal(fs.readdirSync(RUNLOG).length, n);
      for (const f of [path.join(RUNLOG, `../../x.${today()}.jsonl`), `/etc/passwd.${today()}.jsonl`])
        assert.equal(fs.existsSync(f), false, `${f} was written`);
      // kept as they are: what needs no change
      assert.ok(files.has(`a_b.${today()}.jsonl`) && files.has(`${'x'.repeat(64)}.${today()}.jsonl`));
    } finally {
      await s.close().finally(() => s.kill());
    }
  });

  test('--runlog-dir and CONTAINER_MCP_RUNLOG_DIR; a directory others may write is refused at start; no sandbox may mount it', T, async (t) => {
    if (skip) return t.skip(skip);
    const base = tmpDir('cmcp-dexec-runlog-');
    try {
      const flagDir = path.join(base, 'flag', 'RUNLOG');
      const envDir = path.join(base, 'env');
      const s = await open({ CONTAINER_MCP_RUNLOG_DIR: envDir }, ['--runlog-dir', flagDir]);
      try {
        const id = await keeper(s);
        const r = ok(await dexec(s, { container: id, command: 'echo flagged' }));
        assert.equal(path.dirname(r.runlog), flagDir, 'the flag wins over the environment');
        assert.equal(fs.statSync(flagDir).mode & 0o777, 0o700);
        assert.equal(records(r.runlog)[0].stdout, 'flagged\n');
      } finally {
        await s.close().finally(() => s.kill());
      }
      const open2 = await open({ CONTAINER_MCP_RUNLOG_DIR: envDir, CONTAINER_MCP_ALLOWED_MOUNTS: base });
      try {
        const id = await keeper(open2);
        assert.equal(path.dirname(ok(await dexec(open2, { container: id, command: 'true' })).runlog), envDir);
        refused(await call(open2, 'run_container', { image: 'host', command: ['true'], mounts: [{ source: envDir, target: '/m' }] }),
          /run log directory/, /--runlog-dir/);
        refused(await call(open2, 'run_container', { image: 'host', command: ['true'], mounts: [{ source: base, target: '/m' }] }),
          /contains the run log directory/);
      } finally {
        await open2.close().finally(() => open2.kill());
      }
      const shared = path.join(base, 'shared');
      fs.mkdirSync(shared, { mode: 0o777 });
      fs.chmodSync(shared, 0o777);
      const bad = await runCli(['serve', '--runlog-dir', shared], { env: ENV });
      assert.notEqual(bad.code, 0);
      assert.match(bad.stderr, /run log directory .*shared \(--runlog-dir\) is writable by others/);
    } finally {
      fs.rmSync(base, { recursive: true, force: true });
    }
  });
});

describe('the run log\'s ceiling', () => {
  test('CONTAINER_MCP_RUNLOG_MAX_TOTAL: once the directory holds that much, dexec is refused and nothing runs', T, async (t) => {
    if (skip) return t.skip(skip);
    const dir = tmpDir('cmcp-dexec-total-');
    const s = await open({ CONTAINER_MCP_RUNLOG_DIR: dir, CONTAINER_MCP_RUNLOG_MAX_TOTAL: '64k' });
    try {
      const id = await keeper(s, { mounts: [{ source: allowed, target: '/m' }] });
      const big = "head -c 40000 /dev/zero | tr '\\0' a";
      for (let i = 0; i < 2; i++) assert.equal(ok(await dexec(s, { container: id, command: big })).exit_code, 0);
      const ran = path.join(allowed, `ran-over-total-${marker()}`);
      refused(await dexec(s, { container: id, command: `touch /m/${path.basename(ran)}` }),
        /holds \d+ bytes, CONTAINER_MCP_RUNLOG_MAX_TOTAL allows 65536/, /nothing was run/);
      assert.equal(fs.existsSync(ran), false, 'the refused command ran');
      const [file] = fs.readdirSync(dir);
      assert.equal(records(path.join(dir, file)).length, 2);
    } finally {
      await s.close().finally(() => s.kill());
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('a server run as nobody', () => {
  test('dexec runs; the run log is nobody\'s, 0600 in 0700', T, async (t) => {
    if (skip) return t.skip(skip);
    if (process.getuid() !== 0) return t.skip('needs root to run the server as nobody');
    const base = tmpDir('cmcp-dexec-nobody-');
    fs.chmodSync(base, 0o755);
    const dir = path.join(base, 'state');
    fs.mkdirSync(dir, { mode: 0o700 });
    fs.chownSync(dir, 65534, 65534);
    const s = await stdioClient({ args: ['serve'], wrap: AS_NOBODY, env: { CONTAINER_MCP_STATE_DIR: dir } });
    try {
      const id = await keeper(s);
      const r = ok(await dexec(s, { container: id, command: 'id -u; echo err >&2' }, { meta: { threadId: 'nobody' } }));
      assert.equal(r.preview, '0\nerr\n');
      assert.equal(path.dirname(r.runlog), path.join(dir, 'runlog'));
      for (const [f, mode] of [[r.runlog, 0o600], [path.dirname(r.runlog), 0o700]]) {
        const st = fs.statSync(f);
        assert.deepEqual([st.uid, st.mode & 0o777], [65534, mode], f);
      }
      assert.deepEqual(records(r.runlog).map((x) => [x.stdout, x.stderr]), [['0\n', 'err\n']]);
      await call(s, 'remove_container', { container: id, force: true });
    } finally {
      await s.close().finally(() => s.kill());
      fs.rmSync(base, { recursive: true, force: true });
    }
  });
});

describe('which containers', () => {
  test('unmanaged: refused naming --allow-container (CONTAINER_MCP_ALLOW_UNMANAGED is not enough); allowlisted: runs', T, async (t) => {
    if (skip) return t.skip(skip);
    const a = await open();
    const opened = [];
    try {
      const name = `dexec-unmanaged-${marker()}`;
      const id = ok(await call(a, 'run_container', {
        image: 'host', name, mounts: [{ source: allowed, target: '/m' }], command: ['sleep', '600'],
      })).id;
      const other = await keeper(a);
      const ran = path.join(allowed, `ran-${name}`);
      const cmd = `touch /m/ran-${name}`;
      relabelManaged(state, id, undefined);

      refused(await dexec(a, { container: name, command: cmd }), new RegExp(`container "${name}" was not created by container-mcp and is not on the allowlist`), /--allow-container/);
      const loose = await open({ CONTAINER_MCP_ALLOW_UNMANAGED: '1' });
      opened.push(loose);
      refused(await dexec(loose, { container: name, command: cmd }), /--allow-container/);
      assert.equal(fs.existsSync(ran), false, 'a refused dexec ran');
      // another session's managed container is not there at all
      refused(await dexec(loose, { container: other, command: 'true' }), /no container/);

      const byFlag = await open({}, ['--allow-container', name]);
      opened.push(byFlag);
      assert.equal(ok(await dexec(byFlag, { container: name, command: cmd })).exit_code, 0);
      assert.ok(fs.existsSync(ran), 'the allowlisted dexec did not run');
      fs.rmSync(ran);
      const byEnv = await open({ CONTAINER_MCP_ALLOWED_CONTAINERS: `nothing-here,${id}` });
      opened.push(byEnv);
      assert.equal(ok(await dexec(byEnv, { container: id, command: cmd })).exit_code, 0);
      assert.ok(fs.existsSync(ran), 'the allowlisted (by id) dexec did not run');
      // the list opens dexec, not the other tools
      refused(await call(byEnv, 'exec_in_container', { container: id, command: ['true'] }), /CONTAINER_MCP_ALLOW_UNMANAGED/);
    } finally {
      for (const s of opened) await s.close().finally(() => s.kill());
      await a.close().finally(() => a.kill());
      for (const f of fs.readdirSync(allowed)) fs.rmSync(path.join(allowed, f), { force: true });
    }
  });
});
