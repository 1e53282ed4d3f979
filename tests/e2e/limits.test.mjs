// Every resource has a ceiling (issue 7, points 10 and 11): `memory` and
// `cpus` above CONTAINER_MCP_MAX_MEMORY / _MAX_CPUS (default: the host's
// memory and cores) are refused naming the ceiling, a value at the ceiling
// is what the cgroup gets; every running sandbox, wait runs included,
// counts against CONTAINER_MCP_MAX_CONTAINERS, checked and reserved at once.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { deferred, stdioClient, tmpDir, withTimeout } from './lib.mjs';
import { AS_NOBODY, call, nativeBackend, ok, refused, cgroupLimits } from './tools.mjs';

const T = { timeout: 90000 };
const state = tmpDir('cmcp-lim-state-');
const allowed = tmpDir('cmcp-lim-allowed-');
fs.chmodSync(allowed, 0o777); // the unprivileged server's runs write their markers here
const ENV = { CONTAINER_MCP_STATE_DIR: state, CONTAINER_MCP_ALLOWED_MOUNTS: allowed };

// The unprivileged server's state dir must be its own.
const nobodyState = tmpDir('cmcp-lim-nobody-');
fs.chownSync(nobodyState, 65534, 65534);

// `as`: null for this user (root in CI), or 'nobody' for an unprivileged server.
const open = (env = {}, as = null) => as === 'nobody'
  ? stdioClient({
    args: ['serve'],
    env: { ...ENV, CONTAINER_MCP_STATE_DIR: nobodyState, HOME: '/nonexistent', ...env },
    wrap: AS_NOBODY,
  })
  : stdioClient({ args: ['serve'], env: { ...ENV, ...env } });



let nativeReason = null;
let cgroupReason = null;

before(async () => {
  ({ reason: nativeReason, cgroupReason } = await nativeBackend(open));
});

after(() => {
  for (const d of [state, allowed, nobodyState]) fs.rmSync(d, { recursive: true, force: true });
});

describe('memory and cpus ceilings', () => {
  test('defaults: the host\'s memory and online cores; over them refused, at them accepted', T, async (t) => {
    if (nativeReason) return t.skip(nativeReason);
    const s = await open();
    try {
      const pol = ok(await call(s, 'system_status', {})).policy;
      const memTotal = Number(/MemTotal:\s+(\d+) kB/.exec(fs.readFileSync('/proc/meminfo', 'utf8'))[1]) * 1024;
      assert.ok(Math.abs(pol.maxMemoryBytes - memTotal) < 4096, `${pol.maxMemoryBytes} vs MemTotal ${memTotal}`);
      assert.equal(pol.maxCpus, os.cpus().length);
      const over = pol.maxMemoryBytes + (1 << 20);
      refused(await call(s, 'run_container', { image: 'host', command: ['true'], wait: true, memory: over }),
        /^memory \d+ is over the ceiling of [\d.]+[kmgt] \(\d+ bytes, CONTAINER_MCP_MAX_MEMORY\); ask for less/);
      if (memTotal < 2 ** 40) {
        refused(await call(s, 'run_container', { image: 'host', command: ['true'], wait: true, memory: '1t' }),
          /memory 1t is over the ceiling of/, /CONTAINER_MCP_MAX_MEMORY/);
      }
      refused(await call(s, 'run_container', { image: 'host', command: ['true'], wait: true, cpus: 512 }),
        new RegExp(`^cpus 512 is over the ceiling of ${pol.maxCpus} \\(CONTAINER_MCP_MAX_CPUS\\)`));
      if (cgroupReason) return t.skip(cgroupReason);
      const c = ok(await call(s, 'run_container', {
        image: 'host', command: ['sleep', '300'], memory: pol.maxMemoryBytes, cpus: pol.maxCpus,
      }));
      try {
        const st = ok(await call(s, 'container_stats', { container: c.id }));
        assert.equal(st.memoryLimitBytes, pol.maxMemoryBytes, JSON.stringify(st));
        const lim = cgroupLimits(ok(await call(s, 'inspect_container', { container: c.id })));
        assert.equal(lim.memory, pol.maxMemoryBytes);
        assert.equal(lim.cpus, pol.maxCpus);
      } finally {
        ok(await call(s, 'remove_container', { container: c.id, force: true }));
      }
    } finally {
      await s.close().finally(() => s.kill());
    }
  });

  test('set ceilings: refusals name them; overflowing, negative and odd sizes are refused', T, async (t) => {
    if (nativeReason) return t.skip(nativeReason);
    const s = await open({ CONTAINER_MCP_MAX_MEMORY: '1g', CONTAINER_MCP_MAX_CPUS: '1' });
    try {
      const run = (extra) => call(s, 'run_container', { image: 'host', command: ['true'], wait: true, ...extra });
      refused(await run({ memory: '1025m' }),
        /^memory 1025m is over the ceiling of 1g \(1073741824 bytes, CONTAINER_MCP_MAX_MEMORY\); ask for less or have the operator raise CONTAINER_MCP_MAX_MEMORY$/);
      refused(await run({ memory: '99999999999999999999t' }), /over the ceiling of 1g/, /CONTAINER_MCP_MAX_MEMORY/);
      refused(await run({ memory: 2 ** 40 }), /^memory 1099511627776 is over the ceiling of 1g/);
      refused(await run({ memory: Number.MAX_SAFE_INTEGER }), /over the ceiling of 1g/);
      refused(await run({ memory: -1 }), /memory/);
      refused(await run({ memory: '-1g' }), /memory "-1g": give a size like 512m/);
      refused(await run({ memory: '0x40000000' }), /memory "0x40000000": give a size/);
      refused(await run({ memory: '1e9' }), /memory "1e9": give a size/);
      refused(await run({ cpus: 1.5 }), /^cpus 1.5 is over the ceiling of 1 \(CONTAINER_MCP_MAX_CPUS\)/);
      refused(await run({ cpus: 1025 }), /cpus/);
      refused(await run({ cpus: 0.001 }), /cpus/);
      if (cgroupReason) return t.skip(cgroupReason);
      // At the ceiling, as a size string and as cpus: the cgroup holds exactly that.
      const c = ok(await call(s, 'run_container', { image: 'host', command: ['sleep', '300'], memory: '1g', cpus: 1 }));
      try {
        assert.equal(ok(await call(s, 'container_stats', { container: c.id })).memoryLimitBytes, 2 ** 30);
        const lim = cgroupLimits(ok(await call(s, 'inspect_container', { container: c.id })));
        assert.deepEqual(lim, { memory: 2 ** 30, cpus: 1 });
      } finally {
        ok(await call(s, 'remove_container', { container: c.id, force: true }));
      }
      // The default follows the ceiling down: a run without memory gets 1g, not 2g.
      const d = ok(await call(s, 'run_container', { image: 'host', command: ['sleep', '300'] }));
      try {
        assert.equal(ok(await call(s, 'container_stats', { container: d.id })).memoryLimitBytes, 2 ** 30);
      } finally {
        ok(await call(s, 'remove_container', { container: d.id, force: true }));
      }
    } finally {
      await s.close().finally(() => s.kill());
    }
  });
});

// A file that appears in `dir`: resolves at once when it is there, else on
// the directory's change event (no polling).
function whenExists(dir, name) {
  const file = path.join(dir, name);
  const d = deferred();
  const w = fs.watch(dir, () => {
    if (fs.existsSync(file)) d.resolve();
  });
  if (fs.existsSync(file)) d.resolve();
  return withTimeout(d.promise, 30000, `${file} to appear`).finally(() => w.close());
}

// Resolves once `n` files named prefix* are in `dir` (event-driven).
function whenCount(dir, prefix, n) {
  const count = () => fs.readdirSync(dir).filter((f) => f.startsWith(prefix)).length;
  const d = deferred();
  const w = fs.watch(dir, () => {
    if (count() >= n) d.resolve();
  });
  if (count() >= n) d.resolve();
  d.promise.finally(() => w.close());
  return { promise: d.promise, stop: () => { w.close(); d.resolve(); } };
}

// The first `k` calls to answer; fails as soon as more wait runs have
// started than the cap allows (the old behaviour: all of them run).
async function firstAnswers(calls, k, cap) {
  const over = whenCount(allowed, 'started-', cap + 1);
  const tooMany = over.promise.then(() => ({ over: true }));
  const got = [];
  const pending = new Set(calls);
  try {
    for (let i = 0; i < k; i++) {
      const done = await Promise.race([tooMany, ...[...pending].map((p) => p.then((v) => ({ p, v })))]);
      assert.ok(!done.over, `more than ${cap} wait runs started at once with CONTAINER_MCP_MAX_CONTAINERS=${cap}`);
      pending.delete(done.p);
      got.push(done.v);
    }
  } finally {
    over.stop();
  }
  return { got, pending };
}

// The wait runs hold until the test lets them go: each opens a FIFO in the
// mounted dir while the test holds its write end (so the open does not
// block), says it started, and reads until the test closes that end.
function gate(dir) {
  const fifo = path.join(dir, 'gate');
  fs.rmSync(fifo, { force: true });
  assert.equal(spawnSync('mkfifo', [fifo]).status, 0, 'mkfifo');
  fs.chmodSync(fifo, 0o666);
  const fd = fs.openSync(fifo, fs.constants.O_RDWR); // never blocks on Linux
  return { release: () => fs.closeSync(fd) };
}

const blocking = (i) => ({
  image: 'host', wait: true, timeout: 120,
  mounts: [{ source: allowed, target: '/m' }],
  command: ['sh', '-c', `exec 3</m/gate; : > /m/started-${i}; cat <&3`],
});

describe('the container cap counts wait runs', () => {
  for (const as of [null, 'nobody']) {
  test(`five concurrent wait runs with a cap of 2: exactly 2 run, 3 are refused saying how many run and what to change${as ? ' (server as nobody)' : ''}`, T, async (t) => {
    if (nativeReason) return t.skip(nativeReason);
    if (as && process.getuid() !== 0) return t.skip('needs root to become nobody');
    const s = await open({ CONTAINER_MCP_MAX_CONTAINERS: '2' }, as);
    const g = gate(allowed);
    let released = false;
    try {
      const calls = [0, 1, 2, 3, 4].map((i) => call(s, 'run_container', blocking(i)).then((r) => ({ i, r })));
      // The refusals come back while the 2 others hold their slots.
      const { got: refusedOnes, pending } = await firstAnswers(calls, 3, 2);
      for (const { r } of refusedOnes) {
        refused(r, /^2 containers are running \(0 listed, 2 runs starting or running to completion, of every session\), the most CONTAINER_MCP_MAX_CONTAINERS=2 allows/,
          /raise CONTAINER_MCP_MAX_CONTAINERS/);
      }
      const running = [0, 1, 2, 3, 4].filter((i) => !refusedOnes.some((x) => x.i === i));
      assert.equal(running.length, 2);
      await Promise.all(running.map((i) => whenExists(allowed, `started-${i}`)));
      // A detached run is refused too while both hold their slots.
      refused(await call(s, 'run_container', { image: 'host', command: ['sleep', '300'] }), /CONTAINER_MCP_MAX_CONTAINERS=2/);
      g.release();
      released = true;
      for (const p of pending) {
        const { r } = await p;
        assert.equal(ok(r).exitCode, 0);
      }
      // Exactly the two ran: only their markers exist.
      const started = fs.readdirSync(allowed).filter((f) => f.startsWith('started-')).sort();
      assert.deepEqual(started, running.map((i) => `started-${i}`).sort());
      // The slots are free again.
      assert.equal(ok(await call(s, 'run_container', { image: 'host', command: ['true'], wait: true })).exitCode, 0);
    } finally {
      if (!released) g.release();
      for (const f of fs.readdirSync(allowed)) fs.rmSync(path.join(allowed, f), { force: true });
      await s.close().finally(() => s.kill());
    }
  });
  }

  test('a detached container and wait runs count together', T, async (t) => {
    if (nativeReason) return t.skip(nativeReason);
    const s = await open({ CONTAINER_MCP_MAX_CONTAINERS: '2' });
    const g = gate(allowed);
    let released = false;
    try {
      const d = ok(await call(s, 'run_container', { image: 'host', command: ['sleep', '300'] }));
      const calls = [0, 1, 2, 3].map((i) => call(s, 'run_container', blocking(i)).then((r) => ({ i, r })));
      const results = await firstAnswers(calls, 3, 1);
      for (const { r } of results.got)
        refused(r, /^2 containers are running \(1 listed, 1 runs starting or running to completion/, /CONTAINER_MCP_MAX_CONTAINERS=2/);
      const [last] = [...results.pending];
      const runningOne = [0, 1, 2, 3].find((i) => !results.got.some((x) => x.i === i));
      await whenExists(allowed, `started-${runningOne}`);
      g.release();
      released = true;
      assert.equal(ok((await last).r).exitCode, 0);
      assert.equal(fs.readdirSync(allowed).filter((f) => f.startsWith('started-')).length, 1);
      ok(await call(s, 'remove_container', { container: d.id, force: true }));
    } finally {
      if (!released) g.release();
      for (const f of fs.readdirSync(allowed)) fs.rmSync(path.join(allowed, f), { force: true });
      await s.close().finally(() => s.kill());
    }
  });
});
