// The container tools on the native runtime, through the official SDK client
// over stdio: the seed's "aha", the lifecycle, containment and policy.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { eventually, stdioClient, tmpDir } from './lib.mjs';
import { AS_NOBODY, call, cgroupLimits, nativeBackend, ok, refused } from './tools.mjs';

const T = { timeout: 60000 };

// Every server of this file keeps its records and scratch dir in one temp
// state dir, and may mount only `allowed`.
const state = tmpDir('cmcp-state-');
const allowed = tmpDir('cmcp-allowed-');
const outside = tmpDir('cmcp-outside-');
const ENV = { CONTAINER_MCP_STATE_DIR: state, CONTAINER_MCP_ALLOWED_MOUNTS: allowed };
// The unprivileged server's state dir must be its own.
const nobodyState = tmpDir('cmcp-nobody-');
fs.chownSync(nobodyState, 65534, 65534);
fs.chmodSync(allowed, 0o755);

// `as`: null for this user (root in CI), or 'nobody' to run the server
// unprivileged (the runtime then uses a user namespace).
async function open(env = {}, as = null) {
  if (as === 'nobody') {
    return stdioClient({
      args: ['serve'],
      env: { ...ENV, CONTAINER_MCP_STATE_DIR: nobodyState, HOME: '/nonexistent', ...env },
      wrap: AS_NOBODY,
    });
  }
  return stdioClient({ args: ['serve'], env: { ...ENV, ...env } });
}




// Runs to completion in a fresh sandbox of the host image.
async function run(s, command, extra = {}) {
  return ok(await call(s, 'run_container', { image: 'host', command, wait: true, ...extra }));
}

let nativeReason = null;
let netReason = null;
let cgroupMode = 'none';

before(async () => {
  const { reason, details, netReason: why } = await nativeBackend(open);
  nativeReason = reason;
  cgroupMode = details?.cgroup || 'none';
  netReason = why;
});

after(() => {
  for (const d of [allowed, outside, nobodyState]) fs.rmSync(d, { recursive: true, force: true });
});

describe('containers on the native runtime', () => {
  test('the aha: python3 in a fresh sandbox prints 499500', T, async (t) => {
    if (nativeReason) return t.skip(nativeReason);
    const s = await open();
    try {
      const r = await run(s, ['python3', '-c', 'print(sum(range(1000)))']);
      assert.equal(r.exitCode, 0, r.stderr);
      assert.equal(r.stdout, '499500\n');
      assert.equal(r.truncated, false);
    } finally {
      await s.close().finally(() => s.kill());
    }
  });

  test('lifecycle: run, exec, list with labels, stats, logs, inspect, stop, remove', T, async (t) => {
    if (nativeReason) return t.skip(nativeReason);
    const s = await open({ CONTAINER_MCP_AGENT_NAME: 'e2e-agent' });
    try {
      const started = ok(await call(s, 'run_container', {
        image: 'host', name: 'keeper', command: ['sh', '-c', 'echo started; exec sleep 300'], memory: '256m', cpus: 1,
      }));
      assert.equal(started.name, 'keeper');
      const ex = ok(await call(s, 'exec_in_container', {
        container: 'keeper', command: ['sh', '-c', 'cat; echo "$GREETING"; pwd'],
        stdin: 'from stdin\n', env: { GREETING: 'hello' },
      }));
      assert.equal(ex.exitCode, 0);
      assert.equal(ex.stdout, 'from stdin\nhello\n/workspace\n');

      const list = ok(await call(s, 'list_containers', {})).containers;
      const mine = list.find((c) => c.name === 'keeper');
      assert.ok(mine, JSON.stringify(list));
      assert.equal(mine.state, 'running');
      assert.equal(mine.labels['dev.container-mcp.managed'], 'true');
      assert.equal(mine.labels['dev.container-mcp.agent'], 'e2e-agent');
      assert.equal(mine.labels['dev.container-mcp.client'], 'container-mcp-e2e'); // the SDK client's clientInfo.name
      assert.match(mine.labels['dev.container-mcp.session'], /^[0-9a-f]{32}$/);

      const stats = ok(await call(s, 'container_stats', { container: 'keeper' }));
      assert.ok(stats.pids >= 1, JSON.stringify(stats));
      assert.equal(stats.memoryLimitBytes, 256 << 20, JSON.stringify(stats));
      assert.equal(typeof stats.ioWriteBytes, 'number', JSON.stringify(stats));
      assert.match(stats.source, /^(cgroup v[12]|\/proc)/, JSON.stringify(stats));
      // CPU time grows while the container burns CPU (a busy loop left
      // running, so even the /proc source, which sums live processes, sees it).
      const busy = ok(await call(s, 'exec_in_container', {
        container: 'keeper', command: ['sh', '-c', 'sh -c "while :; do :; done" >/dev/null 2>&1 & echo $!'],
      })).stdout.trim();
      const burnt = await eventually(async () => {
        const now = ok(await call(s, 'container_stats', { container: 'keeper' }));
        return now.cpuUsec >= stats.cpuUsec + 200000 && now;
      }, 30000, `cpuUsec to grow by 0.2 s from ${stats.cpuUsec} while a busy loop runs`);
      assert.ok(burnt.pids > stats.pids, JSON.stringify(burnt));
      ok(await call(s, 'exec_in_container', { container: 'keeper', command: ['kill', busy] }));
      const logs = ok(await call(s, 'container_logs', { container: 'keeper' }));
      assert.match(logs.logs, /started/);
      const recent = ok(await call(s, 'container_logs', { container: 'keeper', since: '1h', tail: 1 }));
      assert.equal(recent.logs, 'started\n');
      const future = ok(await call(s, 'container_logs', { container: 'keeper', since: Math.floor(Date.now() / 1000) + 3600 }));
      assert.equal(future.logs, '');
      refused(await call(s, 'container_logs', { container: 'keeper', since: 'yesterday' }), /since/, /RFC 3339/, /10m/);
      // inspect tells what was asked, and the kernel holds it.
      const insp = ok(await call(s, 'inspect_container', { container: started.id }));
      assert.equal(insp.id, started.id);
      assert.equal(insp.name, 'keeper');
      assert.equal(insp.image, 'host');
      assert.equal(insp.state, 'running');
      assert.deepEqual(insp.argv, ['sh', '-c', 'echo started; exec sleep 300']);
      assert.equal(insp.limits.memory_bytes, 256 << 20);
      assert.equal(insp.limits.cpus, 1);
      assert.deepEqual(insp.labels, mine.labels);
      assert.equal(insp.network, false);
      assert.deepEqual(insp.ports, []);
      assert.ok(fs.existsSync(`/proc/${insp.init.pid}`), `init.pid ${insp.init.pid} is a live process of the host`);
      if (insp.cgroup?.mode && insp.cgroup.mode !== 'none')
        assert.deepEqual(cgroupLimits(insp), { memory: 256 << 20, cpus: 1 });

      ok(await call(s, 'stop_container', { container: 'keeper', timeout: 1 }));
      ok(await call(s, 'remove_container', { container: 'keeper' }));
      const all = ok(await call(s, 'list_containers', { all: true })).containers;
      assert.equal(all.find((c) => c.name === 'keeper'), undefined);
      refused(await call(s, 'exec_in_container', { container: 'keeper', command: ['true'] }), /no container/);
    } finally {
      await s.close().finally(() => s.kill());
    }
  });

  test('containment: no host processes, no writes outside, no network, no mount, no sysrq', T, async (t) => {
    if (nativeReason) return t.skip(nativeReason);
    const listener = net.createServer((c) => c.end('leak'));
    await new Promise((res) => listener.listen(0, '127.0.0.1', res));
    const port = listener.address().port;
    const s = await open();
    try {
      const procs = await run(s, ['sh', '-c', 'ls /proc | grep -c "^[0-9]"']);
      assert.ok(Number(procs.stdout) <= 4, `sandbox sees ${procs.stdout.trim()} processes`);
      const pid = await run(s, ['test', '-e', `/proc/${s.pid}`]);
      assert.notEqual(pid.exitCode, 0, 'the server process is visible inside the sandbox');

      const write = await run(s, ['sh', '-c', 'touch /usr/evil || touch /etc/evil || echo refused']);
      assert.match(write.stdout, /refused/);
      assert.equal(fs.existsSync('/usr/evil') || fs.existsSync('/etc/evil'), false);
      const scratch = await run(s, ['sh', '-c', 'echo ok > /workspace/f && echo ok > /tmp/f && cat /workspace/f /tmp/f']);
      assert.equal(scratch.stdout, 'ok\nok\n');

      const connect = await run(s, ['python3', '-c',
        `import socket; s=socket.create_connection(("127.0.0.1", ${port}), 2); print(s.recv(4))`]);
      assert.notEqual(connect.exitCode, 0, `the sandbox reached the host listener: ${connect.stdout}`);

      const mount = await run(s, ['sh', '-c', 'mkdir -p /tmp/m && mount -t tmpfs none /tmp/m && echo mounted']);
      assert.doesNotMatch(mount.stdout, /mounted/);
      const sysrq = await run(s, ['sh', '-c', 'echo h > /proc/sysrq-trigger && echo wrote']);
      assert.doesNotMatch(sysrq.stdout, /wrote/);
    } finally {
      listener.close();
      await s.close().finally(() => s.kill());
    }
  });

  test('limits: a timeout kills the run, output is capped', T, async (t) => {
    if (nativeReason) return t.skip(nativeReason);
    const s = await open();
    try {
      const t0 = Date.now();
      const slow = await run(s, ['sh', '-c', 'sleep 60 & sleep 60'], { timeout: 1 });
      assert.equal(slow.timedOut, true);
      // returned at the timeout, not when the sleeps would end (a bound the
      // command sets, not the machine's speed)
      assert.ok(Date.now() - t0 < 60000, 'the run waited for its sleeps');
      const flood = await run(s, ['sh', '-c', 'head -c 5000000 /dev/zero | tr "\\0" x']);
      assert.equal(flood.truncated, true);
      assert.ok(flood.stdout.length <= 1 << 20, `stdout of ${flood.stdout.length} bytes`);
    } finally {
      await s.close().finally(() => s.kill());
    }
  });

  // Cancellation of wait runs and execs: exec.test.mjs, which looks for
  // the processes and the cgroup on the host (list_containers hides wait
  // runs, so a test that listed them could not fail).

  test('policy: mounts under the allowlist only, symlinks resolved first, flag-like values refused', T, async (t) => {
    if (nativeReason) return t.skip(nativeReason);
    fs.writeFileSync(path.join(allowed, 'hello.txt'), 'hi from the host\n');
    fs.writeFileSync(path.join(outside, 'secret.txt'), 'secret\n');
    fs.symlinkSync(outside, path.join(allowed, 'escape'));
    const s = await open();
    try {
      const r = await run(s, ['cat', '/data/hello.txt'], { mounts: [{ source: allowed, target: '/data', readonly: true }] });
      assert.equal(r.stdout, 'hi from the host\n');
      refused(await call(s, 'run_container', {
        image: 'host', command: ['true'], wait: true, mounts: [{ source: outside, target: '/x' }],
      }), /not under CONTAINER_MCP_ALLOWED_MOUNTS/);
      refused(await call(s, 'run_container', {
        image: 'host', command: ['true'], wait: true, mounts: [{ source: path.join(allowed, 'escape'), target: '/x' }],
      }), /resolves to/, /CONTAINER_MCP_ALLOWED_MOUNTS/);
      refused(await call(s, 'run_container', { image: '--privileged', command: ['true'], wait: true }), /starts with '-'/);
      refused(await call(s, 'run_container', { image: 'host', name: '-rf', command: ['true'] }), /name/);
      // A flag-like command is just argv inside the sandbox, never a host flag.
      const dash = await call(s, 'run_container', { image: 'host', command: ['--version'], wait: true });
      assert.ok(dash.isError || dash.structuredContent.exitCode !== 0);
    } finally {
      await s.close().finally(() => s.kill());
    }
  });

  test('copy_files: host to container and back, symlinks never followed, host side allowlisted', T, async (t) => {
    if (nativeReason) return t.skip(nativeReason);
    const src = path.join(allowed, 'proj');
    fs.mkdirSync(path.join(src, 'sub'), { recursive: true });
    fs.writeFileSync(path.join(src, 'main.py'), 'print("copied in")\n');
    fs.writeFileSync(path.join(src, 'sub', 'data.txt'), 'data\n');
    fs.symlinkSync('/etc/hostname', path.join(src, 'host-link'));
    const s = await open();
    try {
      const c = ok(await call(s, 'run_container', { image: 'host', name: 'copier', command: ['sleep', '300'] }));
      const inn = ok(await call(s, 'copy_files', {
        container: 'copier', direction: 'to_container', source: src, destination: '/workspace',
      }));
      assert.equal(inn.files, 2);
      const ran = ok(await call(s, 'exec_in_container', {
        container: 'copier', command: ['sh', '-c', 'python3 /workspace/proj/main.py; readlink /workspace/proj/host-link'],
      }));
      assert.equal(ran.stdout, 'copied in\n/etc/hostname\n');
      // The container makes a file and a symlink to the host's /etc/passwd.
      ok(await call(s, 'exec_in_container', {
        container: 'copier', command: ['sh', '-c', 'mkdir /workspace/out && echo result > /workspace/out/r.txt && ln -s /etc/passwd /workspace/out/pw'],
      }));
      const back = ok(await call(s, 'copy_files', {
        container: 'copier', direction: 'from_container', source: '/workspace/out', destination: path.join(allowed, 'fetched'),
      }));
      assert.equal(back.files, 1);
      assert.equal(fs.readFileSync(path.join(allowed, 'fetched', 'r.txt'), 'utf8'), 'result\n');
      assert.ok(fs.lstatSync(path.join(allowed, 'fetched', 'pw')).isSymbolicLink(), 'a symlink stays a symlink');
      refused(await call(s, 'copy_files', {
        container: 'copier', direction: 'from_container', source: '/workspace/out', destination: path.join(outside, 'x'),
      }), /CONTAINER_MCP_ALLOWED_MOUNTS/);
      refused(await call(s, 'copy_files', {
        container: 'copier', direction: 'to_container', source: '/etc/shadow', destination: '/workspace',
      }), /CONTAINER_MCP_ALLOWED_MOUNTS/);
      ok(await call(s, 'remove_container', { container: c.id, force: true }));
    } finally {
      await s.close().finally(() => s.kill());
    }
  });

  test('restart: sandboxes of a server killed with SIGKILL are reaped by the next one, or adopted', T, async (t) => {
    if (nativeReason) return t.skip(nativeReason);
    const gone = async (pid) => !fs.existsSync(`/proc/${pid}`) ||
      /State:\s+Z/.test(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    for (const mode of ['reap', 'adopt']) {
      const env = { CONTAINER_MCP_ORPHANS: mode };
      const a = await open(env);
      const c = ok(await call(a, 'run_container', { image: 'host', name: `orphan-${mode}`, command: ['sleep', '300'] }));
      const pid = ok(await call(a, 'inspect_container', { container: c.id })).init.pid;
      assert.ok(pid > 0);
      a.kill(); // SIGKILL: no chance to clean up
      await new Promise((res) => a.proc.once('exit', res));
      // Sandboxes left by a dead server belong to no session now: the next
      // server lists them only when its sessions share every container.
      const b = await open({ ...env, CONTAINER_MCP_SHARE_CONTAINERS: '1' });
      try {
        const all = ok(await call(b, 'list_containers', { all: true })).containers;
        if (mode === 'reap') {
          assert.equal(all.find((x) => x.id === c.id), undefined, 'reaped');
          assert.ok(await gone(pid), `init ${pid} of a reaped sandbox still runs`);
        } else {
          assert.equal(all.find((x) => x.id === c.id)?.state, 'running', 'adopted');
          const ex = ok(await call(b, 'exec_in_container', { container: c.id, command: ['true'] }));
          assert.equal(ex.exitCode, 0);
          ok(await call(b, 'remove_container', { container: c.id, force: true }));
          assert.ok(await gone(pid), `init ${pid} still runs after remove`);
        }
      } finally {
        await b.close().finally(() => b.kill());
      }
    }
  });

  test('a published port answers on 127.0.0.1 of the host; without network: true, ports are refused', T, async (t) => {
    if (nativeReason || netReason) return t.skip(nativeReason || netReason);
    const s = await open();
    try {
      refused(await call(s, 'run_container', {
        image: 'host', command: ['true'], ports: [{ containerPort: 8000 }],
      }), /network/);
      const c = ok(await call(s, 'run_container', {
        image: 'host', network: true, ports: [{ containerPort: 8000 }],
        command: ['python3', '-m', 'http.server', '8000', '--bind', '0.0.0.0', '--directory', '/tmp'],
      }));
      const port = c.ports?.[0]?.hostPort;
      assert.ok(port > 0, JSON.stringify(c));
      assert.equal(c.ports[0].hostIp, '127.0.0.1');
      // inspect tells the ports asked for, with the host port in effect
      const insp = ok(await call(s, 'inspect_container', { container: c.id }));
      assert.equal(insp.network, true);
      assert.deepEqual(insp.ports, [{ host_ip: '127.0.0.1', host_port: port, container_port: 8000, protocol: 'tcp' }]);
      // The server inside needs a moment to listen: retry until a deadline.
      let res = null;
      const deadline = Date.now() + 15000;
      while (!res && Date.now() < deadline) {
        res = await fetch(`http://127.0.0.1:${port}/`, { signal: AbortSignal.timeout(3000) }).catch(() => null);
      }
      assert.ok(res, 'no answer on the published port');
      assert.equal(res.status, 200);
      ok(await call(s, 'remove_container', { container: c.id, force: true }));
    } finally {
      await s.close().finally(() => s.kill());
    }
  });

  test('read-only mode and the container cap refuse with what to change', T, async (t) => {
    if (nativeReason) return t.skip(nativeReason);
    const ro = await open({ CONTAINER_MCP_READONLY: '1' });
    try {
      refused(await call(ro, 'run_container', { image: 'host', command: ['true'], wait: true }), /CONTAINER_MCP_READONLY/);
      ok(await call(ro, 'list_containers', {}));
    } finally {
      await ro.close().finally(() => ro.kill());
    }
    const one = await open({ CONTAINER_MCP_MAX_CONTAINERS: '1' });
    try {
      const a = ok(await call(one, 'run_container', { image: 'host', command: ['sleep', '300'] }));
      refused(await call(one, 'run_container', { image: 'host', command: ['sleep', '300'] }),
        /CONTAINER_MCP_MAX_CONTAINERS/);
      ok(await call(one, 'remove_container', { container: a.id, force: true }));
    } finally {
      await one.close().finally(() => one.kill());
    }
  });
});

// The same runtime with the server as an unprivileged user: a user
// namespace maps it to root inside, and the sandbox still cannot see or
// touch the host.
describe('containers with the server unprivileged (nobody)', () => {
  let skipReason = null;
  before(async () => {
    if (nativeReason) { skipReason = nativeReason; return; }
    if (process.getuid() !== 0) { skipReason = 'needs root to become nobody'; return; }
    const s = await open({}, 'nobody');
    try {
      const st = ok(await call(s, 'system_status', {}));
      const native = st.backends.find((b) => b.name === 'native');
      if (!native.available) skipReason = `native runtime unavailable to an unprivileged user: ${native.reason}`;
      else assert.equal(native.details.rootless, true);
    } finally {
      await s.close().finally(() => s.kill());
    }
  });

  test('the aha, exec and containment as nobody', T, async (t) => {
    if (skipReason) return t.skip(skipReason);
    const s = await open({}, 'nobody');
    try {
      const r = await run(s, ['python3', '-c', 'import os; print(sum(range(1000)), os.getuid())']);
      assert.equal(r.stdout, '499500 0\n', 'root inside the user namespace');
      const procs = await run(s, ['sh', '-c', 'ls /proc | grep -c "^[0-9]"']);
      assert.ok(Number(procs.stdout) <= 4, `sandbox sees ${procs.stdout.trim()} processes`);
      const write = await run(s, ['sh', '-c', 'touch /usr/evil || echo refused']);
      assert.match(write.stdout, /refused/);
      const mount = await run(s, ['sh', '-c', 'mkdir -p /tmp/m && mount -t tmpfs none /tmp/m && echo mounted']);
      assert.doesNotMatch(mount.stdout, /mounted/);
      const c = ok(await call(s, 'run_container', { image: 'host', command: ['sleep', '300'] }));
      const ex = ok(await call(s, 'exec_in_container', { container: c.id, command: ['id', '-u'] }));
      assert.equal(ex.stdout, '0\n');
      ok(await call(s, 'remove_container', { container: c.id, force: true }));
      assert.deepEqual(ok(await call(s, 'list_containers', { all: true })).containers, []);
    } finally {
      await s.close().finally(() => s.kill());
    }
  });
});
