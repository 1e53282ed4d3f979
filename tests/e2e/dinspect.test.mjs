// dinspect (issue 11) and the codex tools' container allowlist
// (--allow-container, CONTAINER_MCP_ALLOWED_CONTAINERS), through the SDK
// client.
//
// Every field of a running native sandbox's view is checked against the
// kernel's own view, read here by the test from the host's /proc and the
// cgroup files: the capability mask, no_new_privs and seccomp of the
// sandbox's init (/proc/PID/status), its namespaces against the host's
// (/proc/PID/ns), the ro/rw of its mounts and root (/proc/PID/mountinfo,
// and by effect: a write that works, one that fails), the cgroup's limits,
// the interfaces of its network namespace, the published port's listening
// socket on the host's 127.0.0.1 (/proc/net/tcp).  A record made to lie
// shows that the view is the kernel's, not the record's.  The view stays
// compact: under 1,024 bytes of JSON for a sandbox with two mounts and a
// port.
//
// The allowlist: an unmanaged container (a record without the managed
// label, as managed.test.mjs makes one) is refused unless it is named by
// name, id or an id prefix of at least 12 characters, by the flag or the
// variable; CONTAINER_MCP_ALLOW_UNMANAGED alone does not open it; another
// server's (so another session's) managed container stays "no container";
// an allowlisted name is reserved; `serve --allow-container -x` is refused.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { eventually, httpClient, runCli, startHttp, stdioClient, tmpDir } from './lib.mjs';
import { AS_NOBODY, alive, call, cgroupLimits, nativeBackend, ok, refused } from './tools.mjs';

const T = { timeout: 120000 };
const state = tmpDir('cmcp-di-state-');
const allowed = tmpDir('cmcp-di-allowed-');
fs.chmodSync(allowed, 0o777); // the sandbox's root (an unprivileged host id) writes here
const nobodyState = tmpDir('cmcp-di-nobody-');
fs.chownSync(nobodyState, 65534, 65534);
for (const d of ['ro', 'rw']) fs.mkdirSync(path.join(allowed, d), { mode: 0o777 });
fs.chmodSync(path.join(allowed, 'rw'), 0o777);
const ENV = { CONTAINER_MCP_STATE_DIR: state, CONTAINER_MCP_ALLOWED_MOUNTS: allowed };
const open = (env = {}, args = []) => stdioClient({ args: ['serve', ...args], env: { ...ENV, ...env } });
const openNobody = () => stdioClient({
  args: ['serve'],
  env: { ...ENV, CONTAINER_MCP_STATE_DIR: nobodyState, HOME: '/nonexistent' },
  wrap: AS_NOBODY,
});
const COMPACT = 1024; // bytes of JSON, the bound README promises

// ---------------------------------------------------- the kernel's view --

// Capability numbers as linux/capability.h has them.
const CAPS = ['CHOWN', 'DAC_OVERRIDE', 'DAC_READ_SEARCH', 'FOWNER', 'FSETID', 'KILL', 'SETGID', 'SETUID', 'SETPCAP',
  'LINUX_IMMUTABLE', 'NET_BIND_SERVICE', 'NET_BROADCAST', 'NET_ADMIN', 'NET_RAW', 'IPC_LOCK', 'IPC_OWNER',
  'SYS_MODULE', 'SYS_RAWIO', 'SYS_CHROOT', 'SYS_PTRACE', 'SYS_PACCT', 'SYS_ADMIN', 'SYS_BOOT', 'SYS_NICE',
  'SYS_RESOURCE', 'SYS_TIME', 'SYS_TTY_CONFIG', 'MKNOD', 'LEASE', 'AUDIT_WRITE', 'AUDIT_CONTROL', 'SETFCAP',
  'MAC_OVERRIDE', 'MAC_ADMIN', 'SYSLOG', 'WAKE_ALARM', 'BLOCK_SUSPEND', 'AUDIT_READ', 'PERFMON', 'BPF',
  'CHECKPOINT_RESTORE'];
const DOCKER_DEFAULT = ['CHOWN', 'DAC_OVERRIDE', 'FSETID', 'FOWNER', 'MKNOD', 'NET_RAW', 'SETGID', 'SETUID', 'SETFCAP',
  'SETPCAP', 'NET_BIND_SERVICE', 'SYS_CHROOT', 'KILL', 'AUDIT_WRITE'];
const NS = ['user', 'mnt', 'uts', 'ipc', 'net', 'pid', 'cgroup'];

const statusOf = (pid) => Object.fromEntries(fs.readFileSync(`/proc/${pid}/status`, 'utf8').split('\n')
  .map((l) => /^([^:]+):\s*(.*)$/.exec(l)).filter(Boolean).map((m) => [m[1], m[2]]));
const capNames = (hex) => CAPS.filter((_, i) => (BigInt(`0x${hex}`) >> BigInt(i)) & 1n);

function namespacesOf(pid) {
  const own = [], host = [];
  for (const n of NS) (fs.readlinkSync(`/proc/${pid}/ns/${n}`) === fs.readlinkSync(`/proc/self/ns/${n}`) ? host : own).push(n);
  return { own, host };
}

// mount point -> 'ro' | 'rw' of the topmost mount there.
function mountModes(pid) {
  const m = new Map();
  for (const line of fs.readFileSync(`/proc/${pid}/mountinfo`, 'utf8').split('\n')) {
    const f = line.split(' ');
    if (f.length < 6) continue;
    const target = f[4].replace(/\\([0-7]{3})/g, (_, o) => String.fromCharCode(parseInt(o, 8)));
    m.set(target, f[5].split(',')[0] === 'ro' ? 'ro' : 'rw');
  }
  return m;
}

const interfacesOf = (pid) => fs.readFileSync(`/proc/${pid}/net/dev`, 'utf8').split('\n').slice(2)
  .map((l) => l.split(':')[0].trim()).filter(Boolean);

// A socket listening on 127.0.0.1:port in the host's network namespace.
const listensOnLoopback = (port) => fs.readFileSync('/proc/net/tcp', 'utf8').split('\n')
  .some((l) => l.trim().split(/\s+/)[1] === `0100007F:${port.toString(16).toUpperCase().padStart(4, '0')}` &&
    l.trim().split(/\s+/)[3] === '0A');

const pidsMax = (insp) => {
  const dir = insp.cgroup.mode === 'v2' ? Object.values(insp.cgroup.dirs)[0] : insp.cgroup.dirs.pids;
  const v = fs.readFileSync(path.join(dir, 'pids.max'), 'utf8').trim();
  return v === 'max' ? null : Number(v);
};

// The fields the kernel decides, checked against it for the init `pid`.
function assertKernelView(v, pid) {
  const st = statusOf(pid);
  assert.equal(v.source, 'kernel');
  assert.deepEqual(v.caps.kept, capNames(st.CapEff), `CapEff ${st.CapEff}`);
  assert.deepEqual(v.caps.kept, capNames(st.CapBnd), 'the bounding set is the effective one');
  assert.deepEqual(v.caps.dropped, CAPS.filter((c) => DOCKER_DEFAULT.includes(c) && !v.caps.kept.includes(c)));
  assert.equal(v.no_new_privs, st.NoNewPrivs === '1');
  assert.equal(v.seccomp, { 0: 'off', 1: 'strict', 2: 'filter' }[st.Seccomp]);
  assert.deepEqual(v.namespaces, namespacesOf(pid));
  const map = fs.readFileSync(`/proc/${pid}/uid_map`, 'utf8').trim().split(/\s+/).map(Number);
  assert.equal(v.host_uid, map[1], 'root in the sandbox is this host uid');
  assert.equal(v.readonly_root, mountModes(pid).get('/') === 'ro');
  const modes = mountModes(pid);
  for (const m of v.mounts) assert.equal(m.mode, modes.get(m.target), `${m.target}'s mode`);
  assert.equal(v.privileged, false);
  assert.equal(v.userns, true);
}

let nativeReason = null;
let cgroupReason = null;
let netReason = null;

before(async () => {
  ({ reason: nativeReason, cgroupReason, netReason } = await nativeBackend(open));
});

after(() => {
  for (const d of [state, allowed, nobodyState]) fs.rmSync(d, { recursive: true, force: true });
});

// A sandbox with everything dinspect reports: limits, a ro and a rw mount,
// network and a published port (when the machine has a network helper), a
// read-only root.
const RICH = (network) => ({
  image: 'host', command: ['sleep', '300'], cpus: 0.5, memory: '256m', readonlyRootfs: true,
  mounts: [{ source: path.join(allowed, 'ro'), target: '/ro', readonly: true }, { source: path.join(allowed, 'rw'), target: '/rw' }],
  ...(network ? { network: true, ports: [{ containerPort: 8000 }] } : {}),
});

describe('dinspect of a native sandbox', () => {
  test('limits, mounts, port, network, read-only root: each field as the kernel has it; compact', T, async (t) => {
    if (nativeReason) return t.skip(nativeReason);
    const s = await open();
    try {
      const c = ok(await call(s, 'run_container', RICH(!netReason)));
      const insp = ok(await call(s, 'inspect_container', { container: c.id }));
      const pid = insp.init.pid;
      const r = await call(s, 'dinspect', { container: c.id });
      const v = ok(r);
      const size = JSON.stringify(v).length;
      assert.ok(size < COMPACT, `${size} bytes: ${JSON.stringify(v)}`);
      assert.ok(r.content[0].text.length < COMPACT, 'the text the model reads is as compact');
      assert.deepEqual([v.id, v.container, v.runtime, v.state], [c.id, insp.name, 'native', 'running']);
      assertKernelView(v, pid);
      assert.deepEqual(v.namespaces, { own: NS, host: [] }, 'a sandbox shares no namespace with the host');
      assert.deepEqual(v.caps.dropped, ['NET_RAW', 'MKNOD', 'AUDIT_WRITE']);
      assert.equal(v.no_new_privs, true);
      assert.equal(v.seccomp, 'filter');
      assert.deepEqual(v.devices, []);

      // mounts and root, by effect too
      assert.deepEqual(v.mounts.map((m) => [m.target, m.source, m.mode]),
        [['/ro', path.join(allowed, 'ro'), 'ro'], ['/rw', path.join(allowed, 'rw'), 'rw']]);
      assert.equal(v.readonly_root, true);
      const w = ok(await call(s, 'exec_in_container', {
        container: c.id, command: ['sh', '-c', 'touch /rw/x; echo $?; touch /ro/y; echo $?; touch /probe; echo $?'],
      }));
      const [rw, ro, root] = w.stdout.trim().split('\n').map(Number);
      assert.equal(rw, 0, 'the rw mount takes a write');
      assert.ok(fs.existsSync(path.join(allowed, 'rw', 'x')), 'the write reached the host');
      assert.notEqual(ro, 0, 'the ro mount took a write');
      assert.equal(fs.existsSync(path.join(allowed, 'ro', 'y')), false);
      assert.notEqual(root, 0, 'the read-only root took a write');

      // limits: the cgroup's
      if (!cgroupReason) {
        const k = cgroupLimits(insp);
        assert.deepEqual([v.limits.memory, v.limits.cpus, v.limits.pids], [k.memory, k.cpus, pidsMax(insp)]);
        assert.deepEqual([v.limits.memory, v.limits.cpus, v.limits.pids], [256 * 2 ** 20, 0.5, 512]);
        assert.match(v.limits.enforced_by, /^cgroup v[12]$/);
      }
      assert.equal(v.ulimits.nofile, (() => {
        const l = /^Max open files\s+(\S+)\s+(\S+)/m.exec(fs.readFileSync(`/proc/${pid}/limits`, 'utf8'));
        return `${l[1]}:${l[2]}`;
      })());

      // network: the namespace's interfaces; the port's real listener
      if (!netReason) {
        assert.ok(interfacesOf(pid).some((i) => i !== 'lo'), `interfaces ${interfacesOf(pid)}`);
        assert.match(v.network.mode, /^(pasta|slirp4netns)$/);
        const port = c.ports[0].hostPort;
        assert.deepEqual(v.network.ports, [`127.0.0.1:${port}->8000/tcp`]);
        assert.ok(listensOnLoopback(port), `nothing listens on 127.0.0.1:${port}`);
      }
      const off = ok(await call(s, 'run_container', { image: 'host', command: ['sleep', '300'] }));
      const offPid = ok(await call(s, 'inspect_container', { container: off.id })).init.pid;
      const vo = ok(await call(s, 'dinspect', { container: off.id }));
      assert.deepEqual(interfacesOf(offPid), ['lo']);
      assert.deepEqual(vo.network, { mode: 'none', ports: [] });
      assert.equal(vo.readonly_root, false);
      assert.deepEqual(vo.mounts, []);
      assertKernelView(vo, offPid);
      if (!cgroupReason) {
        const k = cgroupLimits(ok(await call(s, 'inspect_container', { container: off.id })));
        assert.deepEqual([vo.limits.memory, vo.limits.cpus], [k.memory, k.cpus > 0 ? k.cpus : null], 'the defaults');
      }

      // stopped: the record, said so
      ok(await call(s, 'stop_container', { container: off.id, timeout: 0 }));
      await eventually(() => !alive(offPid), 20000, 'the stopped sandbox\'s init to go');
      const vs = ok(await call(s, 'dinspect', { container: off.id }));
      assert.equal(vs.source, 'record');
      assert.notEqual(vs.state, 'running');
      for (const id of [c.id, off.id]) ok(await call(s, 'remove_container', { container: id, force: true }));
    } finally {
      for (const f of fs.readdirSync(path.join(allowed, 'rw'))) fs.rmSync(path.join(allowed, 'rw', f), { force: true });
      await s.close().finally(() => s.kill());
    }
  });

  test('a record that lies: the view is still the kernel\'s', T, async (t) => {
    if (nativeReason) return t.skip(nativeReason);
    const s = await open();
    try {
      const c = ok(await call(s, 'run_container', RICH(false)));
      const insp = ok(await call(s, 'inspect_container', { container: c.id }));
      const file = path.join(state, 'containers', c.id, 'state.json');
      const rec = JSON.parse(fs.readFileSync(file, 'utf8'));
      rec.readonly_rootfs = false;
      rec.mounts = rec.mounts.map((m) => ({ ...m, readonly: !m.readonly }));
      rec.limits = { ...rec.limits, memory_bytes: 1 << 30, cpus: 2, pids: 7 };
      rec.network = true;
      fs.writeFileSync(`${file}.tmp`, JSON.stringify(rec), { mode: 0o600 });
      fs.renameSync(`${file}.tmp`, file);
      const v = ok(await call(s, 'dinspect', { container: c.id }));
      assertKernelView(v, insp.init.pid);
      assert.equal(v.readonly_root, true);
      assert.deepEqual(v.mounts.map((m) => m.mode), ['ro', 'rw']);
      assert.equal(v.network.mode, 'none');
      if (!cgroupReason) assert.deepEqual([v.limits.memory, v.limits.cpus, v.limits.pids], [256 * 2 ** 20, 0.5, 512]);
      ok(await call(s, 'remove_container', { container: c.id, force: true }));
    } finally {
      await s.close().finally(() => s.kill());
    }
  });

  test('a server run as nobody: namespaces through the init, the rest from /proc as root sees it', T, async (t) => {
    if (nativeReason) return t.skip(nativeReason);
    const s = await openNobody();
    try {
      const c = ok(await call(s, 'run_container', { ...RICH(false), readonlyRootfs: false }));
      const pid = ok(await call(s, 'inspect_container', { container: c.id })).init.pid;
      const v = ok(await call(s, 'dinspect', { container: c.id }));
      assertKernelView(v, pid);
      assert.equal(v.host_uid, 65534, 'a rootless sandbox\'s root is the server\'s own uid');
      assert.deepEqual(v.namespaces, { own: NS, host: [] });
      ok(await call(s, 'remove_container', { container: c.id, force: true }));
    } finally {
      await s.close().finally(() => s.kill());
    }
  });
});

// ----------------------------------------------------------- allowlist --

// A running container container-mcp did not make: a sandbox whose record
// lost its managed label (the server that made it stays open, so it keeps
// running).
async function unmanaged(s, name) {
  const c = ok(await call(s, 'run_container', { image: 'host', name, command: ['sleep', '300'] }));
  const file = path.join(state, 'containers', c.id, 'state.json');
  const rec = JSON.parse(fs.readFileSync(file, 'utf8'));
  delete rec.labels['dev.container-mcp.managed'];
  fs.writeFileSync(`${file}.tmp`, JSON.stringify(rec), { mode: 0o600 });
  fs.renameSync(`${file}.tmp`, file);
  return c.id;
}

describe('the codex tools\' allowlist', () => {
  test('unmanaged: refused naming --allow-container unless listed by name, id or 12-char prefix (flag or env)', T, async (t) => {
    if (nativeReason) return t.skip(nativeReason);
    const maker = await open();
    const servers = [];
    const server = async (env, args) => { const x = await open(env, args); servers.push(x); return x; };
    try {
      const id = await unmanaged(maker, 'di-legacy');
      const notListed = [/^container "di-legacy" was not created by container-mcp and is not on the allowlist/,
        /--allow-container di-legacy \(or CONTAINER_MCP_ALLOWED_CONTAINERS\)/];

      // not listed: refused, also with CONTAINER_MCP_ALLOW_UNMANAGED=1, also
      // when another container is listed, or a prefix shorter than 12
      for (const [env, args] of [[{}, []], [{ CONTAINER_MCP_ALLOW_UNMANAGED: '1' }, []],
        [{}, ['--allow-container', 'other']], [{}, ['--allow-container', id.slice(0, 11)]]]) {
        const s = await server(env, args);
        for (const ref of ['di-legacy', id]) refused(await call(s, 'dinspect', { container: ref }), ...notListed.slice(ref === id ? 1 : 0));
      }
      // ALLOW_UNMANAGED does open the other tools: the refusal above is the allowlist's
      const loose = servers[1];
      assert.equal(ok(await call(loose, 'inspect_container', { container: id })).id, id);

      // listed: by name, id, 12-char prefix, with the flag or the variable
      for (const [env, args] of [[{}, ['--allow-container', 'di-legacy']], [{}, ['--allow-container', id]],
        [{}, ['--allow-container', id.slice(0, 12)]], [{ CONTAINER_MCP_ALLOWED_CONTAINERS: 'x1, di-legacy' }, []],
        [{ CONTAINER_MCP_ALLOWED_CONTAINERS: id.slice(0, 12) }, []]]) {
        const s = await server(env, args);
        const v = ok(await call(s, 'dinspect', { container: 'di-legacy' }));
        assert.deepEqual([v.id, v.source], [id, 'kernel'], JSON.stringify({ env, args }));
        assert.equal(ok(await call(s, 'dinspect', { container: id })).id, id);
        const pol = ok(await call(s, 'system_status', {})).policy;
        assert.deepEqual(pol.allowedContainers, env.CONTAINER_MCP_ALLOWED_CONTAINERS?.split(/[, ]+/) ?? [args[1]]);
        // the allowlist opens the codex tools only, not the others
        refused(await call(s, 'inspect_container', { container: id }), /was not created by container-mcp/);
      }
      // flag and env together: both lists
      const both = await server({ CONTAINER_MCP_ALLOWED_CONTAINERS: 'a1' }, ['--allow-container', 'b2']);
      assert.deepEqual(ok(await call(both, 'system_status', {})).policy.allowedContainers.sort(), ['a1', 'b2']);
      ok(await call(loose, 'remove_container', { container: id, force: true }));
    } finally {
      for (const s of servers) await s.close().finally(() => s.kill());
      await maker.close().finally(() => maker.kill());
    }
  });

  test('another session\'s managed container stays invisible; an allowlisted name is reserved', T, async (t) => {
    if (nativeReason) return t.skip(nativeReason);
    const a = await open();
    let b;
    try {
      const c = ok(await call(a, 'run_container', { image: 'host', name: 'di-theirs', command: ['sleep', '300'] }));
      assert.equal(ok(await call(a, 'dinspect', { container: 'di-theirs' })).id, c.id, 'its own session sees it');
      // A second server owns none of the first's containers (its owner key
      // is its own), even with another container allowlisted.
      b = await open({}, ['--allow-container', 'di-reserved']);
      for (const ref of ['di-theirs', c.id, c.id.slice(0, 12)])
        refused(await call(b, 'dinspect', { container: ref }), new RegExp(`^no container "${ref}"`));
      refused(await call(b, 'run_container', { image: 'host', name: 'di-reserved', command: ['true'], wait: true }),
        /name "di-reserved" is reserved: --allow-container/);
      ok(await call(a, 'remove_container', { container: c.id, force: true }));
    } finally {
      if (b) await b.close().finally(() => b.kill());
      await a.close().finally(() => a.kill());
    }
  });

  test('two sessions of one HTTP server: each sees only its own through dinspect', T, async (t) => {
    if (nativeReason) return t.skip(nativeReason);
    const srv = await startHttp({ env: ENV, args: ['--allow-container', 'di-other'], toolsets: false });
    let a, b;
    try {
      a = await httpClient(srv.url);
      b = await httpClient(srv.url);
      const c = ok(await call(a, 'run_container', { image: 'host', name: 'di-mine', command: ['sleep', '300'] }));
      assert.equal(ok(await call(a, 'dinspect', { container: 'di-mine' })).id, c.id);
      for (const ref of ['di-mine', c.id, c.id.slice(0, 12)])
        refused(await call(b, 'dinspect', { container: ref }), new RegExp(`^no container "${ref}"`));
      ok(await call(a, 'remove_container', { container: c.id, force: true }));
    } finally {
      if (b) await b.close();
      if (a) await a.close();
      await srv.stop().finally(() => srv.kill());
    }
  });

  test('serve refuses an allowlist entry that cannot name a container', T, async () => {
    for (const bad of ['-x', '--privileged', '../etc']) {
      const r = await runCli(['serve', '--allow-container', bad], { env: ENV });
      assert.notEqual(r.code, 0, `serve --allow-container ${bad} started`);
      assert.match(r.stderr, new RegExp(`--allow-container "${bad.replace(/[.]/g, '\\.')}": expected a container id or name`));
    }
    const r = await runCli(['serve'], { env: { ...ENV, CONTAINER_MCP_ALLOWED_CONTAINERS: 'ok,-x' } });
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /CONTAINER_MCP_ALLOWED_CONTAINERS: "-x" is not a container id or name/);
  });
});
