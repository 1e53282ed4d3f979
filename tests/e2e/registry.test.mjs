// The registry client through `container-mcp fetch-image REF DIR`: against
// real registries (tests/registry/start.sh: Debian's docker-registry,
// anonymous, htpasswd and token auth, filled from local files) and against
// a hostile registry written here with node's http module.  Every layout the
// client writes is checked by re-hashing every blob; every refusal is
// checked to have published nothing.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { spawn, spawnSync } from 'node:child_process';
import os from 'node:os';
import { BIN, envWith, eventually, listenLoopback, readEnvFile, runCli, tmpDir } from './lib.mjs';

const T = { timeout: 180000 };
const DIR = process.env.CM_REGISTRY_DIR || '/tmp/cm-registry';

function registryEnv() {
  const env = readEnvFile(DIR, `tests/registry/start.sh has not run (no ${DIR}/env); run tests/registry/start.sh ${DIR} as root`);
  env.REGISTRY_SKIP = env.MISSING || (env.REGISTRY ? undefined : `${DIR}/env names no registry`);
  return env;
}
const REG = registryEnv();

const scratch = tmpDir('cmcp-registry-');
const state = path.join(scratch, 'state');
const emptyDockerConfig = path.join(scratch, 'docker-empty');
fs.mkdirSync(emptyDockerConfig);
after(() => fs.rmSync(scratch, { recursive: true, force: true }));

let n = 0;
const newDir = () => path.join(scratch, `layout-${++n}`);

// fetch-image with no credentials but those given, and a private state dir.
function fetch(ref, dir, { args = [], env = {}, timeout = 120000 } = {}) {
  return runCli(['fetch-image', ref, dir, ...args], {
    env: {
      CONTAINER_MCP_STATE_DIR: state,
      DOCKER_CONFIG: emptyDockerConfig,
      CONTAINER_MCP_REGISTRY_AUTH: undefined,
      CONTAINER_MCP_IMAGE_MAX_SIZE: undefined,
      ...env,
    },
    timeout,
  });
}

const sha256 = (buf) => 'sha256:' + crypto.createHash('sha256').update(buf).digest('hex');
const blobPath = (dir, digest) => path.join(dir, 'blobs', 'sha256', digest.slice(7));
const readJson = (file) => JSON.parse(fs.readFileSync(file, 'utf8'));
const temps = (dir) => {
  try {
    return fs.readdirSync(path.join(dir, 'blobs', 'sha256')).filter((f) => f.startsWith('.tmp-'));
  } catch {
    return [];
  }
};

// A whole layout: index.json names one manifest with the reference; the
// manifest, its config and every layer are there and hash to their names
// at their sizes; no temporary file is left.  Returns the parsed parts.
function checkLayout(dir, { ref, digest }) {
  const index = readJson(path.join(dir, 'index.json'));
  assert.deepEqual(readJson(path.join(dir, 'oci-layout')), { imageLayoutVersion: '1.0.0' });
  assert.equal(index.manifests.length, 1);
  const top = index.manifests[0];
  assert.equal(top.digest, digest, 'stdout names the manifest index.json names');
  assert.equal(top.annotations['org.opencontainers.image.ref.name'], ref);
  const mbuf = fs.readFileSync(blobPath(dir, top.digest));
  assert.equal(sha256(mbuf), top.digest);
  assert.equal(mbuf.length, top.size);
  const manifest = JSON.parse(mbuf);
  for (const d of [manifest.config, ...manifest.layers]) {
    const buf = fs.readFileSync(blobPath(dir, d.digest));
    assert.equal(sha256(buf), d.digest, `blob ${d.digest} hashes to its name`);
    assert.equal(buf.length, d.size, `blob ${d.digest} has its descriptor's size`);
  }
  for (const f of fs.readdirSync(path.join(dir, 'blobs', 'sha256')))
    assert.equal(sha256(fs.readFileSync(path.join(dir, 'blobs', 'sha256', f))), 'sha256:' + f, `${f} is whole`);
  assert.deepEqual(temps(dir), []);
  const config = JSON.parse(fs.readFileSync(blobPath(dir, manifest.config.digest)));
  return { top, manifest, config };
}

// Nothing published: no index.json, no blob under `digests`, no temp file.
function checkNothing(dir, digests = []) {
  assert.equal(fs.existsSync(path.join(dir, 'index.json')), false, 'no index.json for a refused pull');
  for (const d of digests) assert.equal(fs.existsSync(blobPath(dir, d)), false, `no blob ${d} kept`);
  assert.deepEqual(temps(dir), [], 'no temporary file left');
}

const HOST_ARCH = { x64: 'amd64', arm64: 'arm64' }[process.arch] || process.arch;

// ------------------------------------------------------ real registries --

const needReal = REG.REGISTRY_SKIP && process.env.CM_REGISTRY_REQUIRED === '1';
if (needReal) test('the test registries are up (CM_REGISTRY_REQUIRED=1)', () => assert.fail(REG.REGISTRY_SKIP));

describe('fetch-image from docker-registry', { skip: needReal ? false : REG.REGISTRY_SKIP, ...T }, () => {
  if (needReal) return;
  const R = REG.REGISTRY;

  for (const [name, mediaType, layerType] of [
    ['busybox', 'application/vnd.oci.image.manifest.v1+json', /tar\+gzip$/],
    ['busybox:v2s2', 'application/vnd.docker.distribution.manifest.v2+json', /diff\.tar\.gzip$/],
    ['zstd', 'application/vnd.oci.image.manifest.v1+json', /tar\+zstd$/],
    ['python', 'application/vnd.oci.image.manifest.v1+json', /tar\+gzip$/],
    ['config', 'application/vnd.oci.image.manifest.v1+json', /tar\+gzip$/],
  ]) {
    test(`${name}: every blob verified, index.json names it`, T, async () => {
      const dir = newDir();
      const r = await fetch(`${R}/${name}`, dir);
      assert.equal(r.code, 0, r.stderr);
      const ref = `${R}/${name.includes(':') ? name : name + ':latest'}`;
      const { top, manifest } = checkLayout(dir, { ref, digest: r.stdout.trim() });
      assert.equal(top.mediaType, mediaType);
      assert.equal(manifest.mediaType, mediaType);
      for (const l of manifest.layers) assert.match(l.mediaType, layerType);
      assert.match(r.stderr, /\d+\/\d+: \d+\/\d+ bytes/, 'progress per layer on stderr');
    });
  }

  test('python: the pulled layers make a rootfs where python3 computes 499500', T, async (t) => {
    if (process.getuid() !== 0) return t.skip('needs root to chroot into the unpacked layers');
    const dir = newDir();
    const r = await fetch(`${R}/python`, dir);
    assert.equal(r.code, 0, r.stderr);
    const { manifest } = checkLayout(dir, { ref: `${R}/python:latest`, digest: r.stdout.trim() });
    const root = path.join(scratch, 'python-root');
    fs.mkdirSync(root);
    for (const l of manifest.layers) {
      const x = spawnSync('tar', ['-xzf', blobPath(dir, l.digest), '-C', root]);
      assert.equal(x.status, 0, String(x.stderr));
    }
    const p = spawnSync('chroot', [root, '/usr/bin/python3', '-c', 'print(sum(range(1000)))'], { encoding: 'utf8' });
    assert.equal(p.stdout.trim(), '499500', p.stderr);
  });

  test('config: the image config carries Env, WorkingDir, User, Entrypoint, Cmd, ExposedPorts', T, async () => {
    const dir = newDir();
    const r = await fetch(`${R}/config`, dir);
    assert.equal(r.code, 0, r.stderr);
    const { config } = checkLayout(dir, { ref: `${R}/config:latest`, digest: r.stdout.trim() });
    assert.equal(config.config.User, 'app');
    assert.equal(config.config.WorkingDir, '/home/app');
    assert.ok(config.config.Env.includes('GREETING=hello from config'));
    assert.deepEqual(config.config.Entrypoint, ['/bin/sh', '-c']);
    assert.deepEqual(Object.keys(config.config.ExposedPorts), ['8080/tcp']);
  });

  test('multi: the host platform by default, arm64 when asked, a missing one refused', T, async () => {
    const host = newDir();
    let r = await fetch(`${R}/multi`, host);
    assert.equal(r.code, 0, r.stderr);
    let { config } = checkLayout(host, { ref: `${R}/multi:latest`, digest: r.stdout.trim() });
    assert.equal(config.architecture, HOST_ARCH);

    const arm = newDir();
    r = await fetch(`${R}/multi`, arm, { args: ['--platform', 'linux/arm64/v8'] });
    assert.equal(r.code, 0, r.stderr);
    ({ config } = checkLayout(arm, { ref: `${R}/multi:latest`, digest: r.stdout.trim() }));
    assert.equal(config.architecture, 'arm64');

    const none = newDir();
    r = await fetch(`${R}/multi`, none, { args: ['--platform', 'linux/s390x'] });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /no linux\/s390x variant; it has linux\/amd64, linux\/arm64\/v8/);
    checkNothing(none);
  });

  test('a pinned digest is fetched; a wrong one is refused', T, async () => {
    const first = newDir();
    let r = await fetch(`${R}/busybox`, first);
    assert.equal(r.code, 0, r.stderr);
    const digest = r.stdout.trim();
    const pinned = newDir();
    r = await fetch(`${R}/busybox@${digest}`, pinned);
    assert.equal(r.code, 0, r.stderr);
    checkLayout(pinned, { ref: `${R}/busybox@${digest}`, digest });
    const wrong = newDir();
    r = await fetch(`${R}/busybox@sha256:${'0'.repeat(64)}`, wrong);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /no manifest/);
    checkNothing(wrong);
  });

  test('a second fetch into the same layout downloads nothing again', T, async () => {
    const dir = newDir();
    let r = await fetch(`${R}/python`, dir);
    assert.equal(r.code, 0, r.stderr);
    const before = fs.readdirSync(path.join(dir, 'blobs', 'sha256')).map((f) => [f, fs.statSync(blobPath(dir, 'sha256:' + f)).ino]);
    r = await fetch(`${R}/python`, dir);
    assert.equal(r.code, 0, r.stderr);
    const afterIno = before.map(([f]) => [f, fs.statSync(blobPath(dir, 'sha256:' + f)).ino]);
    assert.deepEqual(afterIno, before, 'the blobs are the same files, not rewritten');
  });

  test('the size cap (CONTAINER_MCP_IMAGE_MAX_SIZE) refuses before a layer is fetched', T, async () => {
    const dir = newDir();
    const r = await fetch(`${R}/busybox`, dir, { env: { CONTAINER_MCP_IMAGE_MAX_SIZE: '100k' } });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /is \d+ bytes, over the 100k per layer and per image/);
    assert.match(r.stderr, /CONTAINER_MCP_IMAGE_MAX_SIZE/);
    checkNothing(dir);
    assert.deepEqual(fs.readdirSync(path.join(dir, 'blobs', 'sha256')), [], 'no blob fetched at all');
    const bad = await fetch(`${R}/busybox`, newDir(), { env: { CONTAINER_MCP_IMAGE_MAX_SIZE: 'lots' } });
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /CONTAINER_MCP_IMAGE_MAX_SIZE=lots: expected a size/);
  });

  test('CONTAINER_MCP_REGISTRY_MIRRORS: Docker Hub names come from the first mirror that has them', T, async () => {
    const dir = newDir();
    const r = await fetch('busybox', dir, { env: { CONTAINER_MCP_REGISTRY_MIRRORS: `http://127.0.0.1:1/,http://${R}` } });
    assert.equal(r.code, 0, r.stderr);
    checkLayout(dir, { ref: 'docker.io/library/busybox:latest', digest: r.stdout.trim() });
  });

  for (const [kind, key] of [['basic', 'REGISTRY_BASIC'], ['token', 'REGISTRY_TOKEN']]) {
    test(`${kind} auth: right credentials pull, wrong or none are refused saying so`, T, async () => {
      const host = REG[key];
      const good = newDir();
      let r = await fetch(`${host}/busybox`, good, {
        env: { CONTAINER_MCP_REGISTRY_AUTH: `other:1=a:b,${host}=${REG.REGISTRY_USER}:${REG.REGISTRY_PASSWORD}` },
      });
      assert.equal(r.code, 0, r.stderr);
      checkLayout(good, { ref: `${host}/busybox:latest`, digest: r.stdout.trim() });

      const wrong = newDir();
      r = await fetch(`${host}/busybox`, wrong, { env: { CONTAINER_MCP_REGISTRY_AUTH: `${host}=${REG.REGISTRY_USER}:nope` } });
      assert.equal(r.code, 1);
      assert.match(r.stderr, /refused the credentials for .* from CONTAINER_MCP_REGISTRY_AUTH/);
      checkNothing(wrong);

      const none = newDir();
      r = await fetch(`${host}/busybox`, none);
      assert.equal(r.code, 1);
      assert.match(r.stderr, /wants credentials .* CONTAINER_MCP_REGISTRY_AUTH=/);
      checkNothing(none);

      // ~/.docker/config.json's auths, base64 user:password
      const dc = path.join(scratch, `docker-${kind}`);
      fs.mkdirSync(dc);
      const auth = Buffer.from(`${REG.REGISTRY_USER}:${REG.REGISTRY_PASSWORD}`).toString('base64');
      fs.writeFileSync(path.join(dc, 'config.json'), JSON.stringify({ auths: { [`http://${host}`]: { auth } } }));
      const fromFile = newDir();
      r = await fetch(`${host}/busybox`, fromFile, { env: { DOCKER_CONFIG: dc } });
      assert.equal(r.code, 0, r.stderr);
      fs.writeFileSync(path.join(dc, 'config.json'), JSON.stringify({ auths: { [host]: { username: REG.REGISTRY_USER, password: 'x' } } }));
      r = await fetch(`${host}/busybox`, newDir(), { env: { DOCKER_CONFIG: dc } });
      assert.equal(r.code, 1);
      assert.match(r.stderr, new RegExp(`refused the credentials .* from ${dc.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}/config.json`));
    });
  }
});

// ------------------------------------------------------ hostile registry --

// An image made up here: a config and two layers of random bytes (the client
// does not unpack; the store does).
function makeImage({ layers = [crypto.randomBytes(300000), crypto.randomBytes(200000)], arch = HOST_ARCH } = {}) {
  const config = Buffer.from(JSON.stringify({ architecture: arch, os: 'linux', config: {}, rootfs: { type: 'layers', diff_ids: [] } }));
  const desc = (buf, mediaType) => ({ mediaType, digest: sha256(buf), size: buf.length });
  const manifest = Buffer.from(JSON.stringify({
    schemaVersion: 2,
    mediaType: 'application/vnd.oci.image.manifest.v1+json',
    config: desc(config, 'application/vnd.oci.image.config.v1+json'),
    layers: layers.map((l) => desc(l, 'application/vnd.oci.image.layer.v1.tar+gzip')),
  }));
  const blobs = new Map([[sha256(config), config], ...layers.map((l) => [sha256(l), l])]);
  return { config, layers, manifest, digest: sha256(manifest), blobs };
}

// A registry that serves `img` by the rules in `hooks` (per request):
// hooks.manifest(req, res) / hooks.blob(digest, req, res) return true when
// they answered.  Counts requests per path.
async function hostile(img, hooks = {}) {
  const hits = new Map();
  const server = http.createServer((req, res) => {
    hits.set(req.url, (hits.get(req.url) || 0) + 1);
    const m = /^\/v2\/([^]+?)\/(manifests|blobs)\/([^/]+)$/.exec(req.url);
    if (req.url === '/v2/') return res.end('{}');
    if (!m) return res.writeHead(404).end();
    if (m[2] === 'manifests') {
      if (hooks.manifest && hooks.manifest(req, res)) return;
      res.writeHead(200, { 'Content-Type': img.manifestType || 'application/vnd.oci.image.manifest.v1+json', 'Docker-Content-Digest': img.digest });
      return res.end(img.manifest);
    }
    if (hooks.blob && hooks.blob(m[3], req, res)) return;
    const b = img.blobs.get(m[3]);
    if (!b) return res.writeHead(404).end();
    res.writeHead(200, { 'Content-Length': b.length });
    res.end(b);
  });
  return { ...(await listenLoopback(server)), hits };
}

describe('fetch-image against a hostile registry', T, () => {
  let srv;
  after(() => srv && srv.close());
  const use = async (img, hooks) => {
    if (srv) await srv.close();
    srv = await hostile(img, hooks);
    return srv.host;
  };

  test('an honest one works (the baseline the others break)', T, async () => {
    const img = makeImage();
    const host = await use(img);
    const dir = newDir();
    const r = await fetch(`${host}/x`, dir);
    assert.equal(r.code, 0, r.stderr);
    checkLayout(dir, { ref: `${host}/x:latest`, digest: img.digest });
  });

  test('a manifest that does not hash to the digest asked for is refused', T, async () => {
    const img = makeImage();
    const host = await use(img);
    const dir = newDir();
    const other = 'sha256:' + '1'.repeat(64);
    const r = await fetch(`${host}/x@${other}`, dir);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /hashes to sha256:[0-9a-f]{64}, not sha256:1{64}; refused/);
    checkNothing(dir, [...img.blobs.keys(), img.digest]);
  });

  test('a manifest whose Docker-Content-Digest lies is refused', T, async () => {
    const img = makeImage();
    const host = await use(img, {
      manifest: (req, res) => {
        res.writeHead(200, { 'Content-Type': 'application/vnd.oci.image.manifest.v1+json', 'Docker-Content-Digest': 'sha256:' + '2'.repeat(64) });
        res.end(img.manifest);
        return true;
      },
    });
    const dir = newDir();
    const r = await fetch(`${host}/x`, dir);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /but the registry says sha256:2{64}; refused/);
    checkNothing(dir, [...img.blobs.keys()]);
  });

  const layer0 = (img) => sha256(img.layers[0]);

  test('a truncated blob is refused and not kept', T, async () => {
    const img = makeImage();
    const host = await use(img, {
      blob: (d, req, res) => {
        if (d !== layer0(img)) return false;
        const half = img.layers[0].subarray(0, 1000);
        res.writeHead(200, { 'Content-Length': half.length });
        res.end(half);
        return true;
      },
    });
    const dir = newDir();
    const r = await fetch(`${host}/x`, dir);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /sent 1000 bytes of blob sha256:[0-9a-f]{64} where its manifest says 300000 \(a truncated blob\)/);
    checkNothing(dir, [layer0(img), img.digest]);
  });

  test('a blob longer than its descriptor is cut off and refused', T, async () => {
    const img = makeImage();
    const host = await use(img, {
      blob: (d, req, res) => {
        if (d !== layer0(img)) return false;
        res.writeHead(200); // no length: it just keeps coming
        res.end(Buffer.concat([img.layers[0], crypto.randomBytes(4 << 20)]));
        return true;
      },
    });
    const dir = newDir();
    const r = await fetch(`${host}/x`, dir);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /sent more of blob sha256:[0-9a-f]{64} than the 300000 bytes its manifest says/);
    checkNothing(dir, [layer0(img), img.digest]);
  });

  test('a blob whose bytes do not hash to its digest is refused', T, async () => {
    const img = makeImage();
    const host = await use(img, {
      blob: (d, req, res) => {
        if (d !== layer0(img)) return false;
        const forged = crypto.randomBytes(img.layers[0].length);
        res.writeHead(200, { 'Content-Length': forged.length });
        res.end(forged);
        return true;
      },
    });
    const dir = newDir();
    const r = await fetch(`${host}/x`, dir);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /does not hash to its digest; refused/);
    checkNothing(dir, [layer0(img), img.digest]);
  });

  test('an index with only another platform is refused, naming what there is', T, async () => {
    const img = makeImage({ arch: 's390x' });
    const index = Buffer.from(JSON.stringify({
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.index.v1+json',
      manifests: [{ mediaType: 'application/vnd.oci.image.manifest.v1+json', digest: img.digest, size: img.manifest.length, platform: { os: 'linux', architecture: 's390x' } }],
    }));
    const host = await use({ ...img, manifest: index, digest: sha256(index), manifestType: 'application/vnd.oci.image.index.v1+json' });
    const dir = newDir();
    const r = await fetch(`${host}/x`, dir);
    assert.equal(r.code, 1);
    assert.match(r.stderr, new RegExp(`has no linux/${HOST_ARCH}(/v8)? variant; it has linux/s390x`));
    checkNothing(dir, [...img.blobs.keys()]);
  });

  test('a registry that never answers fails within the configured timeout', T, async () => {
    const img = makeImage();
    const host = await use(img, { manifest: () => true /* accepts, then silence */ });
    const dir = newDir();
    const r = await fetch(`${host}/x`, dir, { args: ['--timeout', '2'], timeout: 90000 });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /did not answer .* within 2 s/);
    checkNothing(dir);
  });

  test('a blob stalled mid-way fails within the configured timeout', T, async () => {
    const img = makeImage();
    const host = await use(img, {
      blob: (d, req, res) => {
        if (d !== layer0(img)) return false;
        res.writeHead(200, { 'Content-Length': img.layers[0].length });
        res.write(img.layers[0].subarray(0, 5000)); // and never the rest
        return true;
      },
    });
    const dir = newDir();
    const r = await fetch(`${host}/x`, dir, { args: ['--timeout', '2'], timeout: 90000 });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /did not answer .* within 2 s/);
    checkNothing(dir, [layer0(img)]);
  });

  test('a redirect to file:// is not followed', T, async () => {
    const img = makeImage();
    const host = await use(img, {
      blob: (d, req, res) => {
        if (d !== layer0(img)) return false;
        res.writeHead(302, { Location: 'file:///etc/passwd' });
        res.end();
        return true;
      },
    });
    const dir = newDir();
    const r = await fetch(`${host}/x`, dir);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /redirected .* to a scheme other than http\(s\); refused/);
    checkNothing(dir, [layer0(img)]);
  });

  test('a redirect to storage on another host is followed, without our credentials', T, async () => {
    const img = makeImage();
    let seenAuth = 'unset';
    const storage = http.createServer((req, res) => {
      seenAuth = req.headers.authorization || null;
      const b = img.blobs.get(req.url.slice(1));
      res.writeHead(200, { 'Content-Length': b.length });
      res.end(b);
    });
    await new Promise((r) => storage.listen(0, '127.0.0.2', r));
    try {
      const host = await use(img, {
        blob: (d, req, res) => {
          if (d !== layer0(img)) return false;
          res.writeHead(307, { Location: `http://127.0.0.2:${storage.address().port}/${d}` });
          res.end();
          return true;
        },
      });
      const dir = newDir();
      const r = await fetch(`${host}/x`, dir, { env: { CONTAINER_MCP_REGISTRY_AUTH: `${host}=u:secret` } });
      assert.equal(r.code, 0, r.stderr);
      checkLayout(dir, { ref: `${host}/x:latest`, digest: img.digest });
      assert.equal(seenAuth, null, 'no Authorization header reached the storage host');
    } finally {
      storage.closeAllConnections();
      await new Promise((r) => storage.close(r));
    }
  });

  test('kill -9 mid-fetch, then fetch again: it completes, reusing the whole blobs, nothing half-published', T, async () => {
    const img = makeImage();
    const [l0, l1] = img.layers.map(sha256);
    let stall = true;
    const host = await use(img, {
      blob: (d, req, res) => {
        if (d !== l1 || !stall) return false;
        res.writeHead(200, { 'Content-Length': img.layers[1].length });
        res.write(img.layers[1].subarray(0, 100000)); // half, then hold the line
        return true;
      },
    });
    const dir = newDir();
    const proc = spawn(BIN, ['fetch-image', `${host}/x`, dir], {
      env: envWith({ CONTAINER_MCP_STATE_DIR: state, DOCKER_CONFIG: emptyDockerConfig }),
      stdio: 'ignore',
    });
    const exited = new Promise((r) => proc.once('exit', r));
    // layer 0 published, layer 1 half-written under its temporary name
    await eventually(() => fs.existsSync(blobPath(dir, l0)) && temps(dir).length > 0, 60000, 'a blob whole and one mid-way');
    proc.kill('SIGKILL');
    await exited;
    assert.equal(fs.existsSync(path.join(dir, 'index.json')), false);
    assert.equal(fs.existsSync(blobPath(dir, l1)), false, 'the half blob has no name');
    stall = false;
    const r = await fetch(`${host}/x`, dir);
    assert.equal(r.code, 0, r.stderr);
    checkLayout(dir, { ref: `${host}/x:latest`, digest: img.digest }); // also: the dead pull's temp file is gone
    assert.equal(srv.hits.get(`/v2/x/blobs/${l0}`), 1, 'the whole blob was not fetched again');
  });

  test('SIGTERM mid-fetch cancels: an error, and nothing half-published', T, async () => {
    const img = makeImage();
    const l1 = sha256(img.layers[1]);
    const host = await use(img, {
      blob: (d, req, res) => {
        if (d !== l1) return false;
        res.writeHead(200, { 'Content-Length': img.layers[1].length });
        res.write(img.layers[1].subarray(0, 100000)); // and hold
        return true;
      },
    });
    const dir = newDir();
    const proc = spawn(BIN, ['fetch-image', `${host}/x`, dir], {
      env: envWith({ CONTAINER_MCP_STATE_DIR: state, DOCKER_CONFIG: emptyDockerConfig }),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    proc.stderr.on('data', (b) => (stderr += b));
    const exited = new Promise((r) => proc.once('exit', (code) => r(code)));
    await eventually(() => temps(dir).length > 0, 60000, 'a blob mid-way');
    proc.kill('SIGTERM');
    assert.equal(await exited, 1, stderr);
    assert.match(stderr, /cancelled while fetching/);
    checkNothing(dir, [l1]);
  });

  test('a blob already in the layout but corrupt is fetched again', T, async () => {
    const img = makeImage();
    const host = await use(img);
    const dir = newDir();
    fs.mkdirSync(path.join(dir, 'blobs', 'sha256'), { recursive: true });
    const l0 = sha256(img.layers[0]);
    fs.writeFileSync(blobPath(dir, l0), crypto.randomBytes(img.layers[0].length));
    const r = await fetch(`${host}/x`, dir);
    assert.equal(r.code, 0, r.stderr);
    checkLayout(dir, { ref: `${host}/x:latest`, digest: img.digest });
  });

  test('bad arguments get a usage error, not a fetch', T, async () => {
    for (const [args, re, env = {}] of [
      [['fetch-image'], /expected an image reference and a directory/],
      [['fetch-image', 'x/UPPER', newDir()], /must be lower case|expected \[host/],
      [['fetch-image', '--evil', 'x', 'y'], /unknown option "--evil"/],
      [['fetch-image', 'x', newDir(), '--timeout', '0'], /--timeout takes seconds/],
      [['fetch-image', '127.0.0.1:1/x', newDir(), '--platform', '--evil'], /platform "--evil": expected os\/arch/],
      [['fetch-image', '127.0.0.1:1/x', newDir(), '--platform', 'linux/../x'], /expected os\/arch/],
      [['fetch-image', 'busybox', newDir()], /"file:\/\/\/etc" is not an http:\/\/ or https:\/\/ URL/, { CONTAINER_MCP_REGISTRY_MIRRORS: 'file:///etc' }],
    ]) {
      const r = await runCli(args, { env: { CONTAINER_MCP_STATE_DIR: state, ...env } });
      assert.notEqual(r.code, 0);
      assert.match(r.stderr, re);
    }
  });
});
