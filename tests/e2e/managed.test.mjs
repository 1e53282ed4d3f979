// The managed-label check (README: "Lifecycle tools refuse containers
// without the managed label unless CONTAINER_MCP_ALLOW_UNMANAGED is set";
// issue 9: the mutation that switched it off survived the suite).  On the
// native runtime a container is its record (<state dir>/containers/<id>/
// state.json) and "managed" is the label dev.container-mcp.managed=true in
// it; a record without it is a container container-mcp did not make (one
// another tool wrote there, or an older server's).  The test makes one by
// taking the label out of a running container's record (its session label
// stays, so only the managed check can refuse it), then checks by their
// effect that nothing acts on it, and that with the setting everything does.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { eventually, stdioClient, tmpDir } from './lib.mjs';
import { alive, call, nativeBackend, ok, refused, relabelManaged } from './tools.mjs';

const T = { timeout: 90000 };
const state = tmpDir('cmcp-mg-state-');
const allowed = tmpDir('cmcp-mg-allowed-');
fs.chmodSync(allowed, 0o777); // the sandbox's root (an unprivileged host id) writes its markers here
const ENV = { CONTAINER_MCP_STATE_DIR: state, CONTAINER_MCP_ALLOWED_MOUNTS: allowed };
const open = (env = {}) => stdioClient({ args: ['serve'], env: { ...ENV, ...env } });
const MANAGED = 'dev.container-mcp.managed';
const host = (name) => path.join(allowed, name);
const recordDir = (id) => path.join(state, 'containers', id);

const relabel = (id, value) => relabelManaged(state, id, value);

let nativeReason = null;
before(async () => {
  nativeReason = (await nativeBackend(open)).reason;
});
after(() => {
  for (const d of [state, allowed]) fs.rmSync(d, { recursive: true, force: true });
});

describe('containers without the managed label', () => {
  for (const [what, value] of [['no managed label', undefined], ['managed label "false"', 'false']]) {
    test(`${what}: refused by every tool that takes a container; with CONTAINER_MCP_ALLOW_UNMANAGED=1 acted on`, T, async (t) => {
      if (nativeReason) return t.skip(nativeReason);
      const a = await open();
      let b;
      try {
        const c = ok(await call(a, 'run_container', {
          image: 'host', mounts: [{ source: allowed, target: '/m' }], command: ['sleep', '300'],
        }));
        const pid = ok(await call(a, 'inspect_container', { container: c.id })).init.pid;
        fs.writeFileSync(host('in.txt'), 'from the host\n');
        relabel(c.id, value);

        const words = [new RegExp(`^container "${c.id}" was not created by container-mcp \\(no ${MANAGED}=true label\\)`),
          /unless the server runs with CONTAINER_MCP_ALLOW_UNMANAGED=1/];
        for (const [name, args] of [
          ['exec_in_container', { container: c.id, command: ['touch', '/m/exec-ran'] }],
          ['copy_files', { container: c.id, direction: 'to_container', source: host('in.txt'), destination: '/m/copied-in.txt' }],
          ['copy_files', { container: c.id, direction: 'from_container', source: '/etc/hostname', destination: host('out.txt') }],
          ['file_write', { container: c.id, path: '/m/file-written.txt', content: 'x' }],
          ['file_read', { container: c.id, path: '/etc/hostname' }],
          ['file_list', { container: c.id, path: '/m' }],
          ['file_move', { container: c.id, source: '/m/in.txt', destination: '/m/moved.txt' }],
          ['file_delete', { container: c.id, path: '/m/in.txt' }],
          ['container_logs', { container: c.id }],
          ['container_stats', { container: c.id }],
          ['inspect_container', { container: c.id }],
          ['stop_container', { container: c.id, timeout: 0 }],
          ['remove_container', { container: c.id, force: true }],
        ]) refused(await call(a, name, args), ...words);
        for (const f of ['exec-ran', 'copied-in.txt', 'out.txt', 'file-written.txt', 'moved.txt']) assert.equal(fs.existsSync(host(f)), false, `${f} exists`);
        assert.ok(fs.existsSync(host('in.txt')), 'a refused file_move or file_delete removed in.txt');
        assert.ok(alive(pid), 'a refused stop or remove stopped the container');
        assert.ok(fs.existsSync(recordDir(c.id)), 'a refused remove removed the record');
        assert.equal(ok(await call(a, 'list_containers', { all: true })).containers.some((x) => x.id === c.id), false,
          'list_containers shows an unmanaged container');

        // With the setting, another server on the same state dir lists it
        // and acts on it.
        b = await open({ CONTAINER_MCP_ALLOW_UNMANAGED: '1' });
        assert.ok(ok(await call(b, 'list_containers', {})).containers.some((x) => x.id === c.id), 'not listed with the setting');
        assert.equal(ok(await call(b, 'exec_in_container', { container: c.id, command: ['touch', '/m/exec-ran'] })).exitCode, 0);
        assert.ok(fs.existsSync(host('exec-ran')), 'the exec did not run');
        ok(await call(b, 'copy_files', { container: c.id, direction: 'to_container', source: host('in.txt'), destination: '/m/copied-in.txt' }));
        assert.equal(fs.readFileSync(host('copied-in.txt'), 'utf8'), 'from the host\n');
        assert.equal(ok(await call(b, 'inspect_container', { container: c.id })).init.pid, pid);
        ok(await call(b, 'stop_container', { container: c.id, timeout: 0 }));
        await eventually(() => !alive(pid), 20000, `init ${pid} to go after stop`);
        ok(await call(b, 'remove_container', { container: c.id }));
        assert.equal(fs.existsSync(recordDir(c.id)), false, 'the record outlived remove');
      } finally {
        for (const f of fs.readdirSync(allowed)) fs.rmSync(host(f), { force: true });
        if (b) await b.close().finally(() => b.kill());
        await a.close().finally(() => a.kill());
      }
    });
  }
});
