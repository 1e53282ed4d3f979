// What the tool tests share: calling a tool through an SDK client, asserting
// a result or a refusal, and asking system_status what the native runtime
// can do here (to skip, saying why, what this machine cannot run).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

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
// { reason: why it cannot run here or null, details }.
export async function nativeBackend(open) {
  const s = await open();
  try {
    const native = ok(await call(s, 'system_status', {})).backends.find((b) => b.name === 'native');
    return { reason: native.available ? null : `native runtime unavailable here: ${native.reason}`, details: native.details };
  } finally {
    await s.close().finally(() => s.kill());
  }
}

// The limits the kernel holds for a container, read from its cgroup.
export function cgroupLimits(insp) {
  const { mode, dirs } = insp.cgroup;
  const read = (dir, file) => fs.readFileSync(path.join(dir, file), 'utf8').trim();
  if (mode === 'v2' || mode === 'unified') {
    const [quota, period] = read(dirs.memory ?? dirs.cpu ?? Object.values(dirs)[0], 'cpu.max').split(' ');
    return { memory: Number(read(dirs.memory ?? Object.values(dirs)[0], 'memory.max')), cpus: Number(quota) / Number(period) };
  }
  return {
    memory: Number(read(dirs.memory, 'memory.limit_in_bytes')),
    cpus: Number(read(dirs.cpu, 'cpu.cfs_quota_us')) / Number(read(dirs.cpu, 'cpu.cfs_period_us')),
  };
}
