// The image tools on the docker backend, against the real engines of
// tests/engines/start.sh (a Docker Engine and Podman's API service) and a
// real registry on a loopback port (tests/registry/start.sh, which writes
// REGISTRY=127.0.0.1:PORT to $CM_REGISTRY_DIR/env and holds busybox:latest),
// through the official SDK client.  Every effect is read back from the
// engine itself (its image inspect) or from a container of the image.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import Ajv2020 from 'ajv/dist/2020.js';

import { readEnvFile, stdioClient, tmpDir } from './lib.mjs';
import { call as rawCall, engine, ok, refused } from './tools.mjs';

const T = { timeout: 300000 };
const BASE = 'cm-test:latest';
const ENGINES_DIR = process.env.CM_ENGINES_DIR || '/tmp/cm-engines';
const REGISTRY_DIR = process.env.CM_REGISTRY_DIR || '/tmp/cm-registry';

// KEY=value lines as the start scripts write them; `missing` when there is no file.
const ENGINES = readEnvFile(ENGINES_DIR,
  `tests/engines/start.sh has not run (no ${ENGINES_DIR}/env); run it as root to test the docker backend`);
const REG = readEnvFile(REGISTRY_DIR,
  `tests/registry/start.sh has not run (no ${REGISTRY_DIR}/env): no registry to pull from`);
const registrySkip = REG.REGISTRY ? false : REG.MISSING || `${REGISTRY_DIR}/env names no REGISTRY`;

const state = tmpDir('cmcp-images-state-');
const allowed = tmpDir('cmcp-images-allowed-');
const outside = tmpDir('cmcp-images-outside-');
after(() => {
  for (const d of [state, allowed, outside]) fs.rmSync(d, { recursive: true, force: true });
});

// GET of the engine into a file (an image's `docker save` archive).
function engineToFile(sock, p, file) {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath: sock, method: 'GET', path: p }, (res) => {
      const out = fs.createWriteStream(file);
      res.pipe(out);
      out.on('finish', () => resolve(res.statusCode));
      out.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}
// Each image tool's successful results against the outputSchema it lists,
// in strict JSON Schema 2020-12 (as outputs.test.mjs checks the others);
// the SDK client checks them too once listTools has run.
const IMAGE_TOOLS = ['list_images', 'pull_image', 'build_image', 'remove_image', 'prune_images'];
const ajv = new Ajv2020({ strict: true, allErrors: true });
const validators = new Map();
async function call(s, name, args, opts) {
  const r = await rawCall(s, name, args, opts);
  const v = validators.get(name);
  if (v && r.isError !== true) {
    assert.ok(v(r.structuredContent), `${name}: result does not match its outputSchema: ${ajv.errorsText(v.errors)}\n` +
      JSON.stringify(r.structuredContent));
    s.checked?.add(name);
  }
  return r;
}
async function listSchemas(s) {
  const { tools } = await s.client.listTools();
  for (const name of IMAGE_TOOLS) {
    const tool = tools.find((t) => t.name === name);
    assert.ok(tool, `${name} is not in tools/list`);
    if (!validators.has(name)) validators.set(name, ajv.compile(tool.outputSchema));
    assert.equal(validators.get(name)({}), false, `${name}'s outputSchema accepts {}`);
  }
  s.checked = new Set();
}
const imageOf = (sock, ref) => engine(sock, 'GET', `/images/${encodeURIComponent(ref)}/json`);

const open = (sock, env = {}) => stdioClient({
  args: ['serve', '--backend', 'docker'],
  env: { DOCKER_HOST: sock.startsWith('tcp://') ? sock : `unix://${sock}`, ...env, CONTAINER_MCP_STATE_DIR: state, CONTAINER_MCP_ALLOWED_MOUNTS: allowed,
    CONTAINER_MCP_MAX_CONTAINERS: '200', CONTAINER_MCP_RUNLOG_DIR: path.join(state, 'runlog'),
    CONTAINER_MCP_RUNLOG_MAX_BYTES: '65536',
    // the test registry is on loopback: an agent's pull needs it named
    ...(REG.REGISTRY ? { CONTAINER_MCP_ALLOWED_REGISTRIES: REG.REGISTRY } : {}) },
  initTimeout: 60000,
});

// A build context under the allowlist: files by relative path.
function context(name, files) {
  const dir = path.join(allowed, name);
  for (const [rel, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    fs.writeFileSync(path.join(dir, rel), text);
  }
  return dir;
}

// Progress notifications must grow, as MCP asks.
function assertGrowing(seen, what) {
  assert.ok(seen.length >= 1, `${what}: no progress notification came`);
  for (let i = 1; i < seen.length; i++) {
    assert.ok(seen[i].progress > seen[i - 1].progress, `${what}: progress must grow: ${JSON.stringify(seen)}`);
  }
}

test('an image reference like --help or "a b" is refused before any engine is asked', T, async () => {
  // no engine behind this socket: a refusal that names the reference came
  // before any call to one
  const s = await open(path.join(outside, 'no-engine.sock'));
  try {
    for (const [tool, args] of [
      ['pull_image', { image: '--help' }],
      ['pull_image', { image: 'a b' }],
      ['pull_image', { image: 'busybox\n:latest' }],
      ['pull_image', { image: 'x'.repeat(600) }],
      ['remove_image', { image: '-f' }],
      ['build_image', { context: allowed, tag: '--rm' }],
    ]) {
      const text = refused(await call(s, tool, args));
      assert.doesNotMatch(text, /no engine answers|engine at/, `${tool} ${JSON.stringify(args)} reached the engine: ${text}`);
      assert.match(text, /reference|maximum/i, text);
    }
  } finally {
    await s.close().finally(() => s.kill());
  }
});

for (const [label, key] of [['Docker Engine', 'DOCKER'], ['Podman service', 'PODMAN']]) {
  const sock = ENGINES[`${key}_SOCK`];
  const skip = sock ? false : (ENGINES.MISSING || ENGINES[`${key}_SKIP`] || `${label} did not start`);
  if (skip && process.env.CM_ENGINES_REQUIRED === '1') {
    test(`the ${label} the image tests need is up`, () => assert.fail(skip));
    continue;
  }

  describe(`image tools on the ${label}`, { skip }, () => {
    let s;
    const tag = `cm-img-${key.toLowerCase()}-${process.pid}`;
    const containers = [];
    before(async () => { s = await open(sock); await listSchemas(s); });
    after(async () => {
      if (!s) return;
      for (const id of containers) await call(s, 'remove_container', { container: id, force: true });
      for (const t of [`${tag}:built`, `${tag}:rm`, `${tag}:imported`, `${tag}:loaded`]) await call(s, 'remove_image', { image: t, force: true });
      await s.close().finally(() => s.kill());
    });
    const runIn = async (image, script) => ok(await call(s, 'run_container', {
      image, wait: true, command: ['sh', '-c', script] }));

    describe('from the registry', { skip: registrySkip && process.env.CM_REGISTRY_REQUIRED !== '1' ? registrySkip : false }, () => {
      const ref = `${REG.REGISTRY}/busybox:latest`;
      test('pull: progress notifications, the engine holds it, list_images shows it with its size, it runs', T, async () => {
        assert.ok(REG.REGISTRY, registrySkip);
        // gone first, so the pull downloads its layer
        await engine(sock, 'DELETE', `/images/${encodeURIComponent(ref)}?force=1`);
        const seen = [];
        const r = ok(await call(s, 'pull_image', { image: ref }, { onprogress: (p) => seen.push(p), timeout: 240000 }));
        assertGrowing(seen, 'pull');
        const eng = await imageOf(sock, ref);
        assert.equal(eng.status, 200, `the engine has no ${ref} after the pull`);
        assert.equal(r.id.replace(/^sha256:/, ''), eng.body.Id.replace(/^sha256:/, ''));
        assert.ok(r.names.some((n) => n.endsWith('busybox:latest')), JSON.stringify(r.names));

        const list = ok(await call(s, 'list_images', {})).images;
        const mine = list.find((i) => i.id === r.id);
        assert.ok(mine, `list_images lacks ${r.id}: ${JSON.stringify(list)}`);
        assert.equal(mine.size, eng.body.Size);
        assert.ok(mine.size > 100000, `a busybox image of ${mine.size} bytes`);

        const out = await runIn(ref, 'echo pulled-$((6*7))');
        assert.equal(out.stdout, 'pulled-42\n');
      });

      test('a tag the registry does not have: an error that says what to check', T, async () => {
        assert.ok(REG.REGISTRY, registrySkip);
        refused(await call(s, 'pull_image', { image: `${REG.REGISTRY}/busybox:no-such-tag` }),
          /pull|not found|manifest unknown/i, /no-such-tag/);
      });
    });

    test('build: .dockerignore honoured (an ignored file absent, an excepted one present), build args reach RUN, steps reported', T, async () => {
      const dir = context(`ctx-${key}`, {
        Dockerfile: `FROM ${BASE}\nARG GREETING=unset\nCOPY . /ctx\nRUN echo "arg=$GREETING" > /greeting\n`,
        '.dockerignore': '# leave these out\nsecret*\nlogs\n!logs/keep.txt\n**/*.tmp\n',
        'secret.txt': 'do not send',
        'logs/a.log': 'noise',
        'logs/keep.txt': 'kept',
        'src/main.c': 'int main(void) { return 0; }\n',
        'src/deep/x.tmp': 'scratch',
      });
      const seen = [];
      const r = ok(await call(s, 'build_image', { context: dir, tag: `${tag}:built`, buildArgs: { GREETING: 'hello there' } },
        { onprogress: (p) => seen.push(p), timeout: 240000 }));
      assertGrowing(seen, 'build');
      assert.ok(seen.some((p) => /step \d+\/\d+/i.test(p.message || '')), JSON.stringify(seen));
      const eng = await imageOf(sock, `${tag}:built`);
      assert.equal(eng.status, 200);
      assert.equal(r.id.replace(/^sha256:/, ''), eng.body.Id.replace(/^sha256:/, ''));

      const out = await runIn(`${tag}:built`, 'cd /ctx && find . -type f | sort; cat /greeting');
      const files = out.stdout.trim().split('\n');
      assert.deepEqual(files, ['./.dockerignore', './Dockerfile', './logs/keep.txt', './src/main.c', 'arg=hello there'],
        out.stdout + out.stderr);
    });

    test('build: a failing RUN is reported with its output; a Dockerfile or a context outside is refused', T, async () => {
      const dir = context(`bad-${key}`, {
        'Dockerfile.bad': `FROM ${BASE}\nRUN echo the-reason-is-here-${process.pid}; exit 3\n`,
      });
      refused(await call(s, 'build_image', { context: dir, dockerfile: 'Dockerfile.bad' }, { timeout: 240000 }),
        new RegExp(`the-reason-is-here-${process.pid}`), /step 2\/2|failed/i);
      fs.writeFileSync(path.join(allowed, 'Dockerfile'), `FROM ${BASE}\n`);
      refused(await call(s, 'build_image', { context: dir, dockerfile: '../Dockerfile' }), /inside the context/);
      refused(await call(s, 'build_image', { context: dir, dockerfile: '/etc/passwd' }), /inside the context/);
      fs.writeFileSync(path.join(outside, 'Dockerfile'), `FROM ${BASE}\n`);
      refused(await call(s, 'build_image', { context: outside }), /CONTAINER_MCP_ALLOWED_MOUNTS/);
      // a link out of the allowlist is no way round it
      fs.symlinkSync(outside, path.join(allowed, `link-out-${key}`));
      refused(await call(s, 'build_image', { context: path.join(allowed, `link-out-${key}`) }), /CONTAINER_MCP_ALLOWED_MOUNTS/);
    });

    test('remove: refused while a container uses the image, then with force; a missing one says pull_image', T, async () => {
      const dir = context(`rm-${key}`, { Dockerfile: `FROM ${BASE}\nRUN echo ${process.pid} > /rm-marker\n` });
      ok(await call(s, 'build_image', { context: dir, tag: `${tag}:rm` }, { timeout: 240000 }));
      const c = ok(await call(s, 'run_container', { image: `${tag}:rm`, command: ['true'] }));
      containers.push(c.id);
      const text = refused(await call(s, 'remove_image', { image: `${tag}:rm` }), /used by container/, /force/);
      assert.match(text, new RegExp(c.id.slice(0, 12)));
      assert.equal((await imageOf(sock, `${tag}:rm`)).status, 200, 'a refused remove left the image');
      const listed = ok(await call(s, 'list_images', {})).images.find((i) => i.names.some((n) => n.endsWith(`${tag}:rm`)));
      assert.equal(listed?.in_use, true, JSON.stringify(listed));

      ok(await call(s, 'remove_image', { image: `${tag}:rm`, force: true }));
      assert.equal((await imageOf(sock, `${tag}:rm`)).status, 404, 'the image is still there after a forced remove');
      refused(await call(s, 'remove_image', { image: `${tag}:rm` }), /not present/, /pull_image/);
    });

    test('import: a root file system tar and a docker save archive from under the allowlist; one outside refused', T, async () => {
      const rootfs = path.join(allowed, `rootfs-${key}.tar`);
      fs.copyFileSync(path.join(ENGINES_DIR, 'cm-test.tar'), rootfs);
      const a = ok(await call(s, 'pull_image', { image: `${tag}:imported`, import: rootfs }, { timeout: 240000 }));
      const eng = await imageOf(sock, `${tag}:imported`);
      assert.equal(eng.status, 200, 'the engine has no imported image');
      assert.equal(a.id.replace(/^sha256:/, ''), eng.body.Id.replace(/^sha256:/, ''));
      assert.equal((await runIn(`${tag}:imported`, 'echo imported-ok')).stdout, 'imported-ok\n');

      // the engine's own `docker save` of it, loaded back under another name
      const saved = path.join(allowed, `saved-${key}.tar`);
      assert.equal(await engineToFile(sock, `/images/${encodeURIComponent(`${tag}:imported`)}/get`, saved), 200);
      const b = ok(await call(s, 'pull_image', { image: `${tag}:loaded`, import: saved }, { timeout: 240000 }));
      assert.equal((await imageOf(sock, `${tag}:loaded`)).status, 200, 'the loaded archive has no name');
      assert.equal(b.id, a.id);

      fs.copyFileSync(rootfs, path.join(outside, 'rootfs.tar'));
      refused(await call(s, 'pull_image', { image: `${tag}:outside`, import: path.join(outside, 'rootfs.tar') }),
        /CONTAINER_MCP_ALLOWED_MOUNTS/);
      assert.equal((await imageOf(sock, `${tag}:outside`)).status, 404);
    });

    // dexec's watch (cm_exec_watch) on the engine's exec: output as it is
    // read, so progress while it runs and the true end of a long output.
    test('dexec on the engine: progress notifications while it runs, gated by its output; the true tail', T, async () => {
      const c = ok(await call(s, 'run_container', { image: BASE, command: ['sleep', '600'] }));
      containers.push(c.id);
      const seen = [];
      let go;
      // the command waits for a file only a second call makes, once a
      // notification has counted its first output (its timeout only ends a
      // broken run sooner)
      const r = ok(await s.client.callTool({ name: 'dexec', arguments: {
        container: c.id, command: 'printf abc; while [ ! -e /go ]; do sleep 0.05; done; echo done', timeout_sec: 30 } },
      undefined, {
        onprogress: (n) => {
          seen.push(n);
          if (!go && / 3 bytes of output/.test(n.message)) {
            go = s.client.callTool({ name: 'dexec', arguments: { container: c.id, command: 'touch /go' } });
          }
        },
        resetTimeoutOnProgress: true,
        timeout: 120000,
      }));
      assert.equal(r.timed_out, false, `no notification counted the first output: ${JSON.stringify(seen)}`);
      ok(await go);
      assert.equal(r.preview, 'abcdone\n');
      for (let i = 1; i < seen.length; i++) assert.ok(seen[i].progress > seen[i - 1].progress, 'progress must grow');

      // more than the run log keeps (CONTAINER_MCP_RUNLOG_MAX_BYTES): the
      // preview still ends where the output ended
      const big = ok(await s.client.callTool({ name: 'dexec', arguments: { container: c.id, command: 'seq 1 200000' } },
        undefined, { timeout: 120000 }));
      assert.match(big.preview, /\n199999\n200000\n$/);
      assert.match(big.preview, /^1\n2\n3\n/);
      const total = Array.from({ length: 200000 }, (_, i) => String(i + 1).length + 1).reduce((a, b) => a + b, 0);
      const shown = Buffer.byteLength(big.preview.replace(/\n\[\.\.\. \d+ bytes left out \.\.\.\]\n/, ''));
      assert.equal(big.truncated_bytes, total - shown);
      assert.equal(big.runlog_cut, true);
    });

    test('prune: an unused untagged image goes, and the bytes reclaimed are reported', T, async () => {
      const dir = context(`prune-${key}`, {
        Dockerfile: `FROM ${BASE}\nRUN echo ${process.pid}-${Date.now()} > /unique && head -c 300000 /dev/zero > /blob\n`,
      });
      const r = ok(await call(s, 'build_image', { context: dir }, { timeout: 240000 }));
      assert.equal((await imageOf(sock, r.id)).status, 200);
      const p = ok(await call(s, 'prune_images', {}));
      assert.ok(p.images_removed >= 1, JSON.stringify(p));
      assert.ok(p.reclaimed_bytes >= 300000, JSON.stringify(p));
      assert.equal((await imageOf(sock, r.id)).status, 404, 'the pruned image is still there');
      assert.equal((await imageOf(sock, BASE)).status, 200, 'prune without all took a named image');
    });

    test('every image tool gave a result, checked against its outputSchema', () => {
      assert.deepEqual(IMAGE_TOOLS.filter((n) => !s.checked.has(n)), []);
    });
  });
}

// The engine over TCP with TLS (issue 12): tests/engines/start.sh gives
// dockerd a --tlsverify listener on loopback with certificates it made.
const tlsSkip = ENGINES.DOCKER_TLS_HOST ? false
  : ENGINES.MISSING || ENGINES.DOCKER_SKIP || 'tests/engines/start.sh gave dockerd no TLS listener (openssl missing?)';
if (tlsSkip && process.env.CM_ENGINES_REQUIRED === '1') {
  test('the TLS listener of the Docker Engine is up', () => assert.fail(tlsSkip));
} else {
  describe('the Docker Engine over TCP with TLS', { skip: tlsSkip }, () => {
    test('DOCKER_HOST=tcp:// with DOCKER_TLS_VERIFY and DOCKER_CERT_PATH runs a container; a wrong CA is refused, saying so', T, async () => {
      const certs = ENGINES.DOCKER_TLS_CERTS;
      const s = await open(ENGINES.DOCKER_TLS_HOST, { DOCKER_TLS_VERIFY: '1', DOCKER_CERT_PATH: certs });
      try {
        const st = ok(await call(s, 'system_status', {})).backends.find((b) => b.name === 'docker');
        assert.equal(st.available, true, st.reason);
        assert.equal(st.details.tls, true);
        assert.equal(st.details.host, ENGINES.DOCKER_TLS_HOST);
        const r = ok(await call(s, 'run_container', { image: BASE, wait: true, command: ['sh', '-c', 'echo over-tls'] }));
        assert.equal(r.stdout, 'over-tls\n');
        assert.ok(ok(await call(s, 'list_images', {})).images.some((i) => i.names.some((n) => n.endsWith(BASE))));
      } finally {
        await s.close().finally(() => s.kill());
      }

      // the right client certificate, but a CA that did not sign the engine's
      const wrong = path.join(outside, 'wrong-ca');
      fs.mkdirSync(wrong, { recursive: true });
      execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=not-the-ca',
        '-keyout', path.join(wrong, 'ca-key.pem'), '-out', path.join(wrong, 'ca.pem')], { stdio: 'ignore' });
      for (const f of ['cert.pem', 'key.pem']) fs.copyFileSync(path.join(certs, f), path.join(wrong, f));
      const w = await open(ENGINES.DOCKER_TLS_HOST, { DOCKER_TLS_VERIFY: '1', DOCKER_CERT_PATH: wrong });
      try {
        refused(await call(w, 'run_container', { image: BASE, wait: true, command: ['true'] }),
          /TLS with the engine at tcp:\/\/127\.0\.0\.1:\d+ failed/, /ca\.pem/);
        refused(await call(w, 'list_images', {}), /TLS with the engine/);
        // and the server goes on serving
        assert.ok(ok(await call(w, 'system_status', {})).backends.length >= 1);
      } finally {
        await w.close().finally(() => w.kill());
      }
    });
  });
}
