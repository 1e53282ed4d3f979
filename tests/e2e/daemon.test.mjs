// The shared daemon (issue 11): `container-mcp daemon start|stop|status`,
// the seed's start-service/stop-service/status-service, and `container-mcp
// proxy`, the stdio server an MCP client launches, driven here by the SDK's
// StdioClientTransport.  Every check looks at the real thing: the process
// in /proc, the files' modes, the sandbox's processes on the host.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { BIN, DIAG, RawStdio, assertNoSanitizerReport, envWith, eventually, httpRequest, runCli, startHttp, stdioClient, tmpDir, withTimeout } from './lib.mjs';
import { assertProgress } from './checks.mjs';
import { AS_NOBODY, alive, call, nativeBackend, ok, procsWith } from './tools.mjs';

const NOBODY = AS_NOBODY.slice(1); // setpriv's own arguments

const T = { timeout: 180000 };
const root = tmpDir('cmcp-daemon-');
const ENV = { CONTAINER_MCP_STATE_DIR: path.join(root, 'state') };
const marker = () => String(100000000 + crypto.randomInt(800000000));
let n = 0;

// A directory of its own per test: socket, pid, log and lock beside each other.
function place() {
  const dir = path.join(root, `d${n++}`);
  fs.mkdirSync(dir, { mode: 0o700 });
  const sock = path.join(dir, 'container-mcp.sock');
  return { dir, sock, pid: path.join(dir, 'container-mcp.pid'), log: path.join(dir, 'container-mcp.log'), lock: path.join(dir, 'container-mcp.lock') };
}

const cli = (args, opts = {}) => runCli(args, { env: ENV, timeout: 90000, ...opts });
async function start(p, ...extra) {
  try {
    return await cli(['daemon', 'start', '--socket-path', p.sock, ...DIAG, ...extra]);
  } finally {
    remember(p); // whatever the assertions say next, the daemon is killed at the end
  }
}
// Stop, then check the daemon's log (its stderr) holds no sanitizer report.
async function stop(p) {
  const r = await cli(['daemon', 'stop', '--socket-path', p.sock]);
  if (fs.existsSync(p.log)) assertNoSanitizerReport(fs.readFileSync(p.log, 'utf8'), `the daemon (log ${p.log})`);
  return r;
}
async function statusJson(p) {
  const r = await cli(['daemon', 'status', '--json', '--socket-path', p.sock]);
  return r.code === 0 ? JSON.parse(r.stdout) : null;
}
const pidIn = (p) => Number(fs.readFileSync(p.pid, 'utf8').trim());
async function proxy(p, extra = []) {
  try {
    return await stdioClient({ args: ['proxy', '--socket-path', p.sock, ...DIAG, ...extra], env: ENV });
  } finally {
    remember(p);
  }
}
// The flock(2) locks on inode `ino`: held, and waiting ("->" in /proc/locks).
function flocksOn(ino) {
  const mine = fs.readFileSync('/proc/locks', 'utf8').split('\n').filter((l) => / FLOCK /.test(l) && new RegExp(`:${ino} `).test(l));
  return { held: mine.filter((l) => !l.includes('->')).length, blocked: mine.filter((l) => l.includes('->')).length };
}
const cmdline = (pid) => fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');

// Daemons this file started, killed at the end whatever happened.
const started = new Set();
function remember(p) {
  try {
    started.add(pidIn(p));
  } catch {}
}
after(() => {
  for (const pid of started) {
    try {
      // only a daemon of this file's (its socket is under root), never a reused pid
      if (alive(pid) && cmdline(pid).some((a) => a.startsWith(root))) process.kill(pid, 'SIGKILL');
    } catch {}
  }
  fs.rmSync(root, { recursive: true, force: true });
});

let native = null;
before(async () => {
  native = (await nativeBackend(() => stdioClient({ args: ['serve'], env: ENV }))).reason;
});

// The session sandbox of `s`, seen on the host: a process marked `m` in it.
async function sandboxWithMark(s) {
  const m = marker();
  ok(await call(s, 'system_run_command', { command: `setsid sleep ${m} >/dev/null 2>&1 < /dev/null &` }));
  const id = ok(await call(s, 'system_status', {})).sessionSandbox;
  assert.ok(id, 'the session has a sandbox');
  await eventually(() => procsWith(m).length === 1, 30000, `the sandbox's "sleep ${m}"`);
  return { id, m };
}

describe('daemon start, status, stop', () => {
  test('start detaches a server on a 0600 socket; start again says it runs; status asks it', T, async () => {
    const p = place();
    // The caller holds a file open on fd 3 (not close-on-exec): the
    // daemon must not keep it.
    const mark = path.join(p.dir, 'caller-fd');
    fs.writeFileSync(mark, '');
    const extra = spawn('sh', ['-c', 'exec 3<"$0"; exec "$@"', mark, BIN, 'daemon', 'start', '--socket-path', p.sock, ...DIAG], {
      env: envWith(ENV),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    extra.stdout.on('data', (d) => (out += d));
    const code = await withTimeout(new Promise((r) => extra.on('close', r)), 90000, 'daemon start');
    remember(p);
    assert.equal(code, 0, out);
    const pid = pidIn(p);
    assert.match(out, new RegExp(`started: pid ${pid}\\b`));
    // the real process: our server, serving this socket, in a session of its own, no terminal
    assert.ok(alive(pid));
    assert.deepEqual(cmdline(pid).slice(1, 4), ['serve', '--socket', p.sock]);
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    const sid = Number(stat[3]);
    assert.notEqual(sid, Number(fs.readFileSync(`/proc/${process.pid}/stat`, 'utf8').split(') ')[1].split(' ')[3]), 'a session of its own (setsid)');
    assert.equal(Number(stat[4]), 0, 'no controlling terminal');
    // stdio: /dev/null in, the log out; nothing else of the caller's
    const fds = Object.fromEntries(fs.readdirSync(`/proc/${pid}/fd`).map((fd) => {
      try {
        return [fd, fs.readlinkSync(`/proc/${pid}/fd/${fd}`)];
      } catch {
        return [fd, null];
      }
    }));
    assert.equal(fds['0'], '/dev/null');
    assert.equal(fds['1'], p.log);
    assert.equal(fds['2'], p.log);
    for (const [fd, target] of Object.entries(fds)) assert.notEqual(target, mark, `fd ${fd} is the caller's`);
    // every file 0600
    for (const f of [p.sock, p.pid, p.log, p.lock]) {
      assert.equal((fs.statSync(f).mode & 0o777).toString(8), '600', `${f} mode`);
    }
    assert.ok(fs.statSync(p.sock).isSocket());

    const again = await start(p);
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stdout, new RegExp(`already running: pid ${pid}\\b`));
    assert.equal(pidIn(p), pid, 'the same daemon');
    const seed = await cli(['start-service', '--socket-path', p.sock]);
    assert.match(seed.stdout, new RegExp(`already running: pid ${pid}\\b`));

    const st = await statusJson(p);
    assert.equal(st.pid, pid);
    assert.equal(st.socket, p.sock);
    assert.equal(st.sessions, 0);
    assert.ok(Number.isInteger(st.uptimeSec));
    const human = await cli(['status-service', '--socket-path', p.sock]);
    assert.equal(human.code, 0);
    assert.match(human.stdout, new RegExp(`pid +${pid}\\n`));

    const s = await stop(p);
    assert.equal(s.code, 0, s.stderr);
    assert.ok(!alive(pid), 'stop returns once the daemon has exited');
    assert.ok(!fs.existsSync(p.sock), 'its socket is removed');
    const gone = await cli(['daemon', 'status', '--socket-path', p.sock]);
    assert.equal(gone.code, 3, 'status of a stopped daemon exits 3');
    const twice = await cli(['stop-service', '--socket-path', p.sock]);
    assert.equal(twice.code, 0);
    assert.match(twice.stdout, /not running/);
  });

  test('a crash leaves a stale pid file and socket: start replaces them; a pid that is not ours is never signalled', T, async () => {
    const p = place();
    assert.equal((await start(p)).code, 0);
    remember(p);
    const first = pidIn(p);
    process.kill(first, 'SIGKILL');
    await eventually(() => !alive(first), 30000, 'the killed daemon to be gone');
    assert.ok(fs.existsSync(p.sock) && fs.existsSync(p.pid), 'the crash left its socket and pid file');
    const st0 = await cli(['daemon', 'status', '--socket-path', p.sock]);
    assert.equal(st0.code, 3, 'a stale pid file is not a running daemon');

    const again = await start(p);
    assert.equal(again.code, 0, again.stderr);
    remember(p);
    const second = pidIn(p);
    assert.notEqual(second, first);
    assert.match(again.stdout, /started/);
    assert.equal((await statusJson(p)).pid, second, 'the new daemon answers on the old path');
    assert.equal((await stop(p)).code, 0);

    // A pid file naming a live process that is not a daemon of ours.
    const bystander = spawn('sleep', ['1000'], { stdio: 'ignore' });
    try {
      fs.writeFileSync(p.pid, `${bystander.pid}\n`, { mode: 0o600 });
      const s = await stop(p);
      assert.equal(s.code, 0);
      assert.match(s.stdout, /not running/);
      assert.ok(alive(bystander.pid), 'stop never signals a pid no daemon of ours holds');
      const st = await cli(['daemon', 'status', '--socket-path', p.sock]);
      assert.equal(st.code, 3);
      const r = await start(p);
      assert.equal(r.code, 0, r.stderr);
      remember(p);
      assert.notEqual(pidIn(p), bystander.pid);
      assert.ok(alive(bystander.pid));
      assert.equal((await stop(p)).code, 0);
    } finally {
      bystander.kill('SIGKILL');
    }
  });

  test('the seed\'s order (options, then start-service) works; GET /status is the socket\'s alone', T, async () => {
    const p = place();
    const r = await cli(['--socket-path', p.sock, ...DIAG, 'start-service']);
    assert.equal(r.code, 0, r.stderr);
    remember(p);
    assert.deepEqual(cmdline(pidIn(p)).slice(1, 4), ['serve', '--socket', p.sock]);
    assert.equal((await httpRequest({ socketPath: p.sock }, { method: 'GET', path: '/status', headers: { Host: 'localhost' } })).status, 200);
    assert.equal((await stop(p)).code, 0);
    // A token holder on TCP is a client: the list of every session's containers is not for it.
    const srv = await startHttp({ env: ENV });
    try {
      const tcp = await httpRequest(srv, { method: 'GET', path: '/status' });
      assert.equal(tcp.status, 404, tcp.body);
    } finally {
      await srv.stop().finally(() => srv.kill());
    }
  });

  test('a start waits while another holds the lock file, then starts', T, async () => {
    const p = place();
    fs.writeFileSync(p.lock, '', { mode: 0o600 });
    const ino = fs.statSync(p.lock).ino;
    // flock(1) stands in for a start in progress: it holds the lock until its stdin closes.
    const holder = spawn('flock', ['-x', p.lock, 'cat'], { stdio: ['pipe', 'ignore', 'ignore'] });
    try {
      await eventually(() => flocksOn(ino).held >= 1, 30000, 'flock(1) to hold the lock');
      const starting = start(p);
      await eventually(() => flocksOn(ino).blocked >= 1, 60000, 'the start to wait on the lock (a blocked entry in /proc/locks)');
      assert.ok(!fs.existsSync(p.pid), 'no daemon while the lock is held');
      holder.stdin.end();
      const r = await starting;
      remember(p);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /started/);
      assert.equal((await statusJson(p)).pid, pidIn(p));
      assert.equal((await stop(p)).code, 0);
    } finally {
      holder.kill('SIGKILL');
    }
  });

  test('a symlink planted as the pid file or the log is never followed', T, async () => {
    const p = place();
    const target = path.join(p.dir, 'victim');
    fs.writeFileSync(target, 'untouched\n', { mode: 0o644 });
    fs.symlinkSync(target, p.log);
    const r = await start(p);
    assert.notEqual(r.code, 0, 'a log that is a symlink is refused');
    assert.match(r.stderr, new RegExp(p.log.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
    assert.ok(!fs.existsSync(p.pid), 'no daemon started');
    fs.unlinkSync(p.log);
    fs.symlinkSync(target, p.pid);
    const ok2 = await start(p);
    remember(p);
    assert.equal(ok2.code, 0, ok2.stderr);
    assert.ok(fs.lstatSync(p.pid).isFile(), 'the planted link was replaced by a pid file of its own');
    assert.equal(fs.readFileSync(target, 'utf8'), 'untouched\n');
    assert.equal((fs.statSync(target).mode & 0o777).toString(8), '644');
    assert.equal((await stop(p)).code, 0);
    assert.equal(fs.readFileSync(target, 'utf8'), 'untouched\n');
  });

  test('another user\'s socket or pid file at the path is never trusted', T, async (t) => {
    if (process.getuid() !== 0) return t.skip('needs root to act as a second user (nobody)');
    // a directory every user may write, as /tmp is (the test's own root is 0700)
    const shared = tmpDir('cmcp-shared-');
    fs.chmodSync(shared, 0o777);
    const sock = path.join(shared, 'container-mcp.sock');
    const p = { dir: shared, sock, pid: path.join(shared, 'container-mcp.pid'), log: path.join(shared, 'container-mcp.log'), lock: path.join(shared, 'container-mcp.lock') };
    const got = path.join(p.dir, 'got');
    // nobody binds the daemon's path first and records whatever reaches it
    const fake = spawn('setpriv', [...NOBODY, process.execPath, '-e', `
      const fs = require('fs');
      require('net').createServer((c) => c.on('data', (d) => fs.appendFileSync(${JSON.stringify(got)}, d))).listen(${JSON.stringify(p.sock)}, () => console.log('up'));
    `], { stdio: ['ignore', 'pipe', 'inherit'] });
    const bystander = spawn('sleep', ['1000'], { stdio: 'ignore' });
    let holder;
    try {
      await withTimeout(new Promise((r) => fake.stdout.once('data', r)), 30000, 'nobody\'s server to listen');
      const px = await runCli(['proxy', '--socket-path', p.sock, '--timeout', '30'], {
        env: { ...ENV, CONTAINER_MCP_TOKEN: 'secret-token-of-root' },
        input: '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}\n',
        timeout: 90000,
      });
      remember(p);
      assert.notEqual(px.code, 0, 'the proxy refuses the socket and its own daemon cannot take a live one');
      assert.ok(!fs.existsSync(got), `nothing was sent to the other user's server: ${fs.existsSync(got) ? fs.readFileSync(got, 'utf8') : ''}`);

      // nobody's pid file, locked by nobody, naming a live process
      fs.rmSync(p.pid, { force: true });
      fs.writeFileSync(p.pid, `${bystander.pid}\n`, { mode: 0o600 });
      fs.chownSync(p.pid, 65534, 65534);
      const ino = fs.statSync(p.pid).ino;
      holder = spawn('setpriv', [...NOBODY, 'flock', '-x', p.pid, 'cat'], { stdio: ['pipe', 'ignore', 'ignore'] });
      await eventually(() => flocksOn(ino).held >= 1, 30000, 'nobody to hold the planted pid file');
      const s = await stop(p);
      assert.match(s.stdout, /not running/);
      assert.ok(alive(bystander.pid), 'the pid in another user\'s pid file is never signalled');
    } finally {
      holder?.kill('SIGKILL');
      fake.kill('SIGKILL');
      bystander.kill('SIGKILL');
      fs.rmSync(shared, { recursive: true, force: true });
    }
  });

  test('two starts at once make one daemon', T, async () => {
    const p = place();
    const [a, b] = await Promise.all([start(p), start(p)]);
    remember(p);
    assert.equal(a.code, 0, a.stderr);
    assert.equal(b.code, 0, b.stderr);
    const pids = [a, b].map((r) => Number(/pid (\d+)/.exec(r.stdout)[1]));
    assert.equal(pids[0], pids[1], `both report the same daemon: ${a.stdout} ${b.stdout}`);
    assert.equal(pidIn(p), pids[0]);
    assert.equal([a, b].filter((r) => /started/.test(r.stdout)).length, 1, 'one started it, the other found it');
    assert.equal((await stop(p)).code, 0);
  });

  test('stop while a long call runs: the call ends, the daemon exits, the sandbox is gone', T, async (t) => {
    if (native) return t.skip(native);
    const p = place();
    assert.equal((await start(p)).code, 0);
    remember(p);
    const pid = pidIn(p);
    const s = await proxy(p);
    try {
      const { m } = await sandboxWithMark(s);
      const m2 = marker();
      const long = call(s, 'system_run_command', { command: `sleep ${m2}`, timeout: 100 }).then(
        (r) => ({ r }),
        (e) => ({ e }),
      );
      let early;
      long.then((x) => (early = x));
      await eventually(() => {
        if (early) assert.fail(`the long call ended early: ${JSON.stringify(early.r ?? String(early.e))}`);
        return procsWith(m2).length === 1;
      }, 30000, `the long call's "sleep ${m2}"`);
      const r = await stop(p);
      assert.equal(r.code, 0, r.stderr);
      assert.ok(!alive(pid), 'the daemon exited before stop returned');
      const settled = await withTimeout(long, 30000, 'the long call to end');
      assert.ok(settled.e || settled.r.isError, `the call got an error: ${JSON.stringify(settled)}`);
      assert.deepEqual(procsWith(m), [], 'the session sandbox is gone');
      assert.deepEqual(procsWith(m2), [], 'the long command is gone');
    } finally {
      s.kill();
    }
  });
});

describe('proxy', () => {
  test('a proxy starts the daemon when none runs, and the daemon outlives it', T, async () => {
    const p = place();
    assert.ok(!fs.existsSync(p.pid));
    const s = await proxy(p);
    remember(p);
    const pid = pidIn(p);
    try {
      assert.equal(s.client.getServerVersion().name, 'container-mcp');
      assert.deepEqual(ok(await call(s, 'echo', { text: 'via the daemon' })), { text: 'via the daemon' });
      const seen = [];
      ok(await call(s, 'sleep', { ms: 300, steps: 3 }, { onprogress: (x) => seen.push(x) }));
      assertProgress(seen, 3, 'progress relayed by the proxy');
      assert.notEqual(pid, s.pid);
      assert.deepEqual(cmdline(pid).slice(1, 4), ['serve', '--socket', p.sock]);
      assert.equal((await statusJson(p)).sessions, 1);
    } finally {
      await s.close().finally(() => s.kill());
    }
    assert.ok(alive(pid), 'the daemon is not the proxy\'s child: it stays');
    assert.equal((await stop(p)).code, 0);
  });

  test('three proxies at once: three sessions of one daemon, each sees only its own containers', T, async (t) => {
    if (native) return t.skip(native);
    const p = place();
    assert.equal((await start(p)).code, 0);
    remember(p);
    const all = await Promise.all([proxy(p), proxy(p), proxy(p)]);
    try {
      assert.equal((await statusJson(p)).sessions, 3);
      const ids = [];
      for (const s of all) ids.push((await sandboxWithMark(s)).id);
      assert.equal(new Set(ids).size, 3, 'three sandboxes');
      for (const [i, s] of all.entries()) {
        const seen = ok(await call(s, 'list_containers', {})).containers.map((c) => c.id);
        assert.deepEqual(seen, [ids[i]], `proxy ${i} sees its own sandbox only`);
      }
      assert.equal((await statusJson(p)).sandboxCount, 3);
    } finally {
      await Promise.all(all.map((s) => s.close().finally(() => s.kill())));
    }
    assert.equal((await stop(p)).code, 0);
  });

  test('raw lines: a parse error answered as stdio would; a daemon that dies ends the proxy, no client left waiting', T, async () => {
    const p = place();
    assert.equal((await start(p)).code, 0);
    remember(p);
    const raw = new RawStdio(['proxy', '--socket-path', p.sock], { env: ENV });
    try {
      assert.ok((await raw.initialize()).result);
      await raw.write('this is not json');
      const perr = await raw.next((m) => m.error && m.id === null, 30000, 'the parse error');
      assert.equal(perr.error.code, -32700);
      assert.deepEqual((await raw.request('ping')).result, {});
      process.kill(pidIn(p), 'SIGKILL');
      const r = await withTimeout(raw.srv.exited, 30000, 'the proxy to exit once its daemon is gone');
      assert.equal(r.code, 1);
      assert.match(raw.srv.stderr(), /ended this session/);
    } finally {
      raw.kill();
    }
  });

  test('a cancel through the proxy kills the command in the sandbox', T, async (t) => {
    if (native) return t.skip(native);
    const p = place();
    assert.equal((await start(p)).code, 0);
    remember(p);
    const s = await proxy(p);
    try {
      await sandboxWithMark(s);
      const m = marker();
      const ac = new AbortController();
      const running = call(s, 'system_run_command', { command: `sleep ${m}`, timeout: 100 }, { signal: ac.signal }).catch((e) => e);
      await eventually(() => procsWith(m).length === 1, 30000, `"sleep ${m}" to run`);
      ac.abort();
      await running;
      await eventually(() => procsWith(m).length === 0, 30000, `"sleep ${m}" to be killed by the cancel`);
      assert.deepEqual(ok(await call(s, 'echo', { text: 'still here' })), { text: 'still here' }, 'the session goes on');
    } finally {
      await s.close().finally(() => s.kill());
      assert.equal((await stop(p)).code, 0);
    }
  });

  test('a proxy killed with SIGKILL, whose stdin closes, or SIGTERMed leaves no session and no sandbox', T, async (t) => {
    if (native) return t.skip(native);
    const p = place();
    assert.equal((await start(p)).code, 0);
    remember(p);
    try {
      const killed = await proxy(p);
      const a = await sandboxWithMark(killed);
      killed.proc.kill('SIGKILL');
      // bounded: far below the 1 h session idle timeout
      await eventually(() => procsWith(a.m).length === 0, 60000, 'the SIGKILLed proxy\'s sandbox to be removed');
      await eventually(async () => (await statusJson(p)).sessions === 0, 60000, 'its session to end');

      const closed = await proxy(p);
      const b = await sandboxWithMark(closed);
      await closed.close(); // closes stdin; checks the proxy exits 0
      await eventually(() => procsWith(b.m).length === 0, 60000, 'the closed proxy\'s sandbox to be removed');
      assert.equal((await statusJson(p)).sessions, 0);

      const termed = await proxy(p);
      try {
        const c = await sandboxWithMark(termed);
        termed.proc.kill('SIGTERM');
        const code = await withTimeout(new Promise((r) => (termed.proc.exitCode !== null ? r(termed.proc.exitCode) : termed.proc.on('exit', r))), 30000, 'the proxy to exit on SIGTERM');
        assert.equal(code, 0, 'SIGTERM: the proxy ends its session and exits 0');
        await eventually(() => procsWith(c.m).length === 0, 60000, 'the SIGTERMed proxy\'s sandbox to be removed');
      } finally {
        termed.kill(); // one that ignored SIGTERM must not outlive the test
      }
    } finally {
      assert.equal((await stop(p)).code, 0);
    }
  });
});
