// dpatch (issue 11) through the SDK client on the native runtime: the
// corpus of tests/patch/corpus/ applied in a container and read back byte
// for byte (file_read base64, find for the set of files); the mode kept
// through updates and moves; a failing hunk leaving every file as it was
// (bytes, mtimes, modes); hostile paths kept inside the container (checked
// on the host: a host directory a path or symlink names stays empty, a host
// file keeps its bytes); patches to one container serialised (concurrent
// patches, none lost); the allowlist (an unmanaged container refused
// naming --allow-container, and patched once the server allows it).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { REPO, stdioClient, tmpDir } from './lib.mjs';
import { AS_NOBODY, call, nativeBackend, ok, refused, hostTrap } from './tools.mjs';

const T = { timeout: 180000 };
const state = tmpDir('cmcp-dpatch-state-');
const nobodyState = tmpDir('cmcp-dpatch-nobody-');
fs.chownSync(nobodyState, 65534, 65534);
const ENV = { CONTAINER_MCP_STATE_DIR: state };
const NOBODY = { CONTAINER_MCP_STATE_DIR: nobodyState, HOME: '/nonexistent' };
const open = (env = {}, wrap = []) => stdioClient({ args: ['serve'], env: { ...ENV, ...env }, wrap });
const CORPUS = path.join(REPO, 'tests', 'patch', 'corpus');

const SECRET = 'host secret, never to be patched\n';
const { dir: hostDir, entries: hostEntries } = hostTrap('cmcp-dpatch-host-', SECRET);

let nativeReason = null;
before(async () => {
  nativeReason = (await nativeBackend(open)).reason;
});
after(() => {
  for (const d of [state, nobodyState, hostDir]) fs.rmSync(d, { recursive: true, force: true });
});

// A server and a running container (named); fn(s, c, sh) with sh(script)
// the stdout of a shell line run in the container.
let named = 0;
async function withContainer(t, fn, env = {}, wrap = []) {
  if (nativeReason) return t.skip(nativeReason);
  const s = await open(env, wrap);
  try {
    const name = `dpatch-${process.pid}-${++named}`;
    const c = ok(await call(s, 'run_container', { image: 'host', name, command: ['sleep', '3600'] }));
    const sh = async (script) => {
      const r = ok(await call(s, 'exec_in_container', { container: c.id, command: ['sh', '-c', script] }));
      assert.equal(r.exitCode, 0, `${script}: ${r.stderr}`);
      return r.stdout;
    };
    await fn(s, c, sh);
    ok(await call(s, 'remove_container', { container: c.id, force: true }));
  } finally {
    await s.close().finally(() => s.kill());
  }
}

// A corpus case: its patch, its files before and after (container path ->
// bytes), or the lines its error must hold.
function loadTree(dir) {
  const files = new Map();
  if (!fs.existsSync(dir)) return files;
  for (const rel of fs.readdirSync(dir, { recursive: true })) {
    const p = path.join(dir, rel);
    if (fs.statSync(p).isFile()) files.set(`/${rel}`, fs.readFileSync(p));
  }
  return files;
}

function loadCase(name) {
  const dir = path.join(CORPUS, name);
  const errorFile = path.join(dir, 'error');
  return {
    patch: fs.readFileSync(path.join(dir, 'patch'), 'utf8'),
    input: loadTree(path.join(dir, 'in')),
    output: fs.existsSync(errorFile) ? null : loadTree(path.join(dir, 'out')),
    error: fs.existsSync(errorFile) ? fs.readFileSync(errorFile, 'utf8').split('\n').filter(Boolean) : null,
  };
}

const write = async (s, id, p, bytes) =>
  ok(await call(s, 'file_write', { container: id, path: p, content: bytes.toString('base64'), encoding: 'base64' }));
const readBack = async (s, id, p) =>
  Buffer.from(ok(await call(s, 'file_read', { container: id, path: p, encoding: 'base64' })).content, 'base64');
// The files under /w as the container sees them.
const filesIn = async (sh) => (await sh('cd /w 2>/dev/null && find . -type f | sort || true'))
  .split('\n').filter(Boolean).map((f) => `/w/${f.slice(2)}`);
// path, size, mode and mtime (ns) of every file under /w.
const listing = (sh) => sh('find /w -type f -printf "%p %s %m %T@\\n" | sort');

async function expectTree(s, id, sh, want, name) {
  assert.deepEqual(await filesIn(sh), [...want.keys()].sort(), `${name}: the files after the patch`);
  for (const [p, bytes] of want) {
    const got = await readBack(s, id, p);
    assert.ok(got.equals(bytes), `${name}: ${p}: got ${JSON.stringify(got.toString())}, want ${JSON.stringify(bytes.toString())}`);
  }
}

// Cases that apply and cases that fail, a subset of the corpus covering
// each kind (the unit test 'patch' runs all of it through the library).
const APPLY = ['add-nested-dirs', 'update-several-hunks', 'update-context-header', 'delete-simple', 'move-and-update',
  'move-into-new-dir', 'eof-anchor', 'crlf-file', 'crlf-file-append', 'crlf-patch-lf-file', 'no-final-newline',
  'unicode', 'unicode-punctuation-normalised', 'trailing-whitespace-context', 'surrounding-whitespace-context',
  'multi-file-mixed', 'heredoc-wrapped', 'add-then-update-same-file'];
const FAIL = ['failing-hunk-among-good', 'eof-anchor-not-at-end', 'missing-end', 'unknown-marker', 'empty-update',
  'path-traversal', 'update-missing-file', 'move-onto-directory'];

describe('dpatch', () => {
  // The server as root (acting as the sandbox's root on the host) and as
  // nobody (rootless).
  for (const [who, wrap, env] of [['a root server', [], {}], ['a server run as nobody', AS_NOBODY, NOBODY]]) {
    test(`${who}: the corpus, applied in a container: every file byte for byte, and failing patches change nothing`, T, async (t) => {
      if (wrap.length) {
        if (process.getuid() !== 0) return t.skip('running the server as nobody needs root');
        const { reason } = await nativeBackend(() => open(env, wrap));
        if (reason) return t.skip(`as nobody: ${reason}`);
      }
      return withContainer(t, async (s, c, sh) => {
        for (const name of [...APPLY, ...FAIL]) {
          const k = loadCase(name);
          await sh('rm -rf /w && mkdir /w');
          for (const [p, bytes] of k.input) await write(s, c.id, p, bytes);
          const before = await listing(sh);
          const r = await call(s, 'dpatch', { container: c.name, patch: k.patch });
          if (k.error) {
            refused(r, ...k.error.map((l) => new RegExp(l.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))));
            assert.equal(await listing(sh), before, `${name}: a refused patch changed a file (size, mode or mtime)`);
            await expectTree(s, c.id, sh, k.input, name);
          } else {
            const res = ok(r);
            assert.equal(res.container, c.id);
            await expectTree(s, c.id, sh, k.output, name);
          }
        }
      }, env, wrap);
    });
  }

  test('a write that fails after others: the error says what was already changed and what was not', T, (t) =>
    withContainer(t, async (s, c, sh) => {
      // A directory the sandbox's root may not write as the server acts
      // (no DAC override): the plan cannot see that, the write fails.
      await sh('mkdir -p /w/ro && printf "a\\n" > /w/a.txt && printf "b\\n" > /w/b.txt && chmod 555 /w/ro');
      const patch = '*** Begin Patch\n*** Update File: /w/a.txt\n@@\n-a\n+A\n*** Add File: /w/ro/x.txt\n+x\n'
        + '*** Delete File: /w/b.txt\n*** End Patch\n';
      refused(await call(s, 'dpatch', { container: c.id, patch }), /changing \/w\/ro\/x\.txt failed/,
        /no rollback across files: already changed: updated \/w\/a\.txt \(1 hunk\); not changed: \/w\/b\.txt/);
      assert.equal(await sh('cat /w/a.txt /w/b.txt; ls /w/ro'), 'A\nb\n');
    }));

  test('the result lists each file with what happened', T, (t) =>
    withContainer(t, async (s, c, sh) => {
      const k = loadCase('multi-file-mixed');
      await sh('rm -rf /w && mkdir /w');
      for (const [p, bytes] of k.input) await write(s, c.id, p, bytes);
      const r = ok(await call(s, 'dpatch', { container: c.id, patch: k.patch }));
      assert.deepEqual(r, {
        success: true, container: c.id, files: [
          { path: '/w/added.txt', action: 'added' },
          { path: '/w/deleted.txt', action: 'deleted' },
          { path: '/w/updated.txt', action: 'updated', hunks: 1 },
          { path: '/w/sub/moved2.txt', action: 'moved', from: '/w/moved.txt', hunks: 1 },
        ],
      });
    }));

  test('a file keeps its mode through an update and a move (into an existing and a new directory)', T, (t) =>
    withContainer(t, async (s, c, sh) => {
      await sh('mkdir -p /w/d && printf "#!/bin/sh\\necho one\\n" > /w/run.sh && chmod 750 /w/run.sh && ' +
        'printf "x\\n" > /w/secret && chmod 600 /w/secret');
      const update = '*** Begin Patch\n*** Update File: /w/run.sh\n@@\n-echo one\n+echo two\n*** End Patch\n';
      ok(await call(s, 'dpatch', { container: c.id, patch: update }));
      assert.equal(await sh('stat -c %a /w/run.sh; /w/run.sh'), '750\ntwo\n');
      const move = '*** Begin Patch\n*** Update File: /w/run.sh\n*** Move to: /w/d/run.sh\n@@\n-echo two\n+echo three\n*** End Patch\n';
      ok(await call(s, 'dpatch', { container: c.id, patch: move }));
      assert.equal(await sh('stat -c %a /w/d/run.sh; /w/d/run.sh; test -e /w/run.sh || echo gone'), '750\nthree\ngone\n');
      const fresh = '*** Begin Patch\n*** Update File: /w/secret\n*** Move to: /w/new/dir/secret\n@@\n-x\n+y\n*** End Patch\n';
      ok(await call(s, 'dpatch', { container: c.id, patch: fresh }));
      assert.equal(await sh('stat -c %a /w/new/dir/secret; cat /w/new/dir/secret; ls /w/new/dir; test -e /w/secret || echo gone'),
        '600\ny\nsecret\ngone\n');
    }));

  test('hostile paths stay inside the container: /proc refused, a symlink to / and ".." lead nowhere on the host', T, (t) =>
    withContainer(t, async (s, c, sh) => {
      // The host directory's path exists in the container too: its own.
      await sh(`mkdir -p /w ${hostDir} && ln -s / /w/root && ln -s ${hostDir} /w/hostdir`);
      const add = (p) => `*** Begin Patch\n*** Add File: ${p}\n+escaped\n*** End Patch\n`;
      refused(await call(s, 'dpatch', { container: c.id, patch: add('/proc/1/dpatch.txt') }), /pseudo-filesystem/);
      refused(await call(s, 'dpatch', {
        container: c.id, patch: '*** Begin Patch\n*** Update File: /proc/1/environ\n@@\n+x\n*** End Patch\n',
      }), /pseudo-filesystem/);
      refused(await call(s, 'dpatch', { container: c.id, patch: add(`/w/../../..${hostDir}/dotdot.txt`) }), /'\.' or '\.\.' component/);
      // Through symlinks: the container's own paths, never the host's.
      ok(await call(s, 'dpatch', { container: c.id, patch: add(`/w/root${hostDir}/via-root.txt`) }));
      ok(await call(s, 'dpatch', { container: c.id, patch: add('/w/hostdir/via-link.txt') }));
      assert.equal(await sh(`cat ${hostDir}/via-root.txt ${hostDir}/via-link.txt`), 'escaped\nescaped\n');
      refused(await call(s, 'dpatch', {
        container: c.id, patch: `*** Begin Patch\n*** Update File: /w/hostdir/secret.txt\n@@\n-host secret, never to be patched\n+patched\n*** End Patch\n`,
      }), /no such file/);
      assert.deepEqual(hostEntries(), [], 'a dpatch wrote into the host directory');
      assert.equal(fs.readFileSync(path.join(hostDir, 'secret.txt'), 'utf8'), SECRET);
    }));

  test('patches to one container run one at a time: 16 concurrent patches of one file all land', T, (t) =>
    withContainer(t, async (s, c, sh) => {
      await sh('mkdir -p /w && printf "start\\n" > /w/log.txt');
      const patch = (i) => `*** Begin Patch\n*** Update File: /w/log.txt\n@@\n+line ${i}\n*** End Patch\n`;
      const rs = await Promise.all([...Array(16).keys()].map((i) => call(s, 'dpatch', { container: c.id, patch: patch(i) })));
      for (const r of rs) ok(r);
      const lines = (await sh('cat /w/log.txt')).split('\n').filter(Boolean);
      assert.equal(lines[0], 'start');
      assert.deepEqual(lines.slice(1).sort(), [...Array(16).keys()].map((i) => `line ${i}`).sort(),
        'a patch was lost: two ran at once on the same file');
    }));

  test('read-only mode refuses dpatch', T, (t) =>
    withContainer(t, async (s, c) => {
      const ro = await open({ CONTAINER_MCP_READONLY: '1' });
      try {
        refused(await call(ro, 'dpatch', { container: c.id, patch: '*** Begin Patch\n*** Add File: /w/ro.txt\n+x\n*** End Patch\n' }),
          /dpatch refused: the server runs with CONTAINER_MCP_READONLY/);
      } finally {
        await ro.close().finally(() => ro.kill());
      }
      refused(await call(s, 'file_read', { container: c.id, path: '/w/ro.txt' }), /No such file/);
    }));
});

describe('which containers', () => {
  // Take the managed label out of a container's record (a container
  // container-mcp did not make, as managed.test.mjs does), or put it back.
  const relabel = (id, managed) => {
    const file = path.join(state, 'containers', id, 'state.json');
    const rec = JSON.parse(fs.readFileSync(file, 'utf8'));
    if (managed) rec.labels['dev.container-mcp.managed'] = 'true';
    else delete rec.labels['dev.container-mcp.managed'];
    fs.writeFileSync(`${file}.tmp`, JSON.stringify(rec), { mode: 0o600 });
    fs.renameSync(`${file}.tmp`, file);
  };

  test('a container not made by container-mcp: refused naming --allow-container; patched once allowed', T, (t) =>
    withContainer(t, async (s, c, sh) => {
      const patch = '*** Begin Patch\n*** Add File: /w/allowed.txt\n+yes\n*** End Patch\n';
      await sh('mkdir -p /w');
      relabel(c.id, false);
      refused(await call(s, 'dpatch', { container: c.name, patch }), /not on the allowlist/, /--allow-container/);
      const other = await open({ CONTAINER_MCP_ALLOWED_CONTAINERS: c.name });
      try {
        ok(await call(other, 'dpatch', { container: c.name, patch }));
      } finally {
        await other.close().finally(() => other.kill());
      }
      relabel(c.id, true);
      assert.equal((await readBack(s, c.id, '/w/allowed.txt')).toString(), 'yes\n');
      // Another session's container is no container at all.
      const third = await open();
      try {
        refused(await call(third, 'dpatch', { container: c.id, patch }), /no container/);
      } finally {
        await third.close().finally(() => third.kill());
      }
    }));
});
