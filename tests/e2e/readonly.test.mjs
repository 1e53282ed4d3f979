// CONTAINER_MCP_READONLY: every tool that changes something is refused, and
// nothing changes (issue 9: the mutation "read-only mode refuses only
// run_container" survived the suite).  A writable server and a read-only one
// share a state dir; the read-only one shares every container
// (CONTAINER_MCP_SHARE_CONTAINERS=1), so without the read-only check each of
// its calls would act on the writable server's container.  What each refused
// call would have done is checked on the host: the init still runs, the
// record is still there, no file was written or copied.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { eventually, stdioClient, tmpDir } from './lib.mjs';
import { alive, call, nativeBackend, ok, refused } from './tools.mjs';

const T = { timeout: 90000 };
const state = tmpDir('cmcp-ro-state-');
const allowed = tmpDir('cmcp-ro-allowed-');
fs.chmodSync(allowed, 0o777); // the sandbox's root (an unprivileged host id) writes its markers here
const ENV = { CONTAINER_MCP_STATE_DIR: state, CONTAINER_MCP_ALLOWED_MOUNTS: allowed };

const open = (env = {}) => stdioClient({ args: ['serve'], env: { ...ENV, ...env } });
const READONLY = { CONTAINER_MCP_READONLY: '1', CONTAINER_MCP_SHARE_CONTAINERS: '1' };
const RO_WORDS = [/refused: the server runs with CONTAINER_MCP_READONLY/, /restart it without CONTAINER_MCP_READONLY/];

const host = (name) => path.join(allowed, name);
const records = () => (fs.existsSync(path.join(state, 'containers')) ? fs.readdirSync(path.join(state, 'containers')).sort() : []);

let nativeReason = null;
before(async () => {
  nativeReason = (await nativeBackend(open)).reason;
});
after(() => {
  for (const d of [state, allowed]) fs.rmSync(d, { recursive: true, force: true });
});

describe('read-only mode', () => {
  test('every writing tool is refused and changes nothing; list, logs, inspect, stats and status still work', T, async (t) => {
    if (nativeReason) return t.skip(nativeReason);
    const rw = await open();
    let ro;
    try {
      const c = ok(await call(rw, 'run_container', {
        image: 'host', name: 'ro-target', mounts: [{ source: allowed, target: '/m' }],
        command: ['sh', '-c', 'echo hello-from-target; exec sleep 300'],
      }));
      const pid = ok(await call(rw, 'inspect_container', { container: c.id })).init.pid;
      assert.ok(alive(pid), `init ${pid} of the target`);
      assert.equal(ok(await call(rw, 'exec_in_container', {
        container: c.id, command: ['sh', '-c', 'echo inside > /workspace/inside.txt'],
      })).exitCode, 0);
      fs.writeFileSync(host('host.txt'), 'from the host\n');
      const before = records();

      ro = await open(READONLY);
      // Each writing tool, with what it would have done checked after.
      const attempts = [
        ['run_container', { image: 'host', name: 'ro-new', mounts: [{ source: allowed, target: '/m' }], command: ['sh', '-c', 'touch /m/ran-detached; exec sleep 300'] }],
        ['run_container', { image: 'host', wait: true, mounts: [{ source: allowed, target: '/m' }], command: ['touch', '/m/ran-wait'] }],
        ['exec_in_container', { container: c.id, command: ['touch', '/m/ran-exec'] }],
        ['copy_files', { container: c.id, direction: 'to_container', source: host('host.txt'), destination: '/workspace' }],
        ['copy_files', { container: c.id, direction: 'from_container', source: '/workspace/inside.txt', destination: host('copied-out.txt') }],
        ['file_write', { container: c.id, path: '/workspace/inside.txt', content: 'overwritten\n' }],
        ['file_write', { container: c.id, path: '/workspace/new.txt', content: 'new\n' }],
        ['file_delete', { container: c.id, path: '/workspace/inside.txt' }],
        ['file_move', { container: c.id, source: '/workspace/inside.txt', destination: '/workspace/moved.txt' }],
        ['stop_container', { container: c.id, timeout: 0 }],
        ['remove_container', { container: c.id, force: true }],
        // the sandbox tools run a process (and would make the session's
        // sandbox): refused, in the target and in a sandbox of their own
        ['system_run_command', { container: c.id, command: 'touch /m/ran-command' }],
        ['system_run_command', { command: 'true' }],
        ['system_run_python', { container: c.id, code: "open('/m/ran-python', 'w')" }],
        ['system_env_var', {}],
        ['dpatch', {
          container: c.id,
          patch: '*** Begin Patch\n*** Update File: /workspace/inside.txt\n@@\n-inside\n+patched\n'
            + '*** Add File: /workspace/patched.txt\n+new\n*** End Patch\n',
        }],
        // dexec runs a process too (and would write the run log)
        ['dexec', { container: c.id, command: 'touch /m/ran-dexec' }],
        // the image tools change the backend's store: refused before it is asked
        ['pull_image', { image: 'busybox:latest' }],
        ['pull_image', { image: 'imported:1', import: host('host.txt') }],
        ['build_image', { context: allowed, tag: 'ro-built:1' }],
        ['remove_image', { image: 'busybox:latest', force: true }],
        ['prune_images', { all: true }],
      ];
      for (const [name, args] of attempts) refused(await call(ro, name, args), new RegExp(`^${name} refused`), ...RO_WORDS);

      // Nothing happened: no run (no new record, no marker), no exec, no copy
      // either way, the target neither stopped nor removed.
      assert.deepEqual(records(), before, 'a record appeared or went');
      for (const f of ['ran-detached', 'ran-wait', 'ran-exec', 'copied-out.txt', 'ran-command', 'ran-python', 'ran-dexec'])
        assert.equal(fs.existsSync(host(f)), false, `${f} exists on the host`);
      assert.deepEqual(fs.readdirSync(path.join(state, 'runlog')), [], 'a refused dexec wrote the run log');
      assert.ok(alive(pid), 'the target\'s init was stopped');
      const inside = ok(await call(rw, 'exec_in_container', { container: c.id, command: ['ls', '/workspace'] }));
      assert.equal(inside.stdout, 'inside.txt\n', 'copy_files to_container or file_write/file_move wrote into the container');
      const kept = ok(await call(rw, 'exec_in_container', { container: c.id, command: ['cat', '/workspace/inside.txt'] }));
      assert.equal(kept.stdout, 'inside\n', 'file_write, file_delete, file_move or dpatch changed inside.txt');
      // and the file tools that only read work on the read-only server
      assert.equal(ok(await call(ro, 'file_read', { container: c.id, path: 'inside.txt' })).content, 'inside\n');
      assert.deepEqual(ok(await call(ro, 'file_list', { container: c.id })).entries.map((e) => e.name), ['inside.txt']);
      assert.equal(ok(await call(rw, 'inspect_container', { container: c.id })).state, 'running');

      // Every tool the read-only server offers that is not marked read-only
      // was tried above: a new writing tool must be added to this list.
      const { tools } = await ro.client.listTools();
      const writing = tools.filter((x) => x.annotations?.readOnlyHint !== true).map((x) => x.name).sort();
      assert.deepEqual(writing, [...new Set(attempts.map(([n]) => n))].sort(), 'writing tools not covered by this test');

      // The reading tools work, on the same container.
      const listed = ok(await call(ro, 'list_containers', {})).containers;
      assert.ok(listed.some((x) => x.id === c.id), JSON.stringify(listed));
      await eventually(async () => ok(await call(ro, 'container_logs', { container: c.id })).logs.includes('hello-from-target'),
        20000, 'the target\'s output in container_logs');
      const insp = ok(await call(ro, 'inspect_container', { container: c.id }));
      assert.equal(insp.init.pid, pid);
      assert.ok(ok(await call(ro, 'container_stats', { container: c.id })).pids >= 1);
      assert.equal(ok(await call(ro, 'system_status', {})).policy.readonly, true);
      assert.equal(ok(await call(ro, 'system_status', {})).sessionSandbox, null, 'a refused call made a sandbox');

      ok(await call(rw, 'remove_container', { container: c.id, force: true }));
      await eventually(() => !alive(pid), 20000, `init ${pid} to go after remove`);
    } finally {
      if (ro) await ro.close().finally(() => ro.kill());
      await rw.close().finally(() => rw.kill());
    }
  });
});
