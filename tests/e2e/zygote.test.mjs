// system_run_python's warm interpreter (the zygote: src/tools/python.c,
// src/backend/native/zygote.c), through the SDK client, checked by what
// the kernel shows:
// - calls are forked from one warm python3 (the code's parent is the same
//   process from call to call), and still each starts fresh: nothing one
//   call changes in sys, in a module or in its globals reaches the next;
// - that python3 holds what a command there holds: the same namespaces,
//   cgroup, ids, capabilities, no_new_privs and seccomp mode;
// - a timeout kills the call's whole tree and only it (a call running
//   beside it in the same zygote lives on);
// - the zygote killed by the code: the next call still works, and a new
//   zygote serves the calls after it; stopped by the code: the call still
//   ends at its timeout and the next works;
// - ending the session takes the zygote with the sandbox.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { eventually, stdioClient, tmpDir } from './lib.mjs';
import { AS_NOBODY, alive, call, nativeBackend, ok, procsWith, refused } from './tools.mjs';

const T = { timeout: 120000 };
const state = tmpDir('cmcp-zygote-state-');
const open = (env = {}) => stdioClient({ args: ['serve'], env: { CONTAINER_MCP_STATE_DIR: state, ...env } });
const py = (s, code, extra = {}) => call(s, 'system_run_python', { code, ...extra });
const marker = () => String(100000000 + crypto.randomInt(800000000));

// The code's parent inside the sandbox: its pid and command line.
const PARENT = "import os\np = os.getppid()\n_ = [p, open('/proc/%d/cmdline' % p).read().split('\\0')[:2]]";
async function parent(s) {
  const [pid, argv] = ok(await py(s, PARENT)).result;
  return { pid, argv };
}

let skip = null;
before(async () => {
  skip = (await nativeBackend(open)).reason;
});
after(() => fs.rmSync(state, { recursive: true, force: true }));

// A server run as nobody (rootless), with a state dir of its own.
function openNobody() {
  const dir = path.join(state, 'nobody');
  fs.chmodSync(state, 0o755); // nobody walks through it to its own
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  fs.chownSync(dir, 65534, 65534);
  return stdioClient({ args: ['serve'], wrap: AS_NOBODY, env: { CONTAINER_MCP_STATE_DIR: dir } });
}

describe('the warm python3 of a sandbox', () => {
  for (const [who, start] of [['root', () => open()], ['a server run as nobody', openNobody]])
  test(`calls are forked from one warm python3, and each starts from a fresh interpreter (${who})`, T, async (t) => {
    if (skip) return t.skip(skip);
    const s = await start();
    try {
      const first = await parent(s);
      assert.deepEqual(first.argv, ['python3', '-c'], 'the code\'s parent is a python3 -c');
      // A change to sys, to a module, to the globals and to the builtins ...
      ok(await py(s, "import sys, json, builtins\nsys.foo = 1\njson.foo = 2\nbuiltins.bar = 3\nx = 4\n_ = 'changed'"));
      // ... is gone in the next call, forked from the same process.
      const seen = ok(await py(s, "import sys, json, builtins\n_ = [hasattr(sys, 'foo'), hasattr(json, 'foo'), hasattr(builtins, 'bar'), 'x' in globals()]"));
      assert.deepEqual(seen.result, [false, false, false, false], 'a call saw what the previous one changed');
      // A module of the working directory, changed on disk, is read afresh
      // (to another size: a .pyc is checked by mtime and size, and both
      // writes may fall in one second).
      ok(await call(s, 'file_write', { path: 'mod.py', content: 'v = 1\n' }));
      assert.equal(ok(await py(s, 'import mod\n_ = mod.v')).result, 1);
      ok(await call(s, 'file_write', { path: 'mod.py', content: 'v = 22\n' }));
      assert.equal(ok(await py(s, 'import mod\n_ = mod.v')).result, 22);
      assert.equal((await parent(s)).pid, first.pid, 'every call came from the same warm python3');
    } finally {
      await s.close().finally(() => s.kill());
    }
  });

  test('the warm python3 holds what a command holds: namespaces, cgroup, ids, capabilities, filter', T, async (t) => {
    if (skip) return t.skip(skip);
    const s = await open();
    // The fields of /proc/PID/status and the links and files that say what
    // a process may do and where it lives.
    const WHAT = ['Uid', 'Gid', 'Groups', 'CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb', 'NoNewPrivs', 'Seccomp'];
    const NS = ['user', 'mnt', 'uts', 'ipc', 'net', 'pid', 'cgroup'];
    const probe = (pid) =>
      `import os\npid = ${pid}\nst = dict(l.split(':', 1) for l in open('/proc/%d/status' % pid).read().splitlines())\n` +
      `_ = {'status': {k: st[k].strip() for k in ${JSON.stringify(WHAT)}}, 'ns': {n: os.readlink('/proc/%d/ns/%s' % (pid, n)) for n in ${JSON.stringify(NS)}}, 'cgroup': open('/proc/%d/cgroup' % pid).read()}`;
    try {
      const zygote = ok(await py(s, probe('os.getppid()'))).result;
      // A command's shell, written to a file by the shell itself and read
      // by python3 (the same probe, one process).
      ok(await call(s, 'system_run_command', { command: 'sleep 600 & echo $! > /workspace/cmd.pid' }));
      const pid = Number((ok(await call(s, 'file_read', { path: 'cmd.pid' })).content).trim());
      const command = ok(await py(s, probe(pid))).result;
      assert.deepEqual(zygote, command, 'the warm python3 differs from a command of the same sandbox');
      assert.notEqual(zygote.status.Seccomp, '0', 'no seccomp filter');
      assert.equal(zygote.status.NoNewPrivs, '1');
    } finally {
      await s.close().finally(() => s.kill());
    }
  });

  test('a timeout kills the call\'s whole tree and only it', T, async (t) => {
    if (skip) return t.skip(skip);
    const s = await open();
    try {
      const m = marker();
      await parent(s); // the zygote is up: both calls below are forked from it
      // The survivor waits until the other call's marked sleep has started
      // and been killed, then says so: it ran in the same zygote the whole
      // time (no timing: it polls the sandbox's own /proc).
      const survivor = py(s, `import os, time\ndef marked():\n    n = 0\n    for p in os.listdir('/proc'):\n        try:\n            n += p.isdigit() and '${m}' in open('/proc/%s/cmdline' % p).read()\n        except OSError:\n            pass\n    return n\nend = time.time() + 90\nwhile not marked() and time.time() < end:\n    time.sleep(0.05)\nwhile marked() and time.time() < end:\n    time.sleep(0.05)\nprint('survived', os.getppid(), flush=True)`, { timeout: 100 });
      survivor.catch(() => {}); // awaited below; a failure before must not hide behind it
      // (6 s: the victim, forked from the warm zygote, must print and start its
      // sleeps before its timeout; 2 s is short on a loaded 2-core machine)
      const victim = ok(await py(s, `import subprocess, time\nsubprocess.Popen(['setsid', 'sleep', '${m}'])\nsubprocess.Popen(['sleep', '${m}'])\nprint('started', flush=True)\ntime.sleep(1000)`, { timeout: 6 }));
      assert.equal(victim.timed_out, true);
      assert.equal(victim.output, 'started\n');
      await eventually(() => procsWith(m).length === 0, 20000, `every "sleep ${m}" to be gone after the timeout`);
      const alive2 = ok(await survivor);
      assert.equal(alive2.success, true, JSON.stringify(alive2));
      assert.match(alive2.output, /^survived \d+\n$/);
    } finally {
      await s.close().finally(() => s.kill());
    }
  });

  test('the zygote killed by the code: the next call works, and a new zygote serves the calls after it', T, async (t) => {
    if (skip) return t.skip(skip);
    const s = await open();
    try {
      const first = await parent(s);
      refused(await py(s, 'import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nimport time\ntime.sleep(5)'), /died during the call/);
      assert.deepEqual(ok(await py(s, "print('after')\n_ = 1")), { output: 'after\n', error: '', result: 1, success: true });
      // The killed one is gone; a new one serves from now on.
      let now;
      await eventually(async () => {
        now = await parent(s);
        return now.pid !== first.pid && now.argv[0] === 'python3';
      }, 30000, 'a new warm python3');
      assert.equal(ok(await py(s, `import os\n_ = os.path.exists('/proc/${first.pid}')`)).result, false, 'the killed zygote is still there');
      assert.equal((await parent(s)).pid, now.pid, 'the new one keeps serving');
    } finally {
      await s.close().finally(() => s.kill());
    }
  });

  // Between calls the zygote keeps one child forked and warmed, waiting
  // for the next call (its spare): the code can see and kill it.
  test('the spare child killed by the code: the next call is forked afresh from the same zygote', T, async (t) => {
    if (skip) return t.skip(skip);
    const s = await open();
    try {
      const first = await parent(s);
      // the zygote's children between calls: its spare (a command, not a
      // python call, lists and kills them: a call is itself one)
      // It holds its call's three memfds (stdout, stderr and the result's),
      // /dev/null and its socket to the zygote: no fd of the zygote's, no
      // other call's pipe (a call's output would stay open in it).
      const KILL = `import json, os, re, signal\nk = [int(p) for p in os.listdir('/proc') if p.isdigit() and open('/proc/%s/stat' % p).read().rsplit(')', 1)[1].split()[1] == '${first.pid}']\nfds = [sorted(re.sub(r'\\d+', 'N', os.readlink('/proc/%d/fd/%s' % (p, f))) for f in os.listdir('/proc/%d/fd' % p)) for p in k]\nfor p in k: os.kill(p, signal.SIGKILL)\nprint(json.dumps(fds))`;
      const run = async () => ok(await call(s, 'system_run_command', { command: `python3 -c "${KILL.replace(/["$`\\]/g, '\\$&')}"` }));
      let r;
      await eventually(async () => JSON.parse((r = await run()).stdout || '[]').length === 1, 30000, 'no spare child of the zygote to kill');
      assert.equal(r.exit_code, 0, r.stderr);
      assert.deepEqual(JSON.parse(r.stdout)[0], ['/dev/null', '/memfd:error (deleted)', '/memfd:output (deleted)',
        '/memfd:result (deleted)', 'socket:[N]']);
      // the next call is forked from the same zygote (not run by the
      // python3 -c wrapper, its fallback), and so are the ones after it
      assert.equal((await parent(s)).pid, first.pid, 'the call after the kill did not come from the zygote');
      for (let i = 0; i < 3; i++)
        assert.deepEqual(ok(await py(s, `print(${i})\n_ = ${i}`)), { output: `${i}\n`, error: '', result: i, success: true });
      assert.equal((await parent(s)).pid, first.pid, 'a new zygote was started');
    } finally {
      await s.close().finally(() => s.kill());
    }
  });

  test('the zygote stopped by the code: the call still ends at its timeout, the next call works', T, async (t) => {
    if (skip) return t.skip(skip);
    const s = await open();
    try {
      await parent(s);
      const r = ok(await py(s, "import os, signal\nprint('stopping', flush=True)\nos.kill(os.getppid(), signal.SIGSTOP)", { timeout: 1 }));
      assert.equal(r.timed_out, true);
      assert.equal(r.success, false);
      assert.deepEqual(ok(await py(s, '_ = 6 * 7')).result, 42);
    } finally {
      await s.close().finally(() => s.kill());
    }
  });

  test('ending the session takes the zygote with the sandbox', T, async (t) => {
    if (skip) return t.skip(skip);
    const s = await open();
    let zygotes = [];
    try {
      ok(await py(s, '_ = 1'));
      const id = ok(await call(s, 'system_status', {})).sessionSandbox;
      const init = ok(await call(s, 'inspect_container', { container: id })).init.pid;
      // The init's children on the host: the zygote is the python3 -c
      // whose code says hello.
      const kids = fs.readFileSync(`/proc/${init}/task/${init}/children`, 'utf8').split(' ').filter(Boolean);
      zygotes = kids.filter((p) => {
        try {
          const argv = fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').split('\0');
          return argv[0] === 'python3' && argv[2].includes("ctl.send(b'z')");
        } catch {
          return false;
        }
      });
      assert.equal(zygotes.length, 1, `one zygote among the init's children ${kids}`);
    } finally {
      await s.close().finally(() => s.kill());
    }
    await eventually(() => !alive(zygotes[0]), 30000, `the zygote ${zygotes[0]} to be gone with the session`);
  });
});
