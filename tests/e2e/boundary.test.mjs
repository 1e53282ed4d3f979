// The boundary between an agent and the host (issue 7), through the official
// SDK client over stdio, with the server as root and as nobody:
//   - an image is "host" or a directory below CONTAINER_MCP_IMAGE_DIRS, never
//     the host's / however it is spelled (/usr/.., //, a symlink);
//   - nothing that is, holds or lies in the state dir can be mounted or copied;
//   - copy_files never reads or writes the container's /proc or /sys;
//   - host ports below CONTAINER_MCP_MIN_HOST_PORT are refused.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { stdioClient, tmpDir } from './lib.mjs';
import { AS_NOBODY, call, nativeBackend, ok, refused } from './tools.mjs';

const T = { timeout: 60000 };

// base/ holds the state dir, so an allowed root that contains it is tested too.
const base = tmpDir('cmcp-bound-');
const state = path.join(base, 'state');
const work = path.join(base, 'work');
const images = tmpDir('cmcp-images-');
const rootfs = path.join(images, 'tiny');
const nobodyState = tmpDir('cmcp-bound-nobody-');
for (const d of [state, work, path.join(state, 'inner')]) fs.mkdirSync(d);
for (const d of [base, work, images]) fs.chmodSync(d, 0o755);
fs.chownSync(nobodyState, 65534, 65534);
fs.chownSync(work, 65534, 65534);

const BUSYBOX = '/usr/bin/busybox';

// A root file system of one static busybox: enough to run `sh -c`.
function makeRootfs() {
  fs.mkdirSync(path.join(rootfs, 'bin'), { recursive: true });
  fs.copyFileSync(BUSYBOX, path.join(rootfs, 'bin', 'busybox'));
  fs.chmodSync(path.join(rootfs, 'bin', 'busybox'), 0o755);
  fs.symlinkSync('busybox', path.join(rootfs, 'bin', 'sh'));
  fs.writeFileSync(path.join(rootfs, 'marker'), 'inside the tiny image\n');
  fs.symlinkSync('/', path.join(images, 'hostroot')); // a symlink planted under the image root
  fs.chmodSync(rootfs, 0o755);
}

async function open(env = {}, as = null) {
  const common = { CONTAINER_MCP_ALLOWED_MOUNTS: base, ...env };
  if (as === 'nobody')
    return stdioClient({
      args: ['serve'],
      env: { CONTAINER_MCP_STATE_DIR: nobodyState, HOME: '/nonexistent', ...common },
      wrap: AS_NOBODY,
    });
  return stdioClient({ args: ['serve'], env: { CONTAINER_MCP_STATE_DIR: state, ...common } });
}




async function withServer(env, as, fn) {
  const s = await open(env, as);
  try {
    await fn(s);
  } finally {
    await s.close().finally(() => s.kill());
  }
}

let nativeReason = null;
let busyboxReason = null;

before(async () => {
  if (!fs.existsSync(BUSYBOX)) busyboxReason = 'busybox-static is not installed (apt-get install busybox-static)';
  else makeRootfs();
  nativeReason = (await nativeBackend(() => open())).reason;
});

after(() => {
  for (const d of [base, images, nobodyState]) fs.rmSync(d, { recursive: true, force: true });
});

// Every spelling of the host's root, and directories of the host.
const HOST_ROOTS = ['/', '//', '/usr/..', '/etc/..', '/./', '/usr', '/etc', '/root'];

for (const as of [null, 'nobody']) {
  const who = as ? 'as nobody' : 'as root';
  describe(`images ${who}`, () => {
    test('with no image dirs configured, no directory is an image; the host root never runs', T, async (t) => {
      if (nativeReason) return t.skip(nativeReason);
      await withServer({}, as, async (s) => {
        for (const image of [...HOST_ROOTS, rootfs]) {
          const r = await call(s, 'run_container', {
            image,
            command: ['/bin/sh', '-c', 'head -1 /etc/shadow; ls /root; echo RAN'],
            wait: true,
          });
          const text = refused(r, /CONTAINER_MCP_IMAGE_DIRS/);
          assert.doesNotMatch(text, /RAN|root:/, image);
        }
        // and the refusal left nothing running
        assert.deepEqual(ok(await call(s, 'list_containers', { all: true })).containers, []);
      });
    });

    test('CONTAINER_MCP_IMAGE_DIRS: a root file system below it runs; the root itself, a symlink out and the host root do not', T, async (t) => {
      if (nativeReason) return t.skip(nativeReason);
      if (busyboxReason) return t.skip(busyboxReason);
      await withServer({ CONTAINER_MCP_IMAGE_DIRS: images }, as, async (s) => {
        const r = ok(await call(s, 'run_container', { image: rootfs, command: ['/bin/sh', '-c', 'cat /marker; ls /usr 2>&1 | head -1'], wait: true }));
        assert.equal(r.exitCode, 0, r.stderr);
        assert.match(r.stdout, /^inside the tiny image\n/);
        assert.doesNotMatch(r.stdout, /bin|lib|share/); // no host /usr in it
        for (const image of [...HOST_ROOTS, images, path.join(images, 'hostroot'), `${rootfs}/..`, `${images}/../..`]) {
          const text = refused(
            await call(s, 'run_container', { image, command: ['/bin/sh', '-c', 'echo RAN'], wait: true }),
            /CONTAINER_MCP_IMAGE_DIRS|refused/,
          );
          assert.doesNotMatch(text, /RAN/, image);
        }
      });
    });
  });
}

describe('the state dir is out of reach', () => {
  test('mounts that are, hold or lie in the state dir are refused; a sibling is fine', T, async (t) => {
    if (nativeReason) return t.skip(nativeReason);
    await withServer({}, null, async (s) => {
      for (const source of [state, path.join(state, 'inner'), base, `${work}/../state`]) {
        refused(
          await call(s, 'run_container', {
            image: 'host',
            command: ['true'],
            mounts: [{ source, target: '/mnt' }],
            wait: true,
          }),
          /state dir/,
        );
      }
      const r = ok(await call(s, 'run_container', {
        image: 'host',
        command: ['sh', '-c', 'ls /mnt && echo ok > /mnt/written'],
        mounts: [{ source: work, target: '/mnt' }],
        wait: true,
      }));
      assert.equal(r.exitCode, 0, r.stderr);
      assert.ok(fs.existsSync(path.join(work, 'written')));
    });
  });

  test('copy_files will not copy into or out of the state dir', T, async (t) => {
    if (nativeReason) return t.skip(nativeReason);
    await withServer({}, null, async (s) => {
      const { id } = ok(await call(s, 'run_container', { image: 'host', command: ['sleep', '600'] }));
      try {
        ok(await call(s, 'exec_in_container', { container: id, command: ['sh', '-c', 'echo forged > /tmp/rec'] }));
        const rec = path.join(state, 'containers', id, 'state.json');
        const before = fs.readFileSync(rec, 'utf8');
        refused(
          await call(s, 'copy_files', { container: id, direction: 'from_container', source: '/tmp/rec', destination: rec }),
          /state dir/,
        );
        assert.equal(fs.readFileSync(rec, 'utf8'), before);
        refused(
          await call(s, 'copy_files', { container: id, direction: 'to_container', source: rec, destination: '/tmp/stolen' }),
          /state dir/,
        );
      } finally {
        await call(s, 'remove_container', { container: id, force: true });
      }
    });
  });
});

for (const as of [null, 'nobody']) {
  describe(`copy_files and pseudo-filesystems ${as ? 'as nobody' : 'as root'}`, () => {
    test('nothing of the container\'s /proc or /sys is copied, either way', T, async (t) => {
      if (nativeReason) return t.skip(nativeReason);
      await withServer({}, as, async (s) => {
        const { id } = ok(await call(s, 'run_container', { image: 'host', command: ['sleep', '600'] }));
        try {
          for (const source of ['/proc/kallsyms', '/proc/1/maps', '/proc/1/environ', '/proc/self', '/sys/kernel/notes', '/proc']) {
            const destination = path.join(work, `got-${source.replaceAll('/', '_')}`);
            refused(
              await call(s, 'copy_files', { container: id, direction: 'from_container', source, destination }),
              /pseudo-filesystem/,
            );
            assert.equal(fs.existsSync(destination), false, `${source} was copied out`);
          }
          fs.writeFileSync(path.join(work, 'payload'), '1\n');
          for (const destination of ['/proc/sys/kernel/core_pattern', '/proc/1/x', '/sys/kernel/x']) {
            refused(
              await call(s, 'copy_files', { container: id, direction: 'to_container', source: path.join(work, 'payload'), destination }),
              /pseudo-filesystem|cannot|denied|Read-only|No such/i,
            );
          }
          // an ordinary file still copies, and lands owned by the container's root
          ok(await call(s, 'copy_files', { container: id, direction: 'to_container', source: path.join(work, 'payload'), destination: '/tmp/payload' }));
          const r = ok(await call(s, 'exec_in_container', { container: id, command: ['stat', '-c', '%u:%g', '/tmp/payload'] }));
          assert.equal(r.stdout.trim(), '0:0');
        } finally {
          await call(s, 'remove_container', { container: id, force: true });
        }
      });
    });
  });
}

describe('published ports', () => {
  test('a host port below 1024 is refused unless CONTAINER_MCP_MIN_HOST_PORT allows it', T, async (t) => {
    if (nativeReason) return t.skip(nativeReason);
    await withServer({}, null, async (s) => {
      for (const hostPort of [25, 80, 1023]) {
        refused(
          await call(s, 'run_container', {
            image: 'host',
            command: ['sleep', '600'],
            network: true,
            ports: [{ containerPort: 25, hostPort }],
          }),
          /CONTAINER_MCP_MIN_HOST_PORT/,
        );
      }
      assert.deepEqual(ok(await call(s, 'list_containers', { all: true })).containers, []);
      // nothing listens on the host's port 25 because of us
      const err = await new Promise((resolve) => {
        const c = net.connect(25, '127.0.0.1');
        c.on('connect', () => (c.destroy(), resolve(null)));
        c.on('error', resolve);
      });
      assert.equal(err?.code, 'ECONNREFUSED');
    });
  });
});
