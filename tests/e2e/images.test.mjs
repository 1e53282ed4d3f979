// The native image store (issue 13): `container-mcp image import|list|rm|prune`
// and run_container on what was imported, through the MCP SDK client.
// Images are made here from the host's busybox-static (a rootfs tarball, and
// two-layer images by mkimage.py: an OCI layout, `docker save`'s legacy and
// OCI forms); each run checks what the image's config and layers promise
// (Env, WorkingDir, User, Entrypoint, whiteouts), from inside the sandbox.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { BIN, envWith, eventually, runCli, stdioClient, tmpDir, treeBytes } from './lib.mjs';
import { AS_NOBODY, call, nativeBackend, ok, refused } from './tools.mjs';

const T = { timeout: 180000 };
const HERE = path.dirname(new URL(import.meta.url).pathname);
const BUSYBOX = '/bin/busybox';
const state = tmpDir('cmcp-img-state-');
const work = tmpDir('cmcp-img-work-');
const ENV = { CONTAINER_MCP_STATE_DIR: state };
const CONFIG = {
  Env: ['GREETING=from-image', 'PATH=/bin'],
  WorkingDir: '/etc',
  Entrypoint: ['/bin/sh', '-c'],
  Cmd: ['echo default-cmd'],
  User: 'app',
};

const open = (env = {}) => stdioClient({ args: ['serve'], env: { ...ENV, ...env } });
const image = (args, opts = {}) => runCli(['image', ...args], { env: { ...ENV, ...opts.env }, timeout: 120000 });
const isRoot = process.getuid() === 0;


function makeRootfs(dir) {
  fs.mkdirSync(path.join(dir, 'bin'), { recursive: true });
  fs.mkdirSync(path.join(dir, 'etc'));
  fs.copyFileSync(BUSYBOX, path.join(dir, 'bin', 'busybox'));
  fs.chmodSync(path.join(dir, 'bin', 'busybox'), 0o755);
  for (const a of ['sh', 'id', 'pwd', 'env', 'ls', 'cat', 'echo', 'sleep', 'touch']) fs.symlinkSync('busybox', path.join(dir, 'bin', a));
  fs.writeFileSync(path.join(dir, 'etc', 'passwd'), 'root:x:0:0:root:/root:/bin/sh\napp:x:1000:1001::/home/app:/bin/sh\n');
  fs.writeFileSync(path.join(dir, 'etc', 'group'), 'root:x:0:\napp:x:1001:\n');
}

function mkimage(out, format, extra = []) {
  const r = spawnSync('python3', [path.join(HERE, 'mkimage.py'), path.join(work, 'rootfs'), out, '--format', format,
    '--config', JSON.stringify(CONFIG), ...extra], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
}

let skipReason = null;
before(async () => {
  if (!fs.existsSync(BUSYBOX)) skipReason = `${BUSYBOX} is missing (apt-get install busybox-static)`;
  else if (spawnSync('python3', ['--version']).status !== 0) skipReason = 'python3 is missing';
  else skipReason = (await nativeBackend(open)).reason;
  if (skipReason) return;
  makeRootfs(path.join(work, 'rootfs'));
  const tar = spawnSync('tar', ['-C', path.join(work, 'rootfs'), '-czf', path.join(work, 'busybox.tar.gz'), '.']);
  assert.equal(tar.status, 0, String(tar.stderr));
  mkimage(path.join(work, 'layout'), 'oci');
  mkimage(path.join(work, 'legacy.tar'), 'docker', ['--tar', '--name', 'legacy:1']);
  mkimage(path.join(work, 'docker25.tar'), 'docker-oci', ['--tar', '--name', 'example.com/team/d25:2']);
});
after(() => {
  for (const d of [state, work]) fs.rmSync(d, { recursive: true, force: true });
});

async function runIn(s, img, command, extra = {}) {
  return ok(await call(s, 'run_container', { image: img, command, wait: true, ...extra }));
}

describe('image import and runs', () => {
  test('a rootfs tarball, an OCI layout and docker save archives import, list and run with their config', T, async (t) => {
    if (skipReason) return t.skip(skipReason);
    let r = await image(['import', path.join(work, 'busybox.tar.gz'), 'busybox']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /imported docker\.io\/library\/busybox:latest/);
    r = await image(['import', path.join(work, 'layout'), 'layout:1']);
    assert.equal(r.code, 0, r.stderr);
    r = await image(['import', path.join(work, 'legacy.tar')]); // its RepoTags name it
    assert.equal(r.code, 0, r.stderr);
    r = await image(['import', path.join(work, 'docker25.tar')]);
    assert.equal(r.code, 0, r.stderr);

    r = await image(['list']);
    assert.equal(r.code, 0, r.stderr);
    for (const n of ['docker.io/library/busybox:latest', 'docker.io/library/layout:1', 'docker.io/library/legacy:1',
      'example.com/team/d25:2']) {
      assert.match(r.stdout, new RegExp(`^${n.replace(/[.]/g, '\\.')}\\s+[0-9a-f]{12}\\s+[0-9.]+ MB`, 'm'), r.stdout);
    }

    const s = await open();
    try {
      // the rootfs tarball: a short name finds it; no config, our defaults
      let out = await runIn(s, 'busybox', ['sh', '-c', 'id -u; pwd; cat /etc/passwd | head -1']);
      assert.equal(out.exitCode, 0, out.stderr);
      assert.equal(out.stdout, '0\n/workspace\nroot:x:0:0:root:/root:/bin/sh\n');
      for (const img of ['layout:1', 'legacy:1', 'example.com/team/d25:2']) {
        // no command: Entrypoint + Cmd
        out = await runIn(s, img, undefined);
        assert.equal(out.stdout, 'default-cmd\n', `${img}: ${out.stderr}`);
        // a command replaces Cmd, the Entrypoint stays (sh -c); env merged, the run's wins
        out = await runIn(s, img, ['id -u; id -g; pwd; echo $GREETING $MINE; ls /opq; ls /etc/hidden 2>&1; cat /etc/layer2'],
          { env: { MINE: 'from-run' } });
        assert.equal(out.exitCode, 0, `${img}: ${out.stderr}`);
        const lines = out.stdout.split('\n');
        // User "app" from the image's own /etc/passwd (uid 1000, group 1001); a
        // rootless sandbox maps one id and runs as its root
        assert.deepEqual(lines.slice(0, 2), isRoot ? ['1000', '1001'] : ['0', '0'], `${img}: ${out.stdout}`);
        assert.equal(lines[2], '/etc');
        assert.equal(lines[3], 'from-image from-run');
        assert.equal(lines[4], 'new', `${img}: the opaque /opq of layer 2 hides layer 1's old`);
        assert.match(lines[5], /No such file/, `${img}: .wh.hidden of layer 2 removes /etc/hidden`);
        assert.equal(lines[6], 'from layer 2');
        out = await runIn(s, img, ['echo $GREETING'], { env: { GREETING: 'overridden' } });
        assert.equal(out.stdout, 'overridden\n');
      }
      // the sandbox's mount table is its own: one root, nothing of the host's
      // (a root server's stage tmpfs sat over the host's "/", and the host's
      // root stayed stacked under the new one, listed with all its mounts)
      const host = fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\n')
        .map((l) => l.split(' ')[4]).filter((m) => m && m.split('/').length > 2 && !/^\/(proc|sys|dev|tmp)\//.test(m));
      for (const img of ['busybox', 'host']) {
        out = await runIn(s, img, ['cat', '/proc/self/mountinfo']);
        const points = out.stdout.split('\n').filter(Boolean).map((l) => l.split(' ')[4]);
        assert.equal(points.filter((m) => m === '/').length, 1, `${img}: one root:\n${out.stdout}`);
        const leaked = points.filter((m) => host.includes(m) && m !== '/usr');
        assert.deepEqual(leaked, [], `${img}: the host's mounts are in the sandbox's table:\n${out.stdout}`);
      }
      // unknown: says to pull first
      refused(await call(s, 'run_container', { image: 'nothere:1', command: ['true'], wait: true }), /pull_image/);
    } finally {
      await s.close();
    }
  });

  test('without overlayfs the layers are copied, whiteouts applied by deleting', T, async (t) => {
    if (skipReason) return t.skip(skipReason);
    const r = await image(['import', path.join(work, 'layout'), 'copied:1']);
    assert.equal(r.code, 0, r.stderr);
    const s = await open({ CONTAINER_MCP_NATIVE_OVERLAY: '0' });
    try {
      const out = await runIn(s, 'copied:1', ['ls /opq; ls /etc/hidden 2>&1; cat /etc/layer2; pwd']);
      assert.equal(out.exitCode, 0, out.stderr);
      const lines = out.stdout.split('\n');
      assert.equal(lines[0], 'new');
      assert.match(lines[1], /No such file/);
      assert.deepEqual(lines.slice(2, 4), ['from layer 2', '/etc']);
    } finally {
      await s.close();
    }
  });

  test('an image in use is listed so and not removed; rm --force keeps it until the container goes; prune gives the bytes back', T, async (t) => {
    if (skipReason) return t.skip(skipReason);
    // an image of its own: the busybox tarball imported again within the
    // same second is the same image (the same config and manifest), and
    // `rm` of one of two names only untags
    const own = path.join(work, 'inuse-rootfs');
    fs.cpSync(path.join(work, 'rootfs'), own, { recursive: true, verbatimSymlinks: true });
    fs.writeFileSync(path.join(own, 'etc', 'inuse'), 'mine\n');
    const tar = spawnSync('tar', ['-C', own, '-czf', path.join(work, 'inuse.tar.gz'), '.']);
    assert.equal(tar.status, 0, String(tar.stderr));
    let r = await image(['import', path.join(work, 'inuse.tar.gz'), 'inuse:1']);
    assert.equal(r.code, 0, r.stderr);
    const s = await open();
    try {
      const c = ok(await call(s, 'run_container', { image: 'inuse:1', name: 'img-user', command: ['sleep', '300'] }));
      r = await image(['list']);
      assert.match(r.stdout, /^docker\.io\/library\/inuse:1\s.*\syes$/m, r.stdout);
      r = await image(['rm', 'inuse:1']);
      assert.equal(r.code, 1);
      assert.match(r.stderr, /used by container img-user: remove it first or force/);
      // still runs
      assert.equal((await runIn(s, 'inuse:1', ['echo', 'ok'])).stdout, 'ok\n');
      // forced: the name goes, the layers stay while the container runs
      r = await image(['rm', '--force', 'inuse:1']);
      assert.equal(r.code, 0, r.stderr);
      r = await image(['prune']);
      assert.match(r.stdout, /removed 0 image/);
      assert.equal(ok(await call(s, 'exec_in_container', { container: c.id, command: ['cat', '/etc/group'] })).exitCode, 0);
      ok(await call(s, 'remove_container', { container: c.id, force: true }));
    } finally {
      await s.close();
    }
    // every image goes now; prune says how many bytes, and they are gone from disk
    const before = treeBytes(path.join(state, 'images'));
    r = await image(['prune', '--all']);
    assert.equal(r.code, 0, r.stderr);
    const m = r.stdout.match(/removed (\d+) image\(s\), reclaimed .* \((\d+) bytes\)/);
    assert.ok(m, r.stdout);
    assert.ok(Number(m[1]) >= 4, r.stdout);
    const after = treeBytes(path.join(state, 'images'));
    const reclaimed = Number(m[2]);
    assert.ok(reclaimed > 1e6, `at least busybox's bytes: ${r.stdout}`);
    // what is left is the index and lock files
    assert.ok(before - after >= reclaimed, `disk went from ${before} to ${after}, prune said ${reclaimed}`);
    assert.ok(after < 4096, `left ${after} bytes in the store`);
    assert.deepEqual(fs.readdirSync(path.join(state, 'images', 'layers')), []);
    r = await image(['list']);
    assert.equal(r.stdout.trim().split('\n').length, 1, r.stdout);
  });

  test('kill -9 of an import mid-way lists nothing half-done; importing again works', T, async (t) => {
    if (skipReason) return t.skip(skipReason);
    // a big layer (256 MiB of zeros, uncompressed) so the import is caught at work
    const big = path.join(work, 'big');
    fs.mkdirSync(big);
    const zeros = spawnSync('python3', ['-c', `
import tarfile, io, sys
class Z(io.RawIOBase):
    def __init__(s, n): s.n = n
    def readable(s): return True
    def readinto(s, b):
        k = min(len(b), s.n); b[:k] = bytes(k); s.n -= k; return k
with tarfile.open(sys.argv[1], 'w') as t:
    i = tarfile.TarInfo('zeros'); i.size = 256 << 20; t.addfile(i, io.BufferedReader(Z(i.size)))
    t.add(sys.argv[2] + '/bin', arcname='bin')
`, path.join(big, 'big.tar'), path.join(work, 'rootfs')]);
    assert.equal(zeros.status, 0, String(zeros.stderr));
    const tmp = path.join(state, 'images', 'tmp');
    const proc = spawn(BIN, ['image', 'import', path.join(big, 'big.tar'), 'big:1'], { env: envWith(ENV), stdio: 'ignore' });
    const exited = new Promise((res) => proc.once('close', res));
    // at work: something in tmp/ (a blob being copied or a layer being unpacked)
    await eventually(() => fs.existsSync(tmp) && fs.readdirSync(tmp).length > 0, 60000, 'the import to start writing', 5);
    proc.kill('SIGKILL');
    await exited;
    let r = await image(['list']);
    assert.doesNotMatch(r.stdout, /big:1/);
    r = await image(['import', path.join(big, 'big.tar'), 'big:1']);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(fs.readdirSync(tmp), [], 'the killed import\'s temporaries are gone');
    const s = await open();
    try {
      const out = await runIn(s, 'big:1', ['/bin/sh', '-c', 'ls -l /zeros']);
      assert.match(out.stdout, /268435456/);
    } finally {
      await s.close();
    }
    r = await image(['rm', 'big:1']);
    assert.equal(r.code, 0, r.stderr);
  });

  test('hostile imports are refused with a clear error and nothing is listed', T, async (t) => {
    if (skipReason) return t.skip(skipReason);
    const evil = path.join(work, 'evil');
    fs.mkdirSync(evil);
    const made = spawnSync('python3', ['-c', `
import tarfile, io, sys
with tarfile.open(sys.argv[1], 'w') as t:
    i = tarfile.TarInfo('../../escaped'); i.size = 4; t.addfile(i, io.BytesIO(b'evil'))
`, path.join(evil, 'dotdot.tar')]);
    assert.equal(made.status, 0, String(made.stderr));
    let r = await image(['import', path.join(evil, 'dotdot.tar'), 'evil:1']);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /leaves the layer/);
    assert.equal(fs.existsSync(path.join(state, 'escaped')), false);
    r = await image(['import', path.join(work, 'busybox.tar.gz'), 'UPPER']);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /not a valid reference/);
    r = await image(['import', path.join(work, 'busybox.tar.gz'), 'tiny:1'], { env: { CONTAINER_MCP_IMAGE_MAX_SIZE: '1m' } });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /CONTAINER_MCP_IMAGE_MAX_SIZE/);
    r = await image(['list']);
    assert.doesNotMatch(r.stdout, /evil|tiny|UPPER/);
    r = await image(['list'], { env: { CONTAINER_MCP_IMAGE_MAX_SIZE: 'lots' } });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /CONTAINER_MCP_IMAGE_MAX_SIZE=lots: expected a size/);
  });

  test('a rootless server (nobody): its own store, layers owned by it, whiteouts by user xattrs', T, async (t) => {
    if (skipReason) return t.skip(skipReason);
    if (!isRoot) return t.skip('needs root to become nobody');
    const nstate = tmpDir('cmcp-img-nobody-');
    fs.chownSync(nstate, 65534, 65534);
    for (const d of [work, path.join(work, 'layout')]) fs.chmodSync(d, 0o755);
    try {
      const env = { CONTAINER_MCP_STATE_DIR: nstate, HOME: nstate };
      const imp = spawnSync(AS_NOBODY[0], [...AS_NOBODY.slice(1), BIN, 'image', 'import', path.join(work, 'layout'), 'mine:1'],
        { env: envWith(env), encoding: 'utf8' });
      assert.equal(imp.status, 0, imp.stderr);
      const layers = fs.readdirSync(path.join(nstate, 'images', 'layers'));
      assert.equal(layers.length, 2);
      for (const l of layers) assert.equal(fs.statSync(path.join(nstate, 'images', 'layers', l)).uid, 65534);
      // a build's RUN steps: root before USER app, app after it
      const ctx = path.join(nstate, 'ctx');
      fs.mkdirSync(ctx);
      fs.writeFileSync(path.join(ctx, 'Dockerfile'),
        'FROM mine:1\nUSER root\nRUN id -u > /run-as-root\nUSER app\nRUN id -u > /tmp/run-as-app\n');
      fs.chownSync(ctx, 65534, 65534);
      const built = spawnSync(AS_NOBODY[0], [...AS_NOBODY.slice(1), BIN, 'image', 'build', ctx, '-t', 'mine:built'],
        { env: envWith(env), encoding: 'utf8' });
      assert.equal(built.status, 0, built.stderr);
      const s = await stdioClient({ args: ['serve'], env, wrap: AS_NOBODY });
      try {
        // The image's User (app, 1000:1001) through a user namespace nested
        // in the sandbox's one-id map: the command is app, and the files (all
        // of that one id) look like app's, so app may write where the image
        // meant it to.
        const out = await runIn(s, 'mine:1',
          ['id -u; id -g; id -un; ls /opq; ls /etc/hidden 2>&1; echo $GREETING; stat -c %u:%g /etc/passwd; ' +
           'touch /etc/by-app && stat -c %u /etc/by-app; grep ^Cap[EP] /proc/self/status']);
        assert.equal(out.exitCode, 0, out.stderr);
        const lines = out.stdout.split('\n');
        assert.deepEqual(lines.slice(0, 3), ['1000', '1001', 'app'], out.stdout);
        assert.equal(lines[3], 'new');
        assert.match(lines[4], /No such file/);
        assert.equal(lines[5], 'from-image');
        assert.equal(lines[6], '1000:1001');
        assert.equal(lines[7], '1000');
        // a user, not root: no capability left (as for Docker's non-root users)
        assert.deepEqual(lines.slice(8, 10), ['CapPrm:\t0000000000000000', 'CapEff:\t0000000000000000'], out.stdout);
        // with a network (pasta joins the sandbox's namespaces before the nesting)
        const net = await call(s, 'run_container', { image: 'mine:1', wait: true, network: true, command: ['id -u; cat /proc/net/route | wc -l'] });
        if (!net.isError || !/pasta or slirp4netns/.test(net.content[0].text)) {
          const o = ok(net);
          assert.equal(o.exitCode, 0, o.stderr);
          assert.equal(o.stdout.split('\n')[0], '1000', o.stdout);
        }
        const b = await runIn(s, 'mine:built', ['cat /run-as-root /tmp/run-as-app; id -u']);
        assert.equal(b.stdout, '0\n1000\n1000\n', b.stderr);
        // an exec into a detached one is app too, and what it writes is the server's on the host
        const d = ok(await call(s, 'run_container', { image: 'mine:1', command: ['sleep 300'] }));
        try {
          const x = ok(await call(s, 'exec_in_container', { container: d.id, command: ['sh', '-c', 'id -u; id -g; touch /tmp/x; echo ok'] }));
          assert.equal(x.stdout, '1000\n1001\nok\n', JSON.stringify(x));
          // an exec too big for the init's spawn request joins the namespaces
          // from outside (the sandbox's, then app's): app as well
          const big = ok(await call(s, 'exec_in_container', { container: d.id,
            command: ['sh', '-c', 'id -u; id -g; echo ${#1}', 'sh', 'x'.repeat(120 * 1024)] }));
          assert.equal(big.stdout, `1000\n1001\n${120 * 1024}\n`, JSON.stringify(big).slice(0, 300));
          const v = ok(await call(s, 'dinspect', { container: d.id }));
          assert.equal(v.host_uid ?? v.kernel?.host_uid, 65534, JSON.stringify(v));
          assert.equal(v.user, '1000:1001', JSON.stringify(v));
        } finally {
          await call(s, 'remove_container', { container: d.id, force: true });
        }
      } finally {
        await s.close();
      }
    } finally {
      fs.rmSync(nstate, { recursive: true, force: true });
    }
  });
});
