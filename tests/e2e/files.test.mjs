// The file tools (issue 10) through the SDK client, on a container made
// with run_container (image host, a writable /workspace in its root):
// round trips checked by what the container itself reads (cat, od, stat),
// the size cap and the extension list, listing, hostile paths kept inside
// the container (checked on the host: a host directory that a path or a
// symlink names stays empty, a host file stays unread), the owner on the
// host of what a root server writes, atomic writes.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { stdioClient, tmpDir } from './lib.mjs';
import { AS_NOBODY, call, nativeBackend, ok, refused, hostTrap } from './tools.mjs';

const T = { timeout: 120000 };
const state = tmpDir('cmcp-files-state-');
const nobodyState = tmpDir('cmcp-files-nobody-');
fs.chownSync(nobodyState, 65534, 65534);
const ENV = { CONTAINER_MCP_STATE_DIR: state };
const NOBODY = { CONTAINER_MCP_STATE_DIR: nobodyState, HOME: '/nonexistent' };
const open = (env = {}, wrap = []) => stdioClient({ args: ['serve'], env: { ...ENV, ...env }, wrap });

const SECRET = 'host secret, never to be read\n';
const { dir: hostDir, entries: hostEntries } = hostTrap('cmcp-files-host-', SECRET);

let nativeReason = null;
before(async () => {
  nativeReason = (await nativeBackend(open)).reason;
});
after(() => {
  for (const d of [state, nobodyState, hostDir]) fs.rmSync(d, { recursive: true, force: true });
});

// A server and a running container on it; `fn(s, id, sh)` with sh(script)
// running a shell line in the container (its stdout).
async function withContainer(t, env, fn, { wrap = [], command = ['sleep', '3600'], mounts } = {}) {
  if (nativeReason) return t.skip(nativeReason);
  const s = await open(env, wrap);
  try {
    const c = ok(await call(s, 'run_container', { image: 'host', command, ...(mounts ? { mounts } : {}) }));
    const sh = async (script) => {
      const r = ok(await call(s, 'exec_in_container', { container: c.id, command: ['sh', '-c', script] }));
      assert.equal(r.exitCode, 0, `${script}: ${r.stderr}`);
      return r.stdout;
    };
    await fn(s, c.id, sh);
    ok(await call(s, 'remove_container', { container: c.id, force: true }));
  } finally {
    await s.close().finally(() => s.kill());
  }
}

const hex = (s) => s.replace(/\s+/g, '');
const odHex = (sh, p) => sh(`od -An -v -tx1 ${p}`).then(hex);

describe('round trips', () => {
  test('text, non-ASCII, empty, binary (base64), latin-1: what the container reads is what was written', T, (t) =>
    withContainer(t, {}, async (s, id, sh) => {
      const rd = async (args) => ok(await call(s, 'file_read', { container: id, ...args }));
      const text = 'hello\nworld\n';
      assert.deepEqual(ok(await call(s, 'file_write', { container: id, path: 't.txt', content: text })),
        { success: true, path: '/workspace/t.txt', size: 12 });
      assert.equal(await sh('cat /workspace/t.txt'), text);
      const r = await rd({ path: '/workspace/t.txt' });
      assert.deepEqual([r.content, r.size, r.success], [text, 12, true]);
      const mtime = Number(await sh('stat -c %Y /workspace/t.txt'));
      assert.equal(Math.floor(r.modified), mtime, 'modified is the file\'s mtime');

      const uni = 'grüße, 日本語, 🎉\n';
      ok(await call(s, 'file_write', { container: id, path: 'u.txt', content: uni }));
      assert.equal(await odHex(sh, '/workspace/u.txt'), Buffer.from(uni).toString('hex'));
      assert.equal((await rd({ path: 'u.txt' })).content, uni);
      assert.equal((await rd({ path: 'u.txt' })).size, Buffer.byteLength(uni));

      ok(await call(s, 'file_write', { container: id, path: 'empty.txt', content: '' }));
      assert.equal(await sh('stat -c %s /workspace/empty.txt'), '0\n');
      assert.deepEqual([(await rd({ path: 'empty.txt' })).content, (await rd({ path: 'empty.txt' })).size], ['', 0]);

      const bin = Buffer.from([...Array(256).keys(), 0, 0, 255]);
      ok(await call(s, 'file_write', { container: id, path: 'b.bin', content: bin.toString('base64'), encoding: 'base64' }));
      assert.equal(await odHex(sh, '/workspace/b.bin'), bin.toString('hex'));
      assert.equal((await rd({ path: 'b.bin', encoding: 'base64' })).content, bin.toString('base64'));
      // Not UTF-8: an error that suggests base64.
      refused(await call(s, 'file_read', { container: id, path: 'b.bin' }), /not valid UTF-8/, /base64/);

      ok(await call(s, 'file_write', { container: id, path: 'l1.txt', content: 'café à Zürich\n', encoding: 'latin-1' }));
      assert.equal(await odHex(sh, '/workspace/l1.txt'), Buffer.from('café à Zürich\n', 'latin1').toString('hex'));
      assert.equal((await rd({ path: 'l1.txt', encoding: 'latin-1' })).content, 'café à Zürich\n');
      refused(await call(s, 'file_read', { container: id, path: 'l1.txt' }), /not valid UTF-8/, /base64/);
      // A character latin-1 cannot hold is refused, and nothing is written.
      refused(await call(s, 'file_write', { container: id, path: 'l2.txt', content: '日本', encoding: 'latin-1' }), /cannot hold/);
      refused(await call(s, 'file_write', { container: id, path: 'x.txt', content: 'a', encoding: 'ebcdic-9' }), /not supported/);
      assert.equal(await sh('ls /workspace'), 'b.bin\nempty.txt\nl1.txt\nt.txt\nu.txt\n');
    }));

  test('offset and limit pick lines', T, (t) =>
    withContainer(t, {}, async (s, id, sh) => {
      await sh('seq 0 9 | sed s/^/l/ > /workspace/lines.txt');
      const rd = async (a) => ok(await call(s, 'file_read', { container: id, path: 'lines.txt', ...a })).content;
      assert.equal(await rd({ offset: 2, limit: 3 }), 'l2\nl3\nl4\n');
      assert.equal(await rd({ offset: 8 }), 'l8\nl9\n');
      assert.equal(await rd({ limit: 1 }), 'l0\n');
      assert.equal(await rd({ offset: 20 }), '');
      assert.equal(ok(await call(s, 'file_read', { container: id, path: 'lines.txt', offset: 9 })).size, 30, 'size is the file\'s');
    }));

  test('the size cap: exactly CONTAINER_MCP_FILE_MAX_SIZE_MB passes both ways, one byte over is refused', T, (t) =>
    withContainer(t, { CONTAINER_MCP_FILE_MAX_SIZE_MB: '1' }, async (s, id, sh) => {
      const exact = crypto.randomBytes(1 << 20);
      ok(await call(s, 'file_write', { container: id, path: 'exact.bin', content: exact.toString('base64'), encoding: 'base64' }));
      assert.equal(await sh('stat -c %s /workspace/exact.bin'), `${1 << 20}\n`);
      assert.equal(await sh('md5sum < /workspace/exact.bin'), `${crypto.createHash('md5').update(exact).digest('hex')}  -\n`);
      const back = ok(await call(s, 'file_read', { container: id, path: 'exact.bin', encoding: 'base64' }));
      assert.ok(Buffer.from(back.content, 'base64').equals(exact), 'the 1 MiB file read back differs');

      const over = Buffer.concat([exact, Buffer.from('x')]);
      refused(await call(s, 'file_write', { container: id, path: 'over.bin', content: over.toString('base64'), encoding: 'base64' }),
        /1048577 bytes/, /limit of 1 MiB/, /CONTAINER_MCP_FILE_MAX_SIZE_MB/);
      refused(await call(s, 'file_write', { container: id, path: 'over.txt', content: 'y'.repeat((1 << 20) + 1) }),
        /CONTAINER_MCP_FILE_MAX_SIZE_MB/);
      assert.equal(await sh('ls /workspace'), 'exact.bin\n', 'a refused write left a file');
      await sh('head -c 1048577 /dev/zero > /workspace/big.bin');
      refused(await call(s, 'file_read', { container: id, path: 'big.bin', encoding: 'base64' }),
        /1048577 bytes/, /CONTAINER_MCP_FILE_MAX_SIZE_MB/);
    }));

  test('CONTAINER_MCP_FILE_ALLOWED_EXTENSIONS: other names refused, and not listed', T, (t) =>
    withContainer(t, { CONTAINER_MCP_FILE_ALLOWED_EXTENSIONS: 'txt,.MD' }, async (s, id, sh) => {
      ok(await call(s, 'file_write', { container: id, path: 'a.txt', content: 'a' }));
      ok(await call(s, 'file_write', { container: id, path: 'B.md', content: 'b' }));
      for (const p of ['run.sh', 'noext', '.bashrc'])
        refused(await call(s, 'file_write', { container: id, path: p, content: 'x' }), /CONTAINER_MCP_FILE_ALLOWED_EXTENSIONS/, /txt, md/);
      await sh('echo s > /workspace/s.sh');
      refused(await call(s, 'file_read', { container: id, path: 's.sh' }), /CONTAINER_MCP_FILE_ALLOWED_EXTENSIONS/);
      refused(await call(s, 'file_move', { container: id, source: 'a.txt', destination: 'a.sh' }), /CONTAINER_MCP_FILE_ALLOWED_EXTENSIONS/);
      refused(await call(s, 'file_delete', { container: id, path: 's.sh' }), /CONTAINER_MCP_FILE_ALLOWED_EXTENSIONS/);
      assert.equal(await sh('ls /workspace'), 'B.md\na.txt\ns.sh\n');
      assert.deepEqual(ok(await call(s, 'file_list', { container: id })).entries.map((e) => e.name), ['B.md', 'a.txt']);
    }));
});

describe('list, delete, move', () => {
  test('file_list: entries with their real sizes and kinds; pattern; recursive', T, (t) =>
    withContainer(t, {}, async (s, id, sh) => {
      await sh('mkdir -p /workspace/a/b && printf 123 > /workspace/a/b/c.txt && printf 12345 > /workspace/a/e.txt && ' +
        ': > /workspace/a/d.py && ln -s /etc /workspace/a/link');
      const list = async (a) => ok(await call(s, 'file_list', { container: id, ...a }));
      const r = await list({ path: 'a' });
      assert.equal(r.path, '/workspace/a');
      assert.deepEqual(r.entries.map((e) => [e.name, e.path, e.is_directory, e.size]), [
        ['b', '/workspace/a/b', true, null], ['d.py', '/workspace/a/d.py', false, 0],
        ['e.txt', '/workspace/a/e.txt', false, 5], ['link', '/workspace/a/link', false, 4],
      ]);
      const now = Date.now() / 1000;
      for (const e of r.entries) assert.ok(Math.abs(e.modified - now) < 3600, `${e.path} modified ${e.modified}`);
      assert.deepEqual((await list({ path: '/workspace/a', pattern: '*.txt' })).entries.map((e) => e.path), ['/workspace/a/e.txt']);
      assert.deepEqual((await list({ path: 'a', pattern: '*.txt', recursive: true })).entries.map((e) => e.path),
        ['/workspace/a/b/c.txt', '/workspace/a/e.txt']);
      // The symlink to /etc is listed, not followed.
      assert.deepEqual((await list({ path: 'a', recursive: true })).entries.map((e) => e.path),
        ['/workspace/a/b', '/workspace/a/b/c.txt', '/workspace/a/d.py', '/workspace/a/e.txt', '/workspace/a/link']);
      assert.equal((await list({})).path, '/workspace', 'path defaults to /workspace');
      refused(await call(s, 'file_list', { container: id, path: 'a/e.txt' }), /Not a directory/);
    }));

  test('file_delete and file_move act on the container\'s files', T, (t) =>
    withContainer(t, {}, async (s, id, sh) => {
      await sh('mkdir -p /workspace/d/full && echo 1 > /workspace/one && echo 2 > /workspace/d/full/two && mkdir /workspace/e');
      ok(await call(s, 'file_move', { container: id, source: 'one', destination: 'd/uno' }));
      ok(await call(s, 'file_move', { container: id, source: 'd/uno', destination: 'e' })); // into a directory
      assert.equal(await sh('cat /workspace/e/uno; ls /workspace'), '1\nd\ne\n');
      ok(await call(s, 'file_delete', { container: id, path: 'e/uno' }));
      ok(await call(s, 'file_delete', { container: id, path: 'e' }));
      refused(await call(s, 'file_delete', { container: id, path: 'd/full' }), /not empty/);
      refused(await call(s, 'file_delete', { container: id, path: 'nothing' }), /No such file/);
      assert.equal(await sh('find /workspace | sort'), '/workspace\n/workspace/d\n/workspace/d/full\n/workspace/d/full/two\n');
    }));
});

describe('hostile paths stay inside the container', () => {
  const hostName = path.basename(hostDir);
  test('.., absolute and relative symlinks to / and to a host path, /proc, NUL, NAME_MAX', T, (t) =>
    withContainer(t, {}, async (s, id, sh) => {
      // The same host path seen from inside names nothing: the container's /tmp is its own.
      await sh(`ln -s ${hostDir} /workspace/abs && ln -s / /workspace/root && ` +
        `ln -s ../../../../../../../..${hostDir} /workspace/rel && ln -s ../../../../.. /workspace/relroot && mkdir -p /workspace/sub`);
      const up = '../'.repeat(12);
      const attempts = [
        `${up}${hostDir.slice(1)}/w1.txt`, `/workspace/sub/${up}${hostDir.slice(1)}/w2.txt`,
        'abs/w3.txt', 'rel/w4.txt', `root${hostDir}/w5.txt`, `root/../..${hostDir}/w6.txt`, `relroot${hostDir}/w7.txt`,
      ];
      for (const p of attempts) {
        const r = await call(s, 'file_write', { container: id, path: p, content: 'escaped?\n' });
        // Either refused or written inside the container (parents made there).
        if (!r.isError) assert.match(await sh(`cat '${r.structuredContent.path}'`), /escaped\?/);
        const rd = await call(s, 'file_read', { container: id, path: p.replace(/w\d\.txt$/, 'secret.txt') });
        assert.ok(rd.isError || rd.structuredContent.content !== SECRET, `${p}: the host's file was read`);
      }
      assert.deepEqual(hostEntries(), [], 'a write landed in the host directory');
      // ../../etc/passwd is the container's own.
      const pw = ok(await call(s, 'file_read', { container: id, path: '../../etc/passwd' }));
      assert.equal(pw.content, await sh('cat /etc/passwd'));
      assert.equal(pw.path, '/workspace/../../etc/passwd');

      // Pseudo-filesystems and magic links: refused.
      for (const p of ['/proc/1/root/etc/passwd', `/proc/1/root${hostDir}/secret.txt`, '/proc/self/environ', '/proc/1/status', '/sys/kernel/hostname'])
        refused(await call(s, 'file_read', { container: id, path: p }));
      for (const p of ['/proc/1/root/workspace/p.txt', `/proc/1/root${hostDir}/p.txt`, '/proc/sys/kernel/hostname'])
        refused(await call(s, 'file_write', { container: id, path: p, content: 'x' }));
      refused(await call(s, 'file_read', { container: id, path: '/proc/1/environ' }), /pseudo-filesystem/);
      refused(await call(s, 'file_read', { container: id, path: '/workspace/../proc/1/cmdline' }), /pseudo-filesystem/);
      refused(await call(s, 'file_read', { container: id, path: '/proc/1/root/etc/passwd' }), /symbolic links/);
      refused(await call(s, 'file_list', { container: id, path: '/proc' }), /pseudo-filesystem/);
      refused(await call(s, 'file_delete', { container: id, path: '/proc/1/root/workspace/sub' }));

      // A NUL byte, a name over NAME_MAX.
      // (the protocol layer refuses a NUL in any string; the tool's own
      // check is in tests/unit/test_filetext.c)
      await assert.rejects(call(s, 'file_write', { container: id, path: 'nul\u0000x.txt', content: 'x' }), /NUL/);
      refused(await call(s, 'file_write', { container: id, path: `${'n'.repeat(256)}.txt`, content: 'x' }), /NAME_MAX/);
      assert.equal(await sh('ls /workspace'), 'abs\nrel\nrelroot\nroot\nsub\n');
      assert.deepEqual(hostEntries(), []);
    }));

  test('a symlink swapped while writes are in flight: no write ever lands outside', T, (t) =>
    withContainer(t, {}, async (s, id) => {
      // The container's only process flips /workspace/race between a
      // directory and symlinks to the host directory's path and to /.
      // (rm -rf: a write may have made it a directory meanwhile; on a
      // symlink it removes the link only)
      const loop = `cd /workspace; while :; do rm -rf race; mkdir race; rm -rf race; ln -s ${hostDir} race; rm -rf race; ` +
        `ln -s / race; rm -rf race; ln -s ../../../../..${hostDir} race; rm -rf race; done`;
      const rc = ok(await call(s, 'run_container', { image: 'host', command: ['sh', '-c', loop] }));
      let landed = 0;
      for (let i = 0; i < 300; i++) {
        const p = i % 2 ? `race/f${i}.txt` : `race${hostDir}/f${i}.txt`;
        const r = await call(s, 'file_write', { container: rc.id, path: p, content: `${i}\n` });
        if (!r.isError) landed++;
        await call(s, 'file_read', { container: rc.id, path: 'race/secret.txt' }).then((rd) =>
          assert.ok(rd.isError || rd.structuredContent.content !== SECRET, 'the host\'s file was read'));
      }
      assert.deepEqual(hostEntries(), [], 'a write landed in the host directory');
      t.diagnostic(`${landed} of 300 writes landed inside the container`);
      ok(await call(s, 'remove_container', { container: rc.id, force: true }));
    }));
});

describe('owners and atomic writes', () => {
  // The sandbox's root as the host sees it: the first line of its uid_map.
  const mapped = (pid) => Number(fs.readFileSync(`/proc/${pid}/uid_map`, 'utf8').trim().split(/\s+/)[1]);

  for (const [who, wrap, env] of [['a root server', [], {}], ['a server run as nobody', AS_NOBODY, NOBODY]]) {
    test(`${who}: what file_write makes belongs on the host to the sandbox's root, never host root`, T, async (t) => {
      if (process.getuid() !== 0) return t.skip('reading a container\'s files through /proc/PID/root needs root');
      if (wrap.length) {
        const { reason } = await nativeBackend(() => open(env, wrap));
        if (reason) return t.skip(`as nobody: ${reason}`);
      }
      return withContainer(t, env, async (s, id, sh) => {
        const pid = ok(await call(s, 'inspect_container', { container: id })).init.pid;
        const base = mapped(pid);
        assert.notEqual(base, 0, 'the sandbox\'s root is host root');
        ok(await call(s, 'file_write', { container: id, path: 'new/dir/owned.txt', content: 'mine\n' }));
        for (const p of ['new', 'new/dir', 'new/dir/owned.txt']) {
          const st = fs.lstatSync(`/proc/${pid}/root/workspace/${p}`);
          assert.deepEqual([st.uid, st.gid], [base, base], `${p} on the host`);
        }
        assert.equal(await sh('stat -c %u:%g /workspace/new/dir/owned.txt'), '0:0\n', 'inside, the sandbox\'s root');
      }, { wrap });
    });
  }

  // Idmapped (the user is the sandbox's root there) and, forced with
  // CONTAINER_MCP_NATIVE_IDMAP=0, plain (the range's ids; the directory is
  // open to all so the sandbox may write).
  for (const idmap of [true, false]) {
    test(`a root server writing into a user's mount (${idmap ? 'idmapped' : 'not idmapped'}): never root's on the host`, T, (t) => {
      if (process.getuid() !== 0) return t.skip('needs a root server');
      const mount = tmpDir('cmcp-files-mount-');
      fs.chownSync(mount, 65534, 65534); // a user's directory (nobody's here)
      if (!idmap) fs.chmodSync(mount, 0o777);
      const env = { CONTAINER_MCP_ALLOWED_MOUNTS: mount, ...(idmap ? {} : { CONTAINER_MCP_NATIVE_IDMAP: '0' }) };
      return withContainer(t, env, async (s, id, sh) => {
        const pid = ok(await call(s, 'inspect_container', { container: id })).init.pid;
        const want = idmap ? 65534 : mapped(pid);
        ok(await call(s, 'file_write', { container: id, path: '/m/made/by-tool.txt', content: 'x' }));
        for (const p of ['made', 'made/by-tool.txt']) {
          const st = fs.lstatSync(path.join(mount, p));
          assert.deepEqual([st.uid, st.gid], [want, want], `${p} on the host`);
        }
        assert.equal(await sh('cat /m/made/by-tool.txt'), 'x');
      }, { mounts: [{ source: mount, target: '/m' }] }).finally(() => fs.rmSync(mount, { recursive: true, force: true }));
    });
  }

  test('a root server reads only what the sandbox may read', T, (t) => {
    if (process.getuid() !== 0) return t.skip('needs a root server');
    return withContainer(t, {}, async (s, id, sh) => {
      // A file owned by a sandbox user (uid 1000 inside), mode 0600: the
      // sandbox's root may read it (its own namespace), the file tools
      // act as the sandbox's root on the host, without capabilities.
      await sh('echo private > /workspace/p.txt && chown 1000:1000 /workspace/p.txt && chmod 600 /workspace/p.txt');
      refused(await call(s, 'file_read', { container: id, path: 'p.txt' }), /Permission denied/);
      await sh('chmod 644 /workspace/p.txt');
      assert.equal(ok(await call(s, 'file_read', { container: id, path: 'p.txt' })).content, 'private\n');
    });
  });

  test('a write replaces atomically: the mode is kept, no temporary file stays, a reader sees one version or the other', T, (t) =>
    withContainer(t, {}, async (s, id, sh) => {
      const A = 'A'.repeat(256 << 10), B = 'B'.repeat(256 << 10);
      ok(await call(s, 'file_write', { container: id, path: 'f.txt', content: A }));
      await sh('chmod 0640 /workspace/f.txt && ln -s f.txt /workspace/l.txt');
      const sum = (x) => crypto.createHash('md5').update(x).digest('hex');
      // A reader in the container checks every version it sees while writes run.
      const reader = call(s, 'exec_in_container', {
        container: id, timeout: 600,
        command: ['sh', '-c', `n=0; while [ ! -e /workspace/stop ]; do c=$(md5sum < /workspace/f.txt); ` +
          `case "$c" in "${sum(A)}  -"|"${sum(B)}  -") n=$((n+1));; *) echo "torn: $c";; esac; done; echo "reads $n"`],
      });
      for (let i = 0; i < 40; i++)
        ok(await call(s, 'file_write', { container: id, path: 'f.txt', content: i % 2 ? A : B }));
      ok(await call(s, 'file_write', { container: id, path: 'stop', content: '' }));
      const r = ok(await reader);
      assert.doesNotMatch(r.stdout, /torn/, 'a reader saw a partly written file');
      assert.match(r.stdout, /reads [1-9]/);
      assert.equal(await sh('stat -c %a /workspace/f.txt'), '640\n', 'the mode of the file replaced');
      assert.equal(await sh('ls -A /workspace'), 'f.txt\nl.txt\nstop\n', 'a temporary file stayed');
      // A symlink at the path is replaced, not written through.
      ok(await call(s, 'file_write', { container: id, path: 'l.txt', content: 'plain' }));
      assert.equal(await sh('stat -c %F /workspace/l.txt; md5sum < /workspace/f.txt'), `regular file\n${sum(A)}  -\n`);
    }));
});
