// Settings that relax or set a default, each checked by its effect (issue 9:
// the mutations that ignored them survived the suite):
// CONTAINER_MCP_DEFAULT_MEMORY and _DEFAULT_CPUS (the cgroup's limits),
// CONTAINER_MCP_TIMEOUT_MS (the exec killed, its processes gone),
// CONTAINER_MCP_ALLOW_NETWORK (the sandbox's interfaces, routes and a
// connection that arrives) and CONTAINER_MCP_ALLOWED_HOSTS (HTTP status, and
// whether the call ran).
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import { after, before, describe, test } from 'node:test';

import { eventually, httpRequest, initBody, mcpHeaders, mcpMessages, rawHttpSession, startHttp, stdioClient, tmpDir, withTimeout } from './lib.mjs';
import { alive, call, cgroupLimits, cgroupOf, nativeBackend, ok, procsWith } from './tools.mjs';

const T = { timeout: 120000 };
const state = tmpDir('cmcp-set-state-');
const ENV = { CONTAINER_MCP_STATE_DIR: state };
const open = (env = {}) => stdioClient({ args: ['serve'], env: { ...ENV, ...env } });
// A number no other process on the machine has as an argument.
const marker = () => String(100000000 + crypto.randomInt(800000000));

let nativeReason = null;
let cgroupReason = null;
let netReason = null;
before(async () => {
  ({ reason: nativeReason, cgroupReason, netReason } = await nativeBackend(open));
});
after(() => fs.rmSync(state, { recursive: true, force: true }));

describe('CONTAINER_MCP_DEFAULT_MEMORY and CONTAINER_MCP_DEFAULT_CPUS', () => {
  test('a run that gives neither gets exactly the configured limits in its cgroup; one that gives them gets its own', T, async (t) => {
    if (nativeReason || cgroupReason) return t.skip(nativeReason || cgroupReason);
    // Neither the built-in default (2g, 2 cpus) nor the host's ceilings.
    const s = await open({ CONTAINER_MCP_DEFAULT_MEMORY: '300m', CONTAINER_MCP_DEFAULT_CPUS: '0.5' });
    try {
      const d = ok(await call(s, 'run_container', { image: 'host', command: ['sleep', '300'] }));
      const e = ok(await call(s, 'run_container', { image: 'host', command: ['sleep', '300'], memory: '200m', cpus: 0.25 }));
      try {
        assert.deepEqual(cgroupLimits(ok(await call(s, 'inspect_container', { container: d.id }))), { memory: 300 * 2 ** 20, cpus: 0.5 });
        assert.deepEqual(cgroupLimits(ok(await call(s, 'inspect_container', { container: e.id }))), { memory: 200 * 2 ** 20, cpus: 0.25 });
      } finally {
        for (const c of [d, e]) ok(await call(s, 'remove_container', { container: c.id, force: true }));
      }
      // Wait runs too, read while they run, then cancelled: the first starts
      // a sandbox of its own, a later one may get a warm sandbox, whose
      // limits are written when it is taken.
      for (let i = 0; i < 2; i++) {
        const m = marker();
        const ac = new AbortController();
        const p = call(s, 'run_container', { image: 'host', wait: true, command: ['sleep', m] }, { signal: ac.signal });
        p.catch(() => {});
        try {
          const [pid] = await eventually(() => procsWith(m).length && procsWith(m), 20000, `the wait run's "sleep ${m}"`);
          assert.deepEqual(cgroupLimits({ cgroup: cgroupOf(pid) }), { memory: 300 * 2 ** 20, cpus: 0.5 }, `wait run ${i}`);
        } finally {
          ac.abort();
        }
        await eventually(() => procsWith(m).length === 0, 20000, `"sleep ${m}" to go`);
      }
    } finally {
      await s.close().finally(() => s.kill());
    }
  });
});

describe('CONTAINER_MCP_TIMEOUT_MS', () => {
  // The setting is the timeout of exec_in_container when the call gives
  // none (a wait run's default is its own: 600 s, README).
  test('an exec without a timeout is killed after it, its whole tree gone; the container stays up', T, async (t) => {
    if (nativeReason) return t.skip(nativeReason);
    const s = await open({ CONTAINER_MCP_TIMEOUT_MS: '1500' });
    try {
      const c = ok(await call(s, 'run_container', { image: 'host', command: ['sleep', '300'] }));
      const pid = ok(await call(s, 'inspect_container', { container: c.id })).init.pid;
      const m = marker();
      // The built-in default (120 s) would run past both bounds below.
      const r = ok(await withTimeout(call(s, 'exec_in_container', {
        container: c.id, command: ['sh', '-c', `sleep ${m} & setsid sleep ${m} & sleep ${m}`],
      }, { timeout: 100000 }), 90000, 'the exec to time out'));
      assert.equal(r.timedOut, true, JSON.stringify(r));
      await eventually(() => procsWith(m).length === 0, 20000, `every "sleep ${m}" to be gone`);
      assert.ok(alive(pid), 'the container went with its exec');
      assert.equal(ok(await call(s, 'exec_in_container', { container: c.id, command: ['echo', 'still here'] })).stdout, 'still here\n');
      // A timeout the call gives wins over the setting.
      const n = ok(await call(s, 'exec_in_container', { container: c.id, command: ['sh', '-c', 'sleep 3; echo done'], timeout: 60 }));
      assert.equal(n.timedOut, false);
      assert.equal(n.stdout, 'done\n');
      ok(await call(s, 'remove_container', { container: c.id, force: true }));
    } finally {
      await s.close().finally(() => s.kill());
    }
  });
});

// The host's first non-loopback IPv4 address: a "remote" host the sandbox
// can be asked to reach (its connection leaves through the user-mode stack
// as a socket of the host).
function hostAddress() {
  for (const list of Object.values(os.networkInterfaces()))
    for (const a of list) if (a.family === 'IPv4' && !a.internal) return a.address;
  return null;
}

// What the sandbox sees of the network: its interfaces, whether it has a
// default route, and whether a connection to addr:port got through.
const PROBE = `
import socket, sys
ifs = [l.split(':')[0].strip() for l in open('/proc/net/dev').read().splitlines()[2:]]
routes = [l.split()[1] for l in open('/proc/net/route').read().splitlines()[1:]]
print('IFS', ' '.join(sorted(ifs)))
print('DEFAULT', '00000000' in routes)
if len(sys.argv) > 2:
    s = socket.socket(); s.settimeout(10)
    try:
        s.connect((sys.argv[1], int(sys.argv[2]))); s.sendall(sys.argv[3].encode()); print('CONNECTED')
    except OSError as e:
        print('FAILED', e)
`;

describe('CONTAINER_MCP_ALLOW_NETWORK', () => {
  test('off: a run that does not ask has only lo and reaches nothing; on: the same run has an interface, a default route, and reaches a host', T, async (t) => {
    if (nativeReason || netReason) return t.skip(nativeReason || netReason);
    const addr = hostAddress();
    const got = [];
    const listener = net.createServer((c) => c.on('data', (d) => got.push(String(d))));
    await new Promise((res) => listener.listen(0, addr ?? '127.0.0.1', res));
    const target = addr ? [addr, String(listener.address().port)] : [];
    const probe = async (s, tag) => {
      const r = ok(await call(s, 'run_container', { image: 'host', wait: true, command: ['python3', '-c', PROBE, ...target, tag] }));
      assert.equal(r.exitCode, 0, r.stderr);
      return r.stdout;
    };
    try {
      const off = await open();
      try {
        const out = await probe(off, 'off');
        assert.match(out, /^IFS lo$/m, out);
        assert.match(out, /^DEFAULT False$/m, out);
        if (addr) assert.match(out, /^FAILED/m, out);
      } finally {
        await off.close().finally(() => off.kill());
      }
      const on = await open({ CONTAINER_MCP_ALLOW_NETWORK: '1' });
      try {
        const out = await probe(on, 'on');
        const ifs = /^IFS (.*)$/m.exec(out)[1].split(' ');
        assert.ok(ifs.includes('lo') && ifs.length >= 2, `interfaces: ${ifs}`);
        assert.match(out, /^DEFAULT True$/m, out);
        if (!addr) return t.diagnostic('no non-loopback IPv4 address on this host: reaching one not checked');
        assert.match(out, /^CONNECTED$/m, out);
        await eventually(() => got.join('').includes('on'), 30000, 'the sandbox\'s bytes at the listener');
      } finally {
        await on.close().finally(() => on.kill());
      }
      assert.equal(got.join(''), 'on', 'only the run with network reached the listener');
    } finally {
      listener.close();
    }
  });
});

describe('CONTAINER_MCP_ALLOWED_HOSTS', () => {
  const echo = (id, text) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'echo', arguments: { text } } });

  // With `extra` headers: initialize's status (and whether it made a
  // session), then, on a session made with the server's own Host, an echo's
  // status and what it returned (undefined when it never ran).
  async function tryAs(srv, extra) {
    const target = { port: srv.port };
    const init = await httpRequest(target, { headers: mcpHeaders({ extra }), body: initBody() });
    const { session, version } = await rawHttpSession(target);
    const res = await httpRequest(target, { headers: mcpHeaders({ session, version, extra }), body: echo(2, 'ran') });
    const reply = res.status === 200 ? mcpMessages(res).find((x) => x.id === 2) : undefined;
    return { init: init.status, session: Boolean(init.headers['mcp-session-id']), call: res.status, echoed: reply?.result?.structuredContent?.text };
  }
  const accepted = { init: 200, session: true, call: 200, echoed: 'ran' };
  const refusedAll = { init: 403, session: false, call: 403, echoed: undefined };

  test('names in the list are accepted as Host and Origin, the call runs; without the setting, or another name, 403 and nothing runs', T, async () => {
    const names = 'one.example.test,mcp.example.test';
    const withIt = await startHttp({ env: { CONTAINER_MCP_ALLOWED_HOSTS: names } });
    const without = await startHttp();
    try {
      for (const name of names.split(',')) {
        const forms = (port) => [{ Host: `${name}:${port}` }, { Host: name }, { Origin: `http://${name}:${port}` }];
        for (const extra of forms(withIt.port)) {
          assert.deepEqual(await tryAs(withIt, extra), accepted, `${JSON.stringify(extra)} with the setting`);
          const other = Object.fromEntries(Object.entries(extra).map(([k, v]) => [k, v.replace(name, `not-${name}`)]));
          assert.deepEqual(await tryAs(withIt, other), refusedAll, `${JSON.stringify(other)} with the setting`);
        }
        for (const extra of forms(without.port))
          assert.deepEqual(await tryAs(without, extra), refusedAll, `${JSON.stringify(extra)} without the setting`);
      }
    } finally {
      await withIt.stop().finally(() => withIt.kill());
      await without.stop().finally(() => without.kill());
    }
  });
});
