// Registry pulls on the native runtime (issue 13): pull_image and
// `container-mcp pull` fetch from real registries (tests/registry/start.sh:
// Debian's docker-registry, anonymous and token auth, images made from local
// files) into the image store, and run_container runs what was pulled: python3
// computes 499500, the image config's Env, WorkingDir, User and Entrypoint
// take effect.  A proxy in front of the registry holds a layer mid-way so a
// kill -9 lands mid-pull for certain; the next pull resumes.
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { BIN, envWith, eventually, listenLoopback, readEnvFile, runCli, stdioClient, tmpDir } from './lib.mjs';
import { alive, call, nativeBackend, ok, procsWith, refused } from './tools.mjs';

const T = { timeout: 240000 };
const DIR = process.env.CM_REGISTRY_DIR || '/tmp/cm-registry';
const REG = readEnvFile(DIR, `tests/registry/start.sh has not run (no ${DIR}/env); run tests/registry/start.sh ${DIR} as root`);
const R = REG.REGISTRY;
const state = tmpDir('cmcp-pull-state-');
const dockerConfig = tmpDir('cmcp-pull-docker-'); // no credentials but those a test gives
// The test registries are on loopback: an agent's pulls need them named.
const noCerts = tmpDir('cmcp-pull-certs-'); // an empty certs.d: the machine's /etc/containers/certs.d stays out
const ENV = { CONTAINER_MCP_STATE_DIR: state, DOCKER_CONFIG: dockerConfig, CONTAINER_MCP_REGISTRY_AUTH: undefined,
  CONTAINER_MCP_ALLOWED_REGISTRIES: R, CONTAINER_MCP_INSECURE_REGISTRIES: undefined,
  CONTAINER_MCP_REGISTRY_CERTS_D: noCerts };
const isRoot = process.getuid() === 0;
after(() => {
  for (const d of [state, dockerConfig, noCerts]) fs.rmSync(d, { recursive: true, force: true });
});

const open = (env = {}) => stdioClient({ args: ['serve'], env: { ...ENV, ...env } });
const cli = (args, env = {}) => runCli(args, { env: { ...ENV, ...env }, timeout: 180000 });
const pulls = () => {
  try {
    return fs.readdirSync(path.join(state, 'images', 'pulls')).filter((f) => !f.endsWith('.lock'));
  } catch {
    return [];
  }
};

let skipReason = R ? null : (REG.MISSING || `${DIR}/env names no REGISTRY`);
const required = process.env.CM_REGISTRY_REQUIRED === '1';
before(async () => {
  if (!skipReason) skipReason = (await nativeBackend(open)).reason;
});
const skipped = (t) => {
  if (!skipReason) return false;
  if (required && !skipReason.startsWith('native')) assert.fail(skipReason);
  t.skip(skipReason);
  return true;
};

// The processes the server started (any of its threads).
function childrenOf(pid) {
  const out = [];
  for (const t of fs.readdirSync(`/proc/${pid}/task`)) {
    try {
      out.push(...fs.readFileSync(`/proc/${pid}/task/${t}/children`, 'utf8').split(' ').filter(Boolean).map(Number));
    } catch {
      // the thread ended
    }
  }
  return out;
}

// A proxy to the registry that holds the blobs in `held` after their first
// 64 KiB (headers and part of the body sent, the rest kept back until
// release()) and counts the requests (`requests`) and each blob's (`hits`);
// everything else passes through.
async function holdingProxy(target) {
  const held = new Set();
  const hits = new Map();
  const pending = [];
  let requests = 0;
  const server = http.createServer((req, res) => {
    requests++;
    const m = /\/blobs\/(sha256:[0-9a-f]{64})$/.exec(req.url);
    if (m) hits.set(m[1], (hits.get(m[1]) || 0) + 1);
    const up = http.request({ host: target.split(':')[0], port: target.split(':')[1], path: req.url, method: req.method,
      headers: { ...req.headers, host: target } }, (ur) => {
      res.writeHead(ur.statusCode, ur.headers);
      if (!m || !held.has(m[1])) return ur.pipe(res);
      const p = { rest: [], ended: false, released: false, closed: false };
      pending.push(p);
      res.on('close', () => (p.closed = true));
      let sent = 0;
      ur.on('data', (b) => {
        if (p.released) return res.write(b);
        const n = Math.max(0, Math.min(b.length, 65536 - sent));
        if (n) res.write(b.subarray(0, n));
        sent += n;
        if (n < b.length) p.rest.push(b.subarray(n));
      });
      ur.on('end', () => {
        p.ended = true;
        if (p.released) res.end();
      });
      p.release = () => {
        p.released = true;
        for (const b of p.rest) res.write(b);
        if (p.ended) res.end();
      };
    });
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  return {
    ...(await listenLoopback(server)),
    held,
    hits,
    requests: () => requests,
    // held responses whose client has not hung up
    heldOpen: () => pending.filter((p) => !p.closed).length,
    // what is held goes on; later requests pass
    release: () => {
      held.clear();
      for (const p of pending.splice(0)) p.release();
    },
  };
}

// The layer digests of a test image, biggest last, from the registry's
// own manifest.
async function layersOf(repo) {
  const res = await fetch(`http://${R}/v2/${repo}/manifests/latest`, {
    headers: { Accept: 'application/vnd.oci.image.manifest.v1+json' },
  });
  assert.equal(res.status, 200);
  return (await res.json()).layers.sort((a, b) => a.size - b.size).map((l) => l.digest);
}

describe('pull on the native runtime', T, () => {
  test('pull_image then run_container: python3 in the pulled image computes 499500', T, async (t) => {
    if (skipped(t)) return;
    const s = await open();
    try {
      const seen = [];
      const img = ok(await call(s, 'pull_image', { image: `${R}/python` }, { onprogress: (p) => seen.push(p), timeout: 180000 }));
      assert.deepEqual(img.names, [`${R}/python:latest`]);
      assert.match(img.id, /^sha256:[0-9a-f]{64}$/);
      assert.ok(img.size > 1e6, `unpacked size ${img.size}`);
      assert.ok(seen.length >= 2, `progress notifications: ${JSON.stringify(seen)}`);
      for (let i = 1; i < seen.length; i++) assert.ok(seen[i].progress > seen[i - 1].progress, JSON.stringify(seen));

      const listed = ok(await call(s, 'list_images', {})).images.find((i) => i.names.includes(`${R}/python:latest`));
      assert.ok(listed, 'list_images shows the pulled image');
      assert.equal(listed.id, img.id);
      assert.deepEqual(pulls(), [], 'the pull left no layout behind');

      const out = ok(await call(s, 'run_container', {
        image: `${R}/python`, command: ['python3', '-c', 'print(sum(range(1000)))'], wait: true }));
      assert.equal(out.stdout, '499500\n', out.stderr);
      assert.equal(out.exitCode, 0);
    } finally {
      await s.close();
    }
  });

  test("the config image: its Env, WorkingDir, User and Entrypoint take effect; the run's own override", T, async (t) => {
    if (skipped(t)) return;
    const r = await cli(['pull', `${R}/config`]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, new RegExp(`pulled ${R.replace(/[.]/g, '\\.')}/config:latest`));
    const s = await open();
    try {
      // no command: Entrypoint (sh -c) with Cmd ("echo $GREETING; id -un; pwd")
      let out = ok(await call(s, 'run_container', { image: `${R}/config`, wait: true }));
      assert.equal(out.exitCode, 0, out.stderr);
      // the image's User (a rootless sandbox: through a nested user namespace)
      assert.equal(out.stdout, 'hello from config\napp\n/home/app\n');
      // a command replaces Cmd, the Entrypoint stays; env and workdir: the run's win
      out = ok(await call(s, 'run_container', { image: `${R}/config`, wait: true, command: ['echo $GREETING; pwd; cat hello.txt'],
        env: { GREETING: 'from the run' } }));
      assert.equal(out.stdout, 'from the run\n/home/app\nhello from the image\n', out.stderr);
      out = ok(await call(s, 'run_container', { image: `${R}/config`, wait: true, command: ['pwd'], workdir: '/tmp' }));
      assert.equal(out.stdout, '/tmp\n', out.stderr);
      // a kept container shows the image's ExposedPorts, as docker inspect does
      const { id } = ok(await call(s, 'run_container', { image: `${R}/config`, command: ['sleep 300'] }));
      try {
        const insp = ok(await call(s, 'inspect_container', { container: id }));
        assert.deepEqual(insp.exposed_ports, ['8080/tcp'], JSON.stringify(insp));
      } finally {
        ok(await call(s, 'remove_container', { container: id, force: true }));
      }

      // Having run it, the server keeps sandboxes of this image warm (as of
      // `host`): idle children of the server whose root is the image's.
      const warm = () => childrenOf(s.pid).filter((pid) => {
        try {
          return fs.readFileSync(`/proc/${pid}/root/home/app/hello.txt`, 'utf8') === 'hello from the image\n';
        } catch {
          return false;
        }
      });
      await eventually(() => warm().length > 0, 60000, 'a warm sandbox of the config image');
      const before = warm();
      // a run takes one: the image's config still applies there
      out = ok(await call(s, 'run_container', { image: `${R}/config`, wait: true, command: ['echo $GREETING; id -un; pwd'] }));
      assert.equal(out.stdout, 'hello from config\napp\n/home/app\n', out.stderr);
      out = ok(await call(s, 'run_container', { image: `${R}/config`, wait: true }));
      assert.equal(out.stdout, 'hello from config\napp\n/home/app\n', out.stderr);
      await eventually(() => before.some((pid) => !alive(pid)), 60000, 'a warm sandbox taken by a run');
      // removed, the image's warm sandboxes go too
      await eventually(() => warm().length > 0, 60000, 'the pool refilled');
      ok(await call(s, 'remove_image', { image: `${R}/config` }));
      await eventually(() => warm().length === 0, 60000, 'no warm sandbox of a removed image');
      refused(await call(s, 'run_container', { image: `${R}/config`, wait: true, command: ['true'] }), /pull_image/);
    } finally {
      await s.close();
    }
  });

  test('a zstd image and a multi-platform index pull and run; a platform the index lacks is refused', T, async (t) => {
    if (skipped(t)) return;
    const s = await open();
    try {
      for (const repo of ['zstd', 'multi']) {
        ok(await call(s, 'pull_image', { image: `${R}/${repo}` }, { timeout: 180000 }));
        const out = ok(await call(s, 'run_container', { image: `${R}/${repo}`, wait: true, command: ['/bin/busybox', 'echo', repo] }));
        assert.equal(out.stdout, `${repo}\n`, out.stderr);
      }
      refused(await call(s, 'pull_image', { image: `${R}/multi`, platform: 'linux/s390x' }), /no linux\/s390x variant/);
    } finally {
      await s.close();
    }
  });

  test('token auth: the right credentials pull, wrong ones are refused saying so', T, async (t) => {
    if (skipped(t)) return;
    if (!REG.REGISTRY_TOKEN) return t.skip(`${DIR}/env names no token registry`);
    let r = await cli(['pull', `${REG.REGISTRY_TOKEN}/busybox`],
      { CONTAINER_MCP_REGISTRY_AUTH: `${REG.REGISTRY_TOKEN}=${REG.REGISTRY_USER}:wrong` });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /credential|password|denied|unauthori/i);
    r = await cli(['image', 'list']);
    assert.doesNotMatch(r.stdout, new RegExp(REG.REGISTRY_TOKEN.replace(/[.]/g, '\\.')));
    r = await cli(['pull', `${REG.REGISTRY_TOKEN}/busybox`],
      { CONTAINER_MCP_REGISTRY_AUTH: `${REG.REGISTRY_TOKEN}=${REG.REGISTRY_USER}:${REG.REGISTRY_PASSWORD}` });
    assert.equal(r.code, 0, r.stderr);
    r = await cli(['image', 'list']);
    assert.match(r.stdout, new RegExp(`${REG.REGISTRY_TOKEN.replace(/[.]/g, '\\.')}/busybox:latest`));
  });

  test("Docker's credential helpers: credsStore and credHelpers run docker-credential-NAME get with the registry on stdin; a registry's own helper wins, one without the credentials leaves auths, a hung, missing or path-like helper is an error", T, async (t) => {
    if (skipped(t)) return;
    if (!REG.REGISTRY_BASIC) return t.skip(`${DIR}/env names no basic-auth registry`);
    const H = REG.REGISTRY_BASIC, bin = tmpDir('cmcp-helpers-'), hang = `6${process.pid}`;
    const helper = (name, body) => fs.writeFileSync(path.join(bin, `docker-credential-${name}`),
      `#!/bin/sh\nread -r host\nprintf '%s %s\\n' "$*" "$host" >>"${bin}/calls-${name}"\n${body}\n`, { mode: 0o755 });
    const answer = (secret) => `[ "$host" = "${H}" ] || { echo "credentials not found in native keychain"; exit 1; }\n` +
      `printf '{"ServerURL":"%s","Username":"${REG.REGISTRY_USER}","Secret":"${secret}"}' "$host"`;
    helper('cmgood', answer(REG.REGISTRY_PASSWORD));
    helper('cmwrong', answer('wrong'));
    helper('cmnone', 'echo "credentials not found in native keychain"; exit 1');
    helper('cmhang', `exec sleep ${hang}`);
    const withConfig = (config) => {
      const dir = tmpDir('cmcp-dockercfg-');
      fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify(config));
      return { DOCKER_CONFIG: dir, PATH: `${bin}:${process.env.PATH}`, CONTAINER_MCP_ALLOWED_REGISTRIES: H };
    };
    const pull = (config) => cli(['pull', `${H}/busybox`], withConfig(config));
    const auth = Buffer.from(`${REG.REGISTRY_USER}:${REG.REGISTRY_PASSWORD}`).toString('base64');
    try {
      // the store's helper, asked `get` with the registry on stdin; an agent's pull_image the same
      let r = await pull({ credsStore: 'cmgood' });
      assert.equal(r.code, 0, r.stderr);
      assert.equal(fs.readFileSync(path.join(bin, 'calls-cmgood'), 'utf8'), `get ${H}\n`);
      const s = await open(withConfig({ credsStore: 'cmgood' }));
      try {
        ok(await call(s, 'pull_image', { image: `${H}/busybox` }, { timeout: 180000 }));
      } finally {
        await s.close();
      }
      // a registry's own helper wins over the store's: its wrong secret is refused, naming it
      r = await pull({ credsStore: 'cmgood', credHelpers: { [H]: 'cmwrong' } });
      assert.equal(r.code, 1);
      assert.match(r.stderr, /refused the credentials .*docker-credential-cmwrong \(credHelpers/);
      // a helper without them: auths answers
      r = await pull({ credsStore: 'cmnone', auths: { [H]: { auth } } });
      assert.equal(r.code, 0, r.stderr);
      assert.match(fs.readFileSync(path.join(bin, 'calls-cmnone'), 'utf8'), new RegExp(`get ${H.replace(/[.]/g, '\\.')}`));
      // a helper that never answers: an error at its deadline, and nothing of it left
      const t0 = Date.now();
      r = await pull({ credsStore: 'cmhang' });
      assert.equal(r.code, 1);
      assert.match(r.stderr, /did not answer within 10 s/);
      assert.ok(Date.now() - t0 < 60000);
      assert.deepEqual(procsWith(hang), [], 'the hung helper is still running');
      // a name that is a path, and one not on PATH
      r = await pull({ credsStore: '../../bin/sh' });
      assert.equal(r.code, 1);
      assert.match(r.stderr, /is not a credential helper's name/);
      r = await pull({ credsStore: 'cm-not-installed' });
      assert.equal(r.code, 1);
      assert.match(r.stderr, /docker-credential-cm-not-installed is not on PATH/);
    } finally {
      fs.rmSync(bin, { recursive: true, force: true });
    }
  });

  test("a TLS registry of our own CA that wants client certificates: its certs.d entry pulls; none, a CA alone or another CA are refused saying what to add", T, async (t) => {
    if (skipped(t)) return;
    if (!REG.REGISTRY_TLS) return t.skip(`${DIR}/env names no tls registry`);
    const H = REG.REGISTRY_TLS, have = path.join(REG.REGISTRY_TLS_DIR, 'certs');
    const certsD = tmpDir('cmcp-certs-d-'), entry = path.join(certsD, H);
    const env = { CONTAINER_MCP_REGISTRY_CERTS_D: `/nonexistent:${certsD}`, CONTAINER_MCP_ALLOWED_REGISTRIES: H };
    const put = (files) => {
      fs.rmSync(entry, { recursive: true, force: true });
      fs.mkdirSync(entry);
      for (const [name, from] of Object.entries(files)) fs.copyFileSync(from, path.join(entry, name));
    };
    const listed = async () => (await cli(['image', 'list'])).stdout.includes(H);
    try {
      // no entry: a loopback registry is asked over https without checks
      // (it wants a client certificate), then over http; it answers that it speaks TLS
      let r = await cli(['pull', `${H}/busybox`], env);
      assert.equal(r.code, 1);
      assert.match(r.stderr, /speaks TLS, and https failed/);
      assert.match(r.stderr, /client certificate/);
      assert.match(r.stderr, new RegExp(`certs\\.d/${H.replace(/[.]/g, '\\.')}/ca\\.crt`));
      // the CA alone: the registry wants a client certificate
      put({ 'ca.crt': path.join(have, 'ca.crt') });
      r = await cli(['pull', `${H}/busybox`], env);
      assert.equal(r.code, 1);
      assert.match(r.stderr, /client certificate/);
      assert.ok(r.stderr.includes(entry), r.stderr);
      // a CA that did not sign the registry's certificate
      put({ 'ca.crt': path.join(REG.REGISTRY_TLS_DIR, 'other-ca.crt'), 'client.cert': path.join(have, 'client.cert'),
        'client.key': path.join(have, 'client.key') });
      r = await cli(['pull', `${H}/busybox`], env);
      assert.equal(r.code, 1);
      assert.match(r.stderr, /TLS with the registry https:/);
      assert.ok(r.stderr.includes(entry), r.stderr);
      // a key without its certificate is the operator's mistake, named
      put({ 'ca.crt': path.join(have, 'ca.crt'), 'client.key': path.join(have, 'client.key') });
      r = await cli(['pull', `${H}/busybox`], env);
      assert.equal(r.code, 1);
      assert.match(r.stderr, /client\.key has no client\.cert/);
      assert.equal(await listed(), false, 'a refused pull is listed');
      // the whole entry: an agent's pull_image fetches over TLS and the image runs
      put({ 'ca.crt': path.join(have, 'ca.crt'), 'client.cert': path.join(have, 'client.cert'),
        'client.key': path.join(have, 'client.key') });
      const s = await open(env);
      try {
        ok(await call(s, 'pull_image', { image: `${H}/busybox` }, { timeout: 180000 }));
        const run = ok(await call(s, 'run_container', { image: `${H}/busybox`, command: ['echo', 'over tls'], wait: true }));
        assert.equal(run.stdout, 'over tls\n');
      } finally {
        await s.close();
      }
      assert.equal(await listed(), true);
    } finally {
      fs.rmSync(certsD, { recursive: true, force: true });
    }
  });

  test('an insecure registry (loopback, or named in CONTAINER_MCP_INSECURE_REGISTRIES) is asked over https without certificate checks, then over http; one with a certs.d entry is checked', T, async (t) => {
    if (skipped(t)) return;
    if (!REG.REGISTRY_TLS_OPEN) return t.skip(`${DIR}/env names no tlsopen registry`);
    const H = REG.REGISTRY_TLS_OPEN;
    const certsD = tmpDir('cmcp-certs-d-'), entry = path.join(certsD, H);
    // stores of their own: the blobs come over the wire
    const own = tmpDir('cmcp-pull-insecure-'), own2 = tmpDir('cmcp-pull-insecure-');
    const env = { CONTAINER_MCP_ALLOWED_REGISTRIES: `${H},${R}`, CONTAINER_MCP_STATE_DIR: own };
    try {
      // the registry speaks only TLS, from a CA nothing here trusts: an
      // agent's pull and a run of what it pulled
      const s = await open(env);
      try {
        ok(await call(s, 'pull_image', { image: `${H}/busybox` }, { timeout: 180000 }));
        const run = ok(await call(s, 'run_container', { image: `${H}/busybox`, command: ['echo', 'unchecked tls'], wait: true }));
        assert.equal(run.stdout, 'unchecked tls\n');
        // a plain http registry on loopback: https fails, http pulls
        ok(await call(s, 'pull_image', { image: `${R}/busybox` }, { timeout: 180000 }));
      } finally {
        await s.close();
      }
      // with a certs.d entry the certificate is checked: another CA is refused
      fs.mkdirSync(entry);
      fs.copyFileSync(path.join(REG.REGISTRY_TLS_DIR, 'other-ca.crt'), path.join(entry, 'ca.crt'));
      const r = await cli(['pull', `${H}/busybox:latest`],
        { ...env, CONTAINER_MCP_STATE_DIR: own2, CONTAINER_MCP_REGISTRY_CERTS_D: certsD });
      assert.equal(r.code, 1);
      assert.match(r.stderr, /TLS with the registry https:/);
    } finally {
      for (const d of [certsD, own, own2]) fs.rmSync(d, { recursive: true, force: true });
    }
  });

  test("an agent's pull connects to no local address through a registry the operator did not name: not by its name's address, a redirect or a token realm", T, async (t) => {
    if (skipped(t)) return;
    if (!isRoot) return t.skip('needs root for a network namespace');
    if (!REG.REGISTRY_TLS_DIR) return t.skip(`${DIR}/env names no tls registry (its CA signs the test's)`);
    // A namespace of its own: 198.51.100.7 (a documentation address, not a
    // local one) on its loopback, two names in its /etc/hosts (ip netns exec
    // mounts /etc/netns/NS/hosts there), and ssrf-registry.mjs listening on
    // both addresses.
    const ns = `cm-ssrf-${process.pid}`, IP = '198.51.100.7', work = tmpDir('cmcp-ssrf-');
    const etc = `/etc/netns/${ns}`, ca = REG.REGISTRY_TLS_DIR;
    const sh = (cmd, ...args) => execFileSync(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let helper;
    try {
      sh('ip', 'netns', 'add', ns);
      sh('ip', '-n', ns, 'link', 'set', 'lo', 'up');
      sh('ip', '-n', ns, 'addr', 'add', `${IP}/32`, 'dev', 'lo');
      fs.mkdirSync(etc, { recursive: true });
      fs.writeFileSync(path.join(etc, 'hosts'), `127.0.0.1 local-registry.test\n${IP} public-registry.test other-host.test\n`);
      fs.writeFileSync(path.join(work, 'ext'), `subjectAltName=IP:${IP},DNS:public-registry.test\n`);
      sh('openssl', 'req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=public-registry.test', '-keyout',
        path.join(work, 'key.pem'), '-out', path.join(work, 'csr.pem'));
      sh('openssl', 'x509', '-req', '-in', path.join(work, 'csr.pem'), '-CA', path.join(ca, 'ca.crt'), '-CAkey',
        path.join(ca, 'ca.key'), '-CAcreateserial', '-CAserial', path.join(work, 'serial'), '-days', '2',
        '-extfile', path.join(work, 'ext'), '-out', path.join(work, 'cert.pem'));
      const certsD = path.join(work, 'certs.d');
      for (const h of ['public-registry.test:8443', 'local-registry.test:8443']) {
        fs.mkdirSync(path.join(certsD, h), { recursive: true });
        fs.copyFileSync(path.join(ca, 'ca.crt'), path.join(certsD, h, 'ca.crt'));
      }
      helper = spawn('ip', ['netns', 'exec', ns, process.execPath, new URL('./ssrf-registry.mjs', import.meta.url).pathname,
        IP, path.join(work, 'key.pem'), path.join(work, 'cert.pem')], { stdio: ['ignore', 'pipe', 'inherit'] });
      let out = '';
      helper.stdout.on('data', (d) => { out += d; });
      await eventually(() => out.includes('ready'), 20000, 'the hostile registry did not start');
      const conns = (port) => out.split('\n').filter((l) => l === `conn ${port}`).length;
      const ctx = path.join(work, 'ctx');
      fs.mkdirSync(ctx);
      fs.writeFileSync(path.join(ctx, 'Dockerfile'), 'FROM local-registry.test:8443/x\n');
      const env = { CONTAINER_MCP_REGISTRY_CERTS_D: certsD, CONTAINER_MCP_ALLOWED_REGISTRIES: undefined,
        CONTAINER_MCP_ALLOWED_MOUNTS: work };
      const wrap = ['ip', 'netns', 'exec', ns];

      let s = await stdioClient({ args: ['serve'], env: { ...ENV, ...env }, wrap });
      try {
        // a name that resolves to 127.0.0.1
        refused(await call(s, 'pull_image', { image: 'local-registry.test:8443/x' }),
          /local address 127\.0\.0\.1/, /CONTAINER_MCP_ALLOWED_REGISTRIES/);
        // blobs redirected to 127.0.0.1, and a token realm there
        refused(await call(s, 'pull_image', { image: 'public-registry.test:8443/redir' }), /local address 127\.0\.0\.1/);
        refused(await call(s, 'pull_image', { image: 'public-registry.test:8443/realm' }), /local address 127\.0\.0\.1/);
        // a build's base image is the same pull
        refused(await call(s, 'build_image', { context: ctx }, { timeout: 120000 }), /local address 127\.0\.0\.1/);
      } finally {
        await s.close();
      }
      assert.equal(conns(8443), 0, 'a connection reached 127.0.0.1:8443');
      assert.equal(conns(8080), 0, 'a connection reached 127.0.0.1:8080');

      // The operator's proxy at a local address is not refused: the pull
      // tunnels through it (its blob redirect, plain http without a proxy,
      // is still refused).
      s = await stdioClient({ args: ['serve'], env: { ...ENV, ...env, HTTPS_PROXY: 'http://127.0.0.1:3128' }, wrap });
      try {
        refused(await call(s, 'pull_image', { image: 'public-registry.test:8443/redir' }), /local address 127\.0\.0\.1/);
      } finally {
        await s.close();
      }
      assert.ok(out.includes('proxy public-registry.test:8443'), `the pull did not go through the proxy: ${out}`);
      assert.equal(conns(8080), 0, 'a connection reached 127.0.0.1:8080');

      // The same with the registry named by the operator: the redirect is
      // followed (what the guard stopped above), and the operator's own
      // command line is not guarded.
      s = await stdioClient({ args: ['serve'], env: { ...ENV, ...env, CONTAINER_MCP_ALLOWED_REGISTRIES: 'public-registry.test:8443' }, wrap });
      try {
        const r = await call(s, 'pull_image', { image: 'public-registry.test:8443/redir' });
        assert.equal(r.isError, true);
        assert.doesNotMatch(r.content[0].text, /local address/);
      } finally {
        await s.close();
      }
      await eventually(() => conns(8080) > 0, 10000, 'the named registry\'s redirect was not followed');
      spawnSync('ip', ['netns', 'exec', ns, BIN, 'pull', 'local-registry.test:8443/x'],
        { env: envWith({ ...ENV, ...env }), stdio: 'ignore', timeout: 60000 });
      await eventually(() => conns(8443) > 0, 10000, 'the operator\'s pull did not connect');

      // Neither loopback nor named insecure: its certificate is checked, so
      // without a certs.d entry it is refused; named in
      // CONTAINER_MCP_INSECURE_REGISTRIES, https without checks reaches it
      // (and the operator's pull follows its redirect).
      // A range holding its address names it the same way, as Docker's
      // insecure-registries.
      const pull = (ref, extra = {}) => spawnSync('ip', ['netns', 'exec', ns, BIN, 'pull', ref],
        { env: envWith({ ...ENV, ...env, CONTAINER_MCP_REGISTRY_CERTS_D: '', ...extra }), encoding: 'utf8', timeout: 60000 });
      for (const [host, insecure] of [['public-registry.test:8443', 'public-registry.test:8443'], [`${IP}:8443`, '198.51.100.0/24']]) {
        let r = pull(`${host}/redir`);
        assert.equal(r.status, 1);
        assert.ok(r.stderr.includes(`TLS with the registry https://${host} failed`), r.stderr);
        const seen = conns(8080);
        r = pull(`${host}/redir`, { CONTAINER_MCP_INSECURE_REGISTRIES: insecure });
        assert.equal(r.status, 1); // its blob is nowhere
        assert.doesNotMatch(r.stderr, /TLS|speaks/);
        await eventually(() => conns(8080) > seen, 10000, `${host} named insecure by ${insecure}: its redirect was not followed`);
      }
      // its token realm on another host (whose certificate does not name
      // it) is checked: credentials would go there
      const r = pull('public-registry.test:8443/realm2', { CONTAINER_MCP_INSECURE_REGISTRIES: 'public-registry.test:8443' });
      assert.equal(r.status, 1);
      assert.match(r.stderr, /TLS with the registry https:\/\/other-host\.test:8443\/token failed/);
    } finally {
      helper?.kill();
      try { execFileSync('ip', ['netns', 'del', ns], { stdio: 'ignore' }); } catch { /* gone */ }
      fs.rmSync(etc, { recursive: true, force: true });
      fs.rmSync(work, { recursive: true, force: true });
    }
  });

  test('kill -9 mid-pull lists nothing; prune clears a stopped pull; the next pull resumes, and a layer the store has is never fetched again', T, async (t) => {
    if (skipped(t)) return;
    // a store of its own: the other tests' layers would be reused
    const own = tmpDir('cmcp-pull-own-');
    const env = { ...ENV, CONTAINER_MCP_STATE_DIR: own };
    const layouts = () => {
      try {
        return fs.readdirSync(path.join(own, 'images', 'pulls')).filter((f) => !f.endsWith('.lock'));
      } catch {
        return [];
      }
    };
    const proxy = await holdingProxy(R);
    try {
      const layers = await layersOf('python');
      const big = layers[layers.length - 1];
      const small = layers.slice(0, -1);
      const ref = `${proxy.host}/python`;
      // every small layer whole in the pull's layout, the big one held mid-way
      const killMidway = async () => {
        const before = proxy.hits.get(big) || 0;
        const proc = spawn(BIN, ['pull', ref], { env: envWith(env), stdio: 'ignore' });
        const exited = new Promise((r) => proc.once('exit', r));
        await eventually(() => {
          const l = layouts();
          if (l.length !== 1 || proxy.hits.get(big) !== before + 1) return false;
          const blobs = path.join(own, 'images', 'pulls', l[0], 'blobs', 'sha256');
          return small.every((d) => fs.existsSync(path.join(blobs, d.slice(7))));
        }, 60000, 'the small layers fetched, the big one under way');
        // and unpacked into the store meanwhile: layers unpack while others download
        const unpacked = () => {
          try {
            return fs.readdirSync(path.join(own, 'images', 'layers')).length;
          } catch {
            return 0;
          }
        };
        await eventually(() => unpacked() === small.length, 60000, 'the small layers unpacked while the big one downloads');
        proc.kill('SIGKILL');
        await exited;
      };
      proxy.held.add(big);
      await killMidway();
      let r = await cli(['image', 'list'], env);
      assert.equal(r.code, 0, r.stderr);
      assert.doesNotMatch(r.stdout, /python/, 'a half-pulled image is not listed');
      r = await cli(['image', 'prune'], env);
      assert.equal(r.code, 0, r.stderr);
      assert.ok(Number(/\((\d+) bytes\)/.exec(r.stdout)[1]) > 1e6, r.stdout);
      assert.deepEqual(layouts(), [], 'prune removed the stopped pull');

      await killMidway();
      proxy.held.clear();
      r = await cli(['pull', ref], env);
      assert.equal(r.code, 0, r.stderr);
      for (const d of small) assert.equal(proxy.hits.get(d), 2, `layer ${d}: fetched once per pull that was not resumed`);
      assert.equal(proxy.hits.get(big), 3);
      assert.deepEqual(layouts(), [], 'a finished pull leaves no layout');
      const s = await open(env);
      try {
        const out = ok(await call(s, 'run_container', { image: ref, command: ['python3', '-c', 'print(sum(range(1000)))'], wait: true }));
        assert.equal(out.stdout, '499500\n', out.stderr);
      } finally {
        await s.close();
      }

      // pulled again: every layer comes from the store
      const counts = new Map(proxy.hits);
      r = await cli(['pull', `${ref}:latest`], env);
      assert.equal(r.code, 0, r.stderr);
      for (const d of layers) assert.equal(proxy.hits.get(d), counts.get(d), `layer ${d} was fetched again`);
    } finally {
      await proxy.close();
      fs.rmSync(own, { recursive: true, force: true });
    }
  });

  test('a cancelled pull_image stops its transfers and lists nothing; the next pull resumes', T, async (t) => {
    if (skipped(t)) return;
    const own = tmpDir('cmcp-pull-cancel-');
    const proxy = await holdingProxy(R);
    const s = await open({ CONTAINER_MCP_STATE_DIR: own, CONTAINER_MCP_ALLOWED_REGISTRIES: proxy.host });
    try {
      const layers = await layersOf('python');
      const big = layers[layers.length - 1];
      proxy.held.add(big);
      const ref = `${proxy.host}/python`;
      const ac = new AbortController();
      const p = call(s, 'pull_image', { image: ref }, { signal: ac.signal, timeout: 180000 });
      p.catch(() => {});
      // the small layers whole in the pull's layout, the big one held
      await eventually(() => {
        let l = [];
        try {
          l = fs.readdirSync(path.join(own, 'images', 'pulls')).filter((f) => !f.endsWith('.lock'));
        } catch {
          return false;
        }
        return proxy.heldOpen() === 1 && l.length === 1 && layers.slice(0, -1).every((d) =>
          fs.existsSync(path.join(own, 'images', 'pulls', l[0], 'blobs', 'sha256', d.slice(7))));
      }, 60000, 'the pull under way');
      ac.abort();
      await assert.rejects(p);
      // well before the registry client's 30 s stall timeout would
      await eventually(() => proxy.heldOpen() === 0, 15000, 'the server to hang up the held transfer');
      assert.equal(ok(await call(s, 'list_images', {})).images.length, 0, 'nothing listed');
      proxy.release();
      ok(await call(s, 'pull_image', { image: ref }, { timeout: 180000 }));
      for (const d of layers.slice(0, -1)) assert.equal(proxy.hits.get(d), 1, `layer ${d} fetched again after the cancel`);
      assert.equal(proxy.hits.get(big), 2);
    } finally {
      await proxy.close(); // first: a transfer still held would keep the server's call, and its close, waiting
      await s.close();
      fs.rmSync(own, { recursive: true, force: true });
    }
  });

  test('two pulls of one reference take turns: the second waits, then finds the image whole', T, async (t) => {
    if (skipped(t)) return;
    const own = tmpDir('cmcp-pull-turns-');
    const env = { ...ENV, CONTAINER_MCP_STATE_DIR: own };
    const proxy = await holdingProxy(R);
    try {
      const layers = await layersOf('python');
      const big = layers[layers.length - 1];
      proxy.held.add(big);
      const ref = `${proxy.host}/python`;
      const first = runCli(['pull', ref], { env, timeout: 180000 });
      await eventually(() => proxy.hits.get(big) === 1, 60000, 'the first pull under way');
      const asked = proxy.requests();
      const proc = spawn(BIN, ['pull', ref], { env: envWith(env), stdio: ['ignore', 'pipe', 'pipe'] });
      let stderr = '';
      proc.stderr.on('data', (d) => (stderr += d));
      const second = new Promise((r) => proc.once('exit', (code) => r(code)));
      // the second waits on the first's lock, and says so; nothing more
      // reaches the registry meanwhile (it would ask for the manifest first)
      await eventually(() => /waiting for another pull of the same image/.test(stderr), 60000, 'the second pull waiting');
      assert.equal(proxy.requests(), asked, 'the second pull asked the registry while the first held the lock');
      proxy.release();
      const a = await first;
      assert.equal(a.code, 0, a.stderr);
      assert.equal(await second, 0, stderr);
      assert.equal(proxy.hits.get(big), 1, 'the second pull found the image whole: nothing fetched again');
      const r = await runCli(['image', 'list'], { env });
      assert.equal(r.stdout.split('\n').filter((l) => l.includes(`${proxy.host}/python:latest`)).length, 1, r.stdout);
    } finally {
      await proxy.close();
      fs.rmSync(own, { recursive: true, force: true });
    }
  });

  test('an image a run to completion is using is not removed until that run ends', T, async (t) => {
    if (skipped(t)) return;
    const s = await open();
    const marker = `cm-hold-${process.pid}`;
    try {
      ok(await call(s, 'pull_image', { image: `${R}/zstd` }, { timeout: 180000 }));
      // a run with no record: it holds the image while it runs
      const run = call(s, 'run_container', { image: `${R}/zstd`, wait: true, timeout: 300,
        command: ['/bin/busybox', 'sh', '-c', 'sleep 600; true', marker] });
      await eventually(() => procsWith(marker).length > 0, 60000, 'the run under way');
      refused(await call(s, 'remove_image', { image: `${R}/zstd` }), /a run_container with wait, still running/);
      assert.ok(ok(await call(s, 'list_images', {})).images.find((i) => i.names.includes(`${R}/zstd:latest`)).in_use);
      for (const pid of procsWith(marker)) process.kill(pid, 'SIGKILL');
      const out = ok(await run);
      assert.equal(out.exitCode, 137);
      ok(await call(s, 'remove_image', { image: `${R}/zstd` }));
    } finally {
      await s.close();
    }
  });

  test("an agent's pull reaches a local registry only when the operator names it; CONTAINER_MCP_ALLOWED_REGISTRIES limits the rest", T, async (t) => {
    if (skipped(t)) return;
    const proxy = await holdingProxy(R); // counts what reaches it
    try {
      let s = await open({ CONTAINER_MCP_ALLOWED_REGISTRIES: undefined });
      try {
        for (const ref of [`${proxy.host}/busybox`, `localhost:${proxy.host.split(':')[1]}/busybox`, '169.254.169.254/x',
          '10.1.2.3:5000/x']) {
          refused(await call(s, 'pull_image', { image: ref }), /local address/, /CONTAINER_MCP_ALLOWED_REGISTRIES/);
        }
        assert.equal(proxy.hits.size, 0, 'no request reached the local registry');
        assert.deepEqual(ok(await call(s, 'system_status', {})).policy.allowedRegistries, []);
      } finally {
        await s.close();
      }
      // named as an insecure registry by the operator: pulled
      s = await open({ CONTAINER_MCP_ALLOWED_REGISTRIES: undefined, CONTAINER_MCP_INSECURE_REGISTRIES: proxy.host });
      try {
        ok(await call(s, 'pull_image', { image: `${proxy.host}/busybox` }, { timeout: 180000 }));
      } finally {
        await s.close();
      }
      // a list: only what it names
      s = await open({ CONTAINER_MCP_ALLOWED_REGISTRIES: 'ghcr.io' });
      try {
        refused(await call(s, 'pull_image', { image: 'busybox' }), /docker\.io/, /CONTAINER_MCP_ALLOWED_REGISTRIES names only ghcr\.io/);
        refused(await call(s, 'pull_image', { image: `${R}/busybox` }), /not allowed/);
        assert.deepEqual(ok(await call(s, 'system_status', {})).policy.allowedRegistries, ['ghcr.io']);
      } finally {
        await s.close();
      }
      // the operator's own command line is not an agent: no policy there
      const r = await cli(['pull', `${proxy.host}/busybox`], { CONTAINER_MCP_ALLOWED_REGISTRIES: 'ghcr.io' });
      assert.equal(r.code, 0, r.stderr);
    } finally {
      await proxy.close();
    }
  });

  test('a bad reference is refused before any request; an unknown image says so', T, async (t) => {
    if (skipped(t)) return;
    const s = await open();
    try {
      refused(await call(s, 'pull_image', { image: '--all' }), /reference|image/i);
      refused(await call(s, 'pull_image', { image: `${R}/Upper` }), /reference|lower/i);
      refused(await call(s, 'pull_image', { image: `${R}/nothere:1` }), /nothere|not found|unknown/i);
      assert.deepEqual(pulls().length, 0);
    } finally {
      await s.close();
    }
  });
});
