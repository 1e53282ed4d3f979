// What the tool tests share: calling a tool through an SDK client, asserting
// a result or a refusal, and asking system_status what the native runtime
// can do here (to skip, saying why, what this machine cannot run).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';

import { tmpDir } from './lib.mjs';

// setpriv's arguments that run the server as nobody.
export const AS_NOBODY = ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups', '--'];

export const call = (s, name, args, opts) => s.client.callTool({ name, arguments: args }, undefined, opts);

export function ok(r) {
  assert.notEqual(r.isError, true, r.content?.[0]?.text);
  return r.structuredContent;
}

export function refused(r, ...patterns) {
  assert.equal(r.isError, true, `expected a refusal, got ${JSON.stringify(r.structuredContent)}`);
  for (const p of patterns) assert.match(r.content[0].text, p);
  return r.content[0].text;
}

// The native backend's entry of system_status, from a server `open` starts:
// { reason: why it cannot run here or null, cgroupReason: why it has no
// cgroup limits here or null, netReason: why `network: true` cannot work
// here (no user-mode network stack) or null, details }.
export async function nativeBackend(open) {
  const s = await open();
  try {
    const native = ok(await call(s, 'system_status', {})).backends.find((b) => b.name === 'native');
    const { details } = native;
    return {
      reason: native.available ? null : `native runtime unavailable here: ${native.reason}`,
      cgroupReason: native.available && (!details.cgroup || details.cgroup === 'none')
        ? `no cgroup limits on this machine (${JSON.stringify(details)})` : null,
      netReason: native.available && (!details.network_stack || details.network_stack === 'none')
        ? 'neither pasta nor slirp4netns is installed (apt-get install passt slirp4netns)' : null,
      details,
    };
  } finally {
    await s.close().finally(() => s.kill());
  }
}

// A native container's record rewritten with its managed label changed
// (`value` undefined: taken out), atomically as the server writes it: how a
// test makes a container container-mcp did not create (its session label
// stays, so only the managed check can refuse it).
export function relabelManaged(state, id, value) {
  const file = path.join(state, 'containers', id, 'state.json');
  const rec = JSON.parse(fs.readFileSync(file, 'utf8'));
  const MANAGED = 'dev.container-mcp.managed';
  assert.equal(rec.labels?.[MANAGED], 'true', `the record as the server wrote it: ${JSON.stringify(rec.labels)}`);
  if (value === undefined) delete rec.labels[MANAGED];
  else rec.labels[MANAGED] = value;
  fs.writeFileSync(`${file}.tmp`, JSON.stringify(rec), { mode: 0o600 });
  fs.renameSync(`${file}.tmp`, file);
}

// ------------------------------------------------- real effects on the host --

// Is `pid` a live process (not gone, not a zombie)?
export function alive(pid) {
  try {
    return !/^State:\s+Z/m.test(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return false;
  }
}

// The host's processes whose command line holds `marker` as one argument:
// how a test finds what a sandbox runs without asking the server.
export function procsWith(marker) {
  const found = [];
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let argv;
    try {
      argv = fs.readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0');
    } catch {
      continue; // gone meanwhile
    }
    if (argv.includes(marker) && alive(name)) found.push(Number(name));
  }
  return found;
}

// The cgroups of `pid` on the host that are not the test's own (the
// sandbox's), by controller ('' for v2): /sys/fs/cgroup/<controllers>/<path>
// on v1, the v2 mount's <path> on v2.
function ownCgroups(pid) {
  const parse = (p) => {
    const m = new Map();
    for (const line of fs.readFileSync(`/proc/${p}/cgroup`, 'utf8').split('\n')) {
      const [, ctl, rel] = /^\d+:([^:]*):(.*)$/.exec(line) || [];
      if (rel !== undefined) m.set(ctl, rel);
    }
    return m;
  };
  const mine = parse(process.pid);
  // a hybrid host mounts v2 at /sys/fs/cgroup/unified
  const v2 = fs.existsSync('/sys/fs/cgroup/cgroup.controllers') ? '/sys/fs/cgroup' : '/sys/fs/cgroup/unified';
  const own = new Map();
  for (const [ctl, rel] of parse(pid)) {
    if (rel === mine.get(ctl) || rel === '/') continue;
    const dir = path.join(ctl === '' ? v2 : `/sys/fs/cgroup/${ctl.replace(/^name=/, '')}`, rel);
    if (fs.existsSync(dir)) own.set(ctl, dir);
  }
  return own;
}

export const ownCgroupDirs = (pid) => [...ownCgroups(pid).values()];

// The cgroup of `pid` as inspect_container describes one ({mode, dirs}),
// for cgroupLimits.
export function cgroupOf(pid) {
  const own = ownCgroups(pid);
  if (own.has('') && fs.existsSync('/sys/fs/cgroup/cgroup.controllers')) return { mode: 'v2', dirs: { memory: own.get(''), cpu: own.get('') } };
  const find = (c) => [...own].find(([ctl]) => ctl.split(',').includes(c))?.[1];
  return { mode: 'v1', dirs: { memory: find('memory'), cpu: find('cpu') } };
}

// The memory and cpu limits the kernel holds for a container, read from the
// cgroup dirs inspect_container names.
export function cgroupLimits(insp) {
  const { mode, dirs } = insp.cgroup;
  const read = (dir, file) => fs.readFileSync(path.join(dir, file), 'utf8').trim();
  if (mode === 'v2' || mode === 'unified') {
    const dir = dirs.memory ?? dirs.cpu ?? Object.values(dirs)[0];
    const [quota, period] = read(dirs.cpu ?? dir, 'cpu.max').split(' ');
    return { memory: Number(read(dir, 'memory.max')), cpus: Number(quota) / Number(period) };
  }
  return {
    memory: Number(read(dirs.memory, 'memory.limit_in_bytes')),
    cpus: Number(read(dirs.cpu, 'cpu.cfs_quota_us')) / Number(read(dirs.cpu, 'cpu.cfs_period_us')),
  };
}

// A directory image of busybox-static alone (no bash), for the sh
// fallbacks: `tools` as links to it, the directories 0755 so a server run
// as nobody can use it.  { images, rootfs }, or null without
// /usr/bin/busybox (apt-get install busybox-static).
export function busyboxImage(prefix, tools = ['sh', 'sleep', 'echo', 'cat']) {
  if (!fs.existsSync('/usr/bin/busybox')) return null;
  const images = tmpDir(prefix);
  const rootfs = path.join(images, 'tiny');
  fs.mkdirSync(path.join(rootfs, 'bin'), { recursive: true });
  fs.copyFileSync('/usr/bin/busybox', path.join(rootfs, 'bin', 'busybox'));
  fs.chmodSync(path.join(rootfs, 'bin', 'busybox'), 0o755);
  for (const l of tools) fs.symlinkSync('busybox', path.join(rootfs, 'bin', l));
  for (const d of [images, rootfs]) fs.chmodSync(d, 0o755);
  return { images, rootfs };
}

// A host directory anyone may write (a root server's sandbox root is an
// unprivileged host id), holding secret.txt: what a path escaping the
// container would reach.  entries(): what appeared there beside the secret.
export function hostTrap(prefix, secret) {
  const dir = tmpDir(prefix);
  fs.chmodSync(dir, 0o777);
  fs.writeFileSync(path.join(dir, 'secret.txt'), secret);
  return { dir, entries: () => fs.readdirSync(dir).filter((n) => n !== 'secret.txt') };
}

// One exchange with a Docker-API engine itself (Docker, Podman), bypassing
// container-mcp: {status, body} with the body parsed when it is JSON.
export function engine(sock, method, p, body, timeoutMs = 120000) {
  return new Promise((resolve, reject) => {
    const headers = body ? { 'content-type': 'application/json' } : {};
    const req = http.request({ socketPath: sock, method, path: p, headers }, (res) => {
      let data = '';
      res.setEncoding('utf8');
      res.on('data', (c) => { data += c; });
      res.on('end', () => {
        let parsed = null;
        try { parsed = data ? JSON.parse(data) : null; } catch { parsed = data; }
        resolve({ status: res.statusCode, body: parsed });
      });
    });
    req.on('error', reject);
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`engine ${method} ${p} timed out`)));
    if (body) req.write(JSON.stringify(body));
    req.end();
  });
}
