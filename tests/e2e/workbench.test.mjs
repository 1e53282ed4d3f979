// The session sandbox and the sandbox tools (issue 10), through the SDK
// client, checked on the host where it matters:
// - the seed's examples return the seed's objects; `_` comes back as JSON,
//   as its repr, and never from what the code prints;
// - timeouts and cancellation kill the whole process tree (found in /proc by
//   a marker argument); a timeout over CONTAINER_MCP_COMMAND_TIMEOUT_MAX is
//   refused; working_dir is honoured;
// - a session's sandbox is made on its first sandbox-tool call (never by
//   listing), exactly once under concurrent first calls, is its own (another
//   session neither sees its files nor reaches it), and is removed however
//   the session ends: stdio closed, HTTP DELETE, legacy SSE closed, HTTP
//   idle expiry, the sandbox TTL, SIGTERM.  Removed means no process (its
//   init and a marked background process), no cgroup dir and no record.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { assertNoSanitizerReport, eventually, httpClient, sseClient, startHttp, stdioClient, tmpDir } from './lib.mjs';
import { AS_NOBODY, alive, call, nativeBackend, ok, ownCgroupDirs, procsWith, refused, busyboxImage } from './tools.mjs';

const T = { timeout: 120000 };
const state = tmpDir('cmcp-workbench-state-');
const ENV = { CONTAINER_MCP_STATE_DIR: state };
const open = (env = {}) => stdioClient({ args: ['serve'], env: { ...ENV, ...env } });
const http = (env = {}) => startHttp({ env: { ...ENV, ...env } });
const marker = () => String(100000000 + crypto.randomInt(800000000));
const records = (dir = state) => (fs.existsSync(path.join(dir, 'containers')) ? fs.readdirSync(path.join(dir, 'containers')) : []);
const sandboxId = async (s) => ok(await call(s, 'system_status', {})).sessionSandbox;
const sh = (s, command, extra = {}, opts) => call(s, 'system_run_command', { command, ...extra }, opts);
const py = (s, code, extra = {}, opts) => call(s, 'system_run_python', { code, ...extra }, opts);

let skip = null;
before(async () => {
  skip = (await nativeBackend(open)).reason;
});
after(() => fs.rmSync(state, { recursive: true, force: true }));

// What of the session's sandbox can be seen on the host: its init, a
// background process marked with `m` (setsid: it left the command's tree,
// only the sandbox's end can take it), its cgroup dirs, its record.
async function traces(s) {
  const m = marker();
  ok(await sh(s, `setsid sleep ${m} >/dev/null 2>&1 < /dev/null &`));
  const id = await sandboxId(s);
  assert.ok(id, 'the session has a sandbox after system_run_command');
  const pid = ok(await call(s, 'inspect_container', { container: id })).init.pid;
  await eventually(() => procsWith(m).length === 1, 20000, `the background "sleep ${m}"`);
  return { id, m, pid, cgroups: ownCgroupDirs(pid) };
}

async function assertGone({ id, m, pid, cgroups }, what, dir = state) {
  await eventually(() => procsWith(m).length === 0, 30000, `"sleep ${m}" to be gone after ${what}`);
  await eventually(() => !alive(pid), 30000, `the sandbox's init ${pid} to be gone after ${what}`);
  await eventually(() => cgroups.every((d) => !fs.existsSync(d)), 30000, `cgroups ${cgroups} to be removed after ${what}`);
  await eventually(() => !records(dir).includes(id), 30000, `the record of ${id} to be removed after ${what}`);
  const mounts = fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\n').filter((l) => l.includes(id));
  assert.deepEqual(mounts, [], `mounts of ${id} left on the host after ${what}`);
}

describe('the seed\'s examples', () => {
  test('system_run_command, system_run_python and system_env_var return the seed\'s objects', T, async (t) => {
    if (skip) return t.skip(skip);
    const s = await open();
    try {
      ok(await sh(s, 'touch file1.txt file2.txt'));
      assert.deepEqual(ok(await sh(s, 'ls')), { stdout: 'file1.txt\nfile2.txt\n', stderr: '', exit_code: 0, success: true });
      // the seed's client example, and the seed's shorter one
      const seed = { output: 'Hello, world!\n', error: '', result: 42, success: true };
      assert.deepEqual(ok(await py(s, "print('Hello, world!')\nresult = 42\n_ = result")), seed);
      assert.deepEqual(ok(await py(s, "print('Hello, world!')\n_ = 42")), seed);
      const failed = ok(await sh(s, 'echo out; echo err >&2; exit 3'));
      assert.deepEqual(failed, { stdout: 'out\n', stderr: 'err\n', exit_code: 3, success: false });
    } finally {
      await s.close().finally(() => s.kill());
    }
  });

  test('system_env_var reads the sandbox\'s environment, never the server\'s', T, async (t) => {
    if (skip) return t.skip(skip);
    const secret = `server-only-${marker()}`;
    const s = await open({ WORKBENCH_SERVER_SECRET: secret });
    try {
      const c = ok(await call(s, 'run_container', { image: 'host', command: ['sleep', '300'], env: { MCP_PORT: '8000', SANDBOX_ROOT: '/app/sandbox' } }));
      const r = ok(await call(s, 'system_env_var', { var_name: 'MCP_PORT', container: c.id }));
      assert.equal(r.requested_var, '8000');
      assert.equal(r.variables.MCP_PORT, '8000');
      assert.equal(r.variables.SANDBOX_ROOT, '/app/sandbox');
      const own = ok(await call(s, 'system_env_var', { var_name: 'WORKBENCH_SERVER_SECRET' }));
      assert.equal(own.requested_var, null);
      assert.ok(!JSON.stringify(own).includes(secret), 'the server\'s environment leaked into the sandbox\'s');
      assert.ok(own.variables.PATH, 'the sandbox has a PATH');
      assert.ok(!('requested_var' in ok(await call(s, 'system_env_var', {}))), 'requested_var only when var_name is given');
    } finally {
      await s.close().finally(() => s.kill());
    }
  });
});

describe('system_run_python', () => {
  test('`_` as JSON, as repr, absent, and never forged by what the code prints', T, async (t) => {
    if (skip) return t.skip(skip);
    const s = await open();
    try {
      const v = { a: [1, 2.5, null, true], b: 'ü' };
      assert.deepEqual(ok(await py(s, `_ = ${JSON.stringify(v).replace(/null/g, 'None').replace(/true/g, 'True')}`)).result, v);
      assert.equal(ok(await py(s, '_ = {1, 2}')).result, '{1, 2}');
      assert.equal(ok(await py(s, "_ = float('nan')")).result, 'nan');
      // A printed "_", and a printed copy of the wrapper's own document.
      const fake = ok(await py(s, "import json, sys\nprint('_ = 666')\nprint(json.dumps({'output': '', 'error': '', 'result': 666, 'success': True}))\nsys.stderr.write('{\"result\": 666}')\n"));
      assert.ok(!('result' in fake), `a printed _ became result: ${JSON.stringify(fake)}`);
      assert.match(fake.output, /^_ = 666\n\{"output"/);
      assert.equal(fake.success, true);
      // The wrapper's own words, printed, then the interpreter ended before
      // the wrapper could speak: still no result.
      const ended = ok(await py(s, "import json, os\nprint(json.dumps({'ok': True, 'json': '666'}))\nprint(json.dumps({'result': 666}), flush=True)\nos._exit(0)"));
      assert.ok(!('result' in ended), `a printed document became result: ${JSON.stringify(ended)}`);
      assert.equal(ended.success, false, 'the code never finished');
      // NUL bytes in output and result (a bug: the wrapper's document was
      // refused), and output over the 1 MiB cap.
      assert.deepEqual(ok(await py(s, "print('a\\0b')\n_ = 'x\\0y'")), { output: 'a\0b\n', error: '', result: 'x\0y', success: true });
      const flood = ok(await py(s, "print('x' * 3000000)"));
      assert.deepEqual([flood.truncated, flood.output.length, flood.success], [true, 1 << 20, true]);
      // A subprocess's output is the code's output too.
      assert.equal(ok(await py(s, "import subprocess\nsubprocess.run(['echo', 'child'])")).output, 'child\n');
    } finally {
      await s.close().finally(() => s.kill());
    }
  });

  test('an exception gives success false and the traceback; the memory limit holds', T, async (t) => {
    if (skip) return t.skip(skip);
    const s = await open();
    const big = open({ CONTAINER_MCP_PYTHON_MEMORY: '1g' });
    try {
      const r = ok(await py(s, "print('before')\n1/0"));
      assert.equal(r.success, false);
      assert.equal(r.output, 'before\n');
      assert.match(r.error, /Traceback[\s\S]*line 2[\s\S]*ZeroDivisionError: division by zero/);
      const mem = ok(await py(s, 'x = bytearray(300 << 20)\n_ = len(x)'));
      assert.equal(mem.success, false, 'a 300 MiB allocation under the 256 MiB default');
      assert.match(mem.error, /MemoryError/);
      assert.equal(ok(await py(await big, 'x = bytearray(300 << 20)\n_ = len(x)')).result, 300 << 20);
      const exit = ok(await py(s, "import sys\nprint('bye')\nsys.exit(4)"));
      assert.equal(exit.success, false);
      assert.equal(exit.output, 'bye\n');
    } finally {
      await s.close().finally(() => s.kill());
      const b = await big;
      await b.close().finally(() => b.kill());
    }
  });
});

// A tree of three: a background child, one in its own session, a grandchild
// left by a subshell that exits, and the shell waiting.
const tree = (m) => `sleep ${m} & setsid sleep ${m} & (sleep ${m} &); sleep ${m}`;

describe('timeouts, cancellation, working_dir', () => {
  test('a timeout kills the command\'s whole tree; the default timeout applies; over the maximum is refused', T, async (t) => {
    if (skip) return t.skip(skip);
    const s = await open({ CONTAINER_MCP_COMMAND_TIMEOUT_DEFAULT: '2', CONTAINER_MCP_COMMAND_TIMEOUT_MAX: '100' });
    try {
      const m = marker();
      const r = ok(await sh(s, tree(m)));
      assert.equal(r.success, false);
      assert.equal(r.timed_out, true);
      await eventually(() => procsWith(m).length === 0, 20000, `every "sleep ${m}" to be gone after the timeout`);
      const m2 = marker();
      const p = ok(await py(s, `import subprocess, time\nsubprocess.Popen(['setsid', 'sleep', '${m2}'])\nsubprocess.Popen(['sleep', '${m2}'])\nprint('started', flush=True)\ntime.sleep(1000)`, { timeout: 1 }));
      assert.equal(p.success, false);
      assert.equal(p.timed_out, true);
      assert.equal(p.output, 'started\n', 'what the code printed before its timeout is kept');
      await eventually(() => procsWith(m2).length === 0, 20000, `every "sleep ${m2}" to be gone after the python timeout`);
      refused(await sh(s, 'true', { timeout: 101 }), /timeout 101 s is over the maximum of 100 s/, /CONTAINER_MCP_COMMAND_TIMEOUT_MAX/);
      refused(await py(s, 'pass', { timeout: 101 }), /CONTAINER_MCP_COMMAND_TIMEOUT_MAX/);
      assert.equal(ok(await sh(s, 'echo fine', { timeout: 100 })).stdout, 'fine\n');
    } finally {
      await s.close().finally(() => s.kill());
    }
  });

  test('the built-in maximum is 120 s', T, async (t) => {
    if (skip) return t.skip(skip);
    const s = await open();
    try {
      refused(await sh(s, 'true', { timeout: 121 }), /over the maximum of 120 s/);
      assert.equal(ok(await sh(s, 'echo ok', { timeout: 120 })).stdout, 'ok\n');
    } finally {
      await s.close().finally(() => s.kill());
    }
  });

  test('cancellation kills the whole tree and the sandbox stays', T, async (t) => {
    if (skip) return t.skip(skip);
    const s = await open();
    try {
      for (const run of [(m, o) => sh(s, tree(m), {}, o), (m, o) => py(s, `import os\nos.execvp('sh', ['sh', '-c', '${tree(m)}'])`, {}, o)]) {
        const m = marker();
        const ac = new AbortController();
        const p = run(m, { signal: ac.signal });
        p.catch(() => {});
        await eventually(() => procsWith(m).length === 4, 20000, `the four "sleep ${m}" (${procsWith(m)})`);
        ac.abort();
        await assert.rejects(p);
        await eventually(() => procsWith(m).length === 0, 20000, `every "sleep ${m}" to be gone after the cancel`);
      }
      assert.equal(ok(await sh(s, 'echo up')).stdout, 'up\n');
    } finally {
      await s.close().finally(() => s.kill());
    }
  });

  test('working_dir is honoured: relative to /workspace, or absolute', T, async (t) => {
    if (skip) return t.skip(skip);
    const s = await open();
    try {
      ok(await sh(s, 'mkdir -p sub/deeper'));
      assert.equal(ok(await sh(s, 'pwd')).stdout, '/workspace\n');
      assert.equal(ok(await sh(s, 'pwd', { working_dir: 'sub/deeper' })).stdout, '/workspace/sub/deeper\n');
      assert.equal(ok(await sh(s, 'pwd', { working_dir: '/tmp' })).stdout, '/tmp\n');
      assert.equal(ok(await py(s, 'import os\n_ = os.getcwd()', { working_dir: 'sub' })).result, '/workspace/sub');
      refused(await sh(s, 'pwd', { working_dir: 'missing' }), /working directory/);
    } finally {
      await s.close().finally(() => s.kill());
    }
  });
});

describe('the session sandbox', () => {
  test('listing creates none; concurrent first calls create one; inspect and status say which it is', T, async (t) => {
    if (skip) return t.skip(skip);
    const s = await open();
    try {
      const before = records();
      ok(await call(s, 'list_containers', { all: true }));
      assert.equal(await sandboxId(s), null);
      assert.deepEqual(records(), before, 'listing made a container');
      const names = await Promise.all(Array.from({ length: 6 }, () => sh(s, 'hostname')));
      const hosts = new Set(names.map((r) => ok(r).stdout));
      assert.equal(hosts.size, 1, `concurrent first calls ran in ${[...hosts]}`);
      const mine = ok(await call(s, 'list_containers', {})).containers;
      assert.equal(mine.length, 1, `one sandbox expected: ${JSON.stringify(mine)}`);
      const id = await sandboxId(s);
      assert.equal(mine[0].id, id);
      assert.equal(ok(await call(s, 'inspect_container', { container: id })).sessionSandbox, true);
      const other = ok(await call(s, 'run_container', { image: 'host', command: ['sleep', '300'] }));
      assert.equal(ok(await call(s, 'inspect_container', { container: other.id })).sessionSandbox, false);
      // `container` runs elsewhere: the other container's hostname
      const name = ok(await call(s, 'inspect_container', { container: other.id })).name;
      assert.equal(ok(await sh(s, 'hostname', { container: other.id })).stdout, `${name}\n`);
    } finally {
      await s.close().finally(() => s.kill());
    }
  });

  test('two sessions get two sandboxes and cannot see each other\'s /workspace', T, async (t) => {
    if (skip) return t.skip(skip);
    const srv = await http();
    const a = await httpClient(srv.url);
    const b = await httpClient(srv.url);
    try {
      ok(await sh(a, 'echo a-only > secret.txt'));
      assert.equal(ok(await sh(b, 'ls -A /workspace')).stdout, '');
      const [ia, ib] = [await sandboxId(a), await sandboxId(b)];
      assert.notEqual(ia, ib);
      refused(await sh(b, 'cat /workspace/secret.txt', { container: ia }), /no container/);
      assert.equal(ok(await sh(a, 'cat secret.txt')).stdout, 'a-only\n');
    } finally {
      await a.close();
      await b.close();
      await srv.stop();
    }
  });

  test('the file tools act on the session\'s sandbox: made by the first of them, shared with the sandbox tools, never another session\'s', T, async (t) => {
    if (skip) return t.skip(skip);
    const srv = await http();
    const a = await httpClient(srv.url);
    const b = await httpClient(srv.url);
    try {
      assert.equal(await sandboxId(a), null);
      ok(await call(a, 'file_write', { path: 'notes/a.txt', content: 'from a\n' }));
      const ia = await sandboxId(a);
      assert.ok(ia, 'file_write made the session sandbox');
      assert.equal(ok(await sh(a, 'cat notes/a.txt')).stdout, 'from a\n');
      ok(await sh(a, 'echo made by sh > /workspace/b.txt'));
      assert.equal(ok(await call(a, 'file_read', { path: 'b.txt' })).content, 'made by sh\n');
      assert.equal(await sandboxId(a), ia, 'one sandbox for both families');
      // b's file tools reach b's own (new, empty) sandbox, and not a's by id
      refused(await call(b, 'file_read', { path: 'notes/a.txt' }));
      assert.notEqual(await sandboxId(b), ia);
      refused(await call(b, 'file_read', { path: 'notes/a.txt', container: ia }), /no container/);
      assert.deepEqual(ok(await call(b, 'file_list', {})).entries, []);
    } finally {
      await a.close();
      await b.close();
      await srv.stop();
    }
  });

  test('CONTAINER_MCP_ALLOWED_COMMANDS: listed commands run, anything else is refused before it runs', T, async (t) => {
    if (skip) return t.skip(skip);
    const s = await open({ CONTAINER_MCP_ALLOWED_COMMANDS: 'echo,cat' });
    try {
      // a refused first call makes no sandbox
      refused(await sh(s, 'rm -f x'), /rm/, /CONTAINER_MCP_ALLOWED_COMMANDS/);
      assert.equal(await sandboxId(s), null);
      ok(await call(s, 'file_write', { path: 'keep', content: 'kept\n' }));
      assert.equal(ok(await sh(s, 'echo hi | cat; cat keep')).stdout, 'hi\nkept\n');
      for (const line of ['echo hi; rm keep', 'echo $(rm keep)', 'echo "`rm keep`"', 'cat keep && r""m keep', '(rm keep)'])
        refused(await sh(s, line), /CONTAINER_MCP_ALLOWED_COMMANDS/);
      assert.equal(ok(await call(s, 'file_read', { path: 'keep' })).content, 'kept\n', 'no refused line ran');
    } finally {
      await s.close().finally(() => s.kill());
    }
  });

  test('an image without bash: system_run_command runs sh -c and says so', T, async (t) => {
    if (skip) return t.skip(skip);
    const img = busyboxImage('cmcp-workbench-images-');
    if (!img) return t.skip('no /usr/bin/busybox (apt-get install busybox-static)');
    const { images, rootfs } = img;
    const s = await open({ CONTAINER_MCP_IMAGE_DIRS: images, CONTAINER_MCP_SANDBOX_IMAGE: rootfs });
    try {
      assert.ok(!fs.existsSync(path.join(rootfs, 'bin', 'bash')));
      const r = ok(await sh(s, 'echo hi; cat /proc/self/cmdline'));
      assert.equal(r.shell, 'sh', JSON.stringify(r));
      assert.match(r.stdout, /^hi\n/);
      assert.equal(r.success, true);
    } finally {
      await s.close().finally(() => s.kill());
      fs.rmSync(images, { recursive: true, force: true });
    }
  });

  test('read-only mode refuses all three, and the file tools make no sandbox', T, async (t) => {
    if (skip) return t.skip(skip);
    const s = await open({ CONTAINER_MCP_READONLY: '1' });
    try {
      const before = records();
      refused(await sh(s, 'true'), /system_run_command refused/, /CONTAINER_MCP_READONLY/);
      refused(await py(s, 'pass'), /system_run_python refused/);
      refused(await call(s, 'system_env_var', {}), /system_env_var refused/);
      refused(await call(s, 'file_read', { path: 'x' }), /CONTAINER_MCP_READONLY/, /pass `container`/);
      refused(await call(s, 'file_list', {}), /CONTAINER_MCP_READONLY/);
      assert.equal(await sandboxId(s), null);
      assert.deepEqual(records(), before);
    } finally {
      await s.close().finally(() => s.kill());
    }
  });
});

describe('every way a session ends removes its sandbox', () => {
  test('stdio: the client closes stdin', T, async (t) => {
    if (skip) return t.skip(skip);
    const s = await open();
    let tr;
    try {
      tr = await traces(s);
    } finally {
      await s.close().finally(() => s.kill());
    }
    await assertGone(tr, 'stdin closed');
  });

  test('stdio: SIGTERM', T, async (t) => {
    if (skip) return t.skip(skip);
    const s = await open();
    let tr;
    try {
      tr = await traces(s);
      s.proc.kill('SIGTERM');
      await eventually(() => s.proc.exitCode !== null || s.proc.signalCode !== null, 20000, 'the server to exit');
      assert.equal(s.proc.exitCode, 0, s.stderr());
      assertNoSanitizerReport(s.stderr());
    } finally {
      s.kill();
    }
    await assertGone(tr, 'SIGTERM');
  });

  test('HTTP: DELETE, idle expiry, and SIGTERM', T, async (t) => {
    if (skip) return t.skip(skip);
    const srv = await http({ CONTAINER_MCP_HTTP_SESSION_IDLE: '2' });
    try {
      const del = await httpClient(srv.url);
      const trDel = await traces(del);
      await del.close(); // DELETE
      await assertGone(trDel, 'HTTP DELETE');
      const idle = await httpClient(srv.url);
      const trIdle = await traces(idle);
      await idle.client.close(); // no DELETE: the session expires
      await assertGone(trIdle, 'the HTTP session expired');
      const last = await httpClient(srv.url);
      const trStop = await traces(last);
      await srv.stop('SIGTERM');
      await assertGone(trStop, 'SIGTERM of the HTTP server');
    } finally {
      srv.kill();
    }
  });

  test('legacy SSE: the stream closes', T, async (t) => {
    if (skip) return t.skip(skip);
    const srv = await http();
    try {
      const s = await sseClient(`${srv.base}/sse`);
      const tr = await traces(s);
      await s.close();
      await assertGone(tr, 'the SSE stream closed');
    } finally {
      await srv.stop();
    }
  });

  test('stdio, a server run as nobody: the sandbox works and goes with the session', T, async (t) => {
    if (skip) return t.skip(skip);
    if (process.getuid() !== 0) return t.skip('needs root to run the server as nobody');
    fs.chmodSync(state, 0o755);
    const dir = path.join(state, 'nobody');
    fs.mkdirSync(dir, { mode: 0o700 });
    fs.chownSync(dir, 65534, 65534);
    const s = await stdioClient({ args: ['serve'], wrap: AS_NOBODY, env: { CONTAINER_MCP_STATE_DIR: dir } });
    let tr;
    try {
      assert.deepEqual(ok(await py(s, "open('f', 'w').write('x')\n_ = open('f').read()")), { output: '', error: '', result: 'x', success: true });
      tr = await traces(s);
    } finally {
      await s.close().finally(() => s.kill());
    }
    await assertGone(tr, 'stdin closed (server as nobody)', dir);
  });

  test('a crash (SIGKILL): the next server\'s orphan reaping removes it', T, async (t) => {
    if (skip) return t.skip(skip);
    const s = await open();
    let tr;
    try {
      tr = await traces(s);
    } finally {
      s.kill();
    }
    await eventually(() => s.proc.exitCode !== null || s.proc.signalCode !== null, 20000, 'the server to die');
    // its record (and cgroup) are left for the next start to reap
    assert.ok(records().includes(tr.id), 'the record of a crashed server\'s sandbox');
    const next = await open();
    try {
      await assertGone(tr, 'the next server\'s start');
    } finally {
      await next.close().finally(() => next.kill());
    }
  });

  test('CONTAINER_MCP_SANDBOX_TTL: an idle sandbox is removed, the next call gets a new one', T, async (t) => {
    if (skip) return t.skip(skip);
    const s = await open({ CONTAINER_MCP_SANDBOX_TTL: '2' });
    try {
      const tr = await traces(s);
      await assertGone(tr, 'the sandbox TTL');
      assert.equal(await sandboxId(s), null, 'status still names the removed sandbox');
      ok(await sh(s, 'true'));
      const next = await sandboxId(s);
      assert.ok(next && next !== tr.id, `a new sandbox after the TTL: ${next}`);
      // A call longer than the TTL keeps its sandbox.
      assert.equal(ok(await sh(s, 'sleep 3; echo kept', { timeout: 30 })).stdout, 'kept\n');
      assert.equal(await sandboxId(s), next);
    } finally {
      await s.close().finally(() => s.kill());
    }
  });
});
