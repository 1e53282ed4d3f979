// Sessions are separate (issue 7, points 6 and 7): a container's owner
// label is an opaque keyed hash, never the MCP session id (the HTTP
// session's only credential); a session sees and acts only on its own
// containers and the operator's shared ones, and another session's
// container is "no container", word for word as one that does not exist.
// Two official SDK clients over Streamable HTTP against one server, and two
// stdio servers on one state dir.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { httpClient, startHttp, stdioClient, tmpDir } from './lib.mjs';
import { AS_NOBODY, ok } from './tools.mjs';

const T = { timeout: 90000 };
const TOKEN = 'e2e-sessions-token-0123456789abcdef';
const state = tmpDir('cmcp-sess-state-');
const allowed = tmpDir('cmcp-sess-allowed-');
fs.chmodSync(allowed, 0o755);
const nobodyState = tmpDir('cmcp-sess-nobody-');
fs.chownSync(nobodyState, 65534, 65534);
const ENV = { CONTAINER_MCP_STATE_DIR: state, CONTAINER_MCP_ALLOWED_MOUNTS: allowed, CONTAINER_MCP_TOKEN: TOKEN };

// Every tool result any client saw, to grep for session ids at the end of a test.
function recorder() {
  const seen = [];
  return {
    seen,
    async call(s, name, args) {
      const r = await s.client.callTool({ name, arguments: args });
      seen.push({ name, text: JSON.stringify(r) });
      return r;
    },
  };
}


function refusal(r) {
  assert.equal(r.isError, true, `expected a refusal, got ${JSON.stringify(r.structuredContent)}`);
  return r.content[0].text;
}

// What every tool that takes a container says for `ref` when the session
// cannot see it: the same words as for a name that never existed.
const noSuch = (ref) => `no container "${ref}"; call list_containers for the ids and names`;

async function httpServer(env = {}) {
  const srv = await startHttp({ args: ['--log-level', 'info'], env: { ...ENV, ...env }, toolsets: false });
  const open = () => httpClient(srv.url, { requestInit: { headers: { Authorization: `Bearer ${TOKEN}` } } });
  return { srv, open };
}

function alive(pid) {
  try {
    return !/State:\s+Z/.test(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return false;
  }
}

// Every tool that takes a container (containers, files and codex families),
// as B would try it on `ref`.
function targetCalls(ref) {
  const host = path.join(allowed, 'stolen');
  return [
    ['exec_in_container', { container: ref, command: ['true'] }],
    ['container_logs', { container: ref }],
    ['container_stats', { container: ref }],
    ['inspect_container', { container: ref }],
    ['copy_files', { container: ref, direction: 'from_container', source: '/workspace', destination: host }],
    ['copy_files', { container: ref, direction: 'to_container', source: allowed, destination: '/workspace' }],
    ['file_read', { container: ref, path: '/etc/hostname' }],
    ['file_write', { container: ref, path: 'planted.txt', content: 'from B' }],
    ['file_list', { container: ref }],
    ['file_delete', { container: ref, path: '/etc/hostname' }],
    ['file_move', { container: ref, source: '/etc/hostname', destination: 'moved' }],
    ['dpatch', { container: ref, patch: '*** Begin Patch\n*** Add File: /workspace/planted.txt\n+from B\n*** End Patch\n' }],
    ['stop_container', { container: ref, timeout: 0 }],
    ['remove_container', { container: ref, force: true }],
  ];
}

let nativeReason = null;

before(async () => {
  const s = await stdioClient({ args: ['serve'], env: ENV });
  try {
    const st = (await s.client.callTool({ name: 'system_status', arguments: {} })).structuredContent;
    const native = st.backends.find((b) => b.name === 'native');
    if (!native.available) nativeReason = `native runtime unavailable here: ${native.reason}`;
  } finally {
    await s.close().finally(() => s.kill());
  }
});

after(() => {
  for (const d of [state, allowed, nobodyState]) fs.rmSync(d, { recursive: true, force: true });
});

describe('sessions over HTTP', () => {
  test('the owner label is not the session id; B cannot see or touch A\'s container, by id, name or prefix', T, async (t) => {
    if (nativeReason) return t.skip(nativeReason);
    const { srv, open } = await httpServer();
    const rec = recorder();
    let a, b;
    try {
      a = await open();
      b = await open();
      const idA = a.transport.sessionId, idB = b.transport.sessionId;
      assert.ok(idA && idB && idA !== idB);

      const c = ok(await rec.call(a, 'run_container', { image: 'host', name: 'alpha', command: ['sleep', '300'] }));
      const mineB = ok(await rec.call(b, 'run_container', { image: 'host', command: ['sleep', '300'] }));
      const listA = ok(await rec.call(a, 'list_containers', { all: true })).containers;
      const seenA = listA.find((x) => x.id === c.id);
      const owner = seenA.labels['dev.container-mcp.session'];
      assert.match(owner, /^[0-9a-f]{32}$/);
      assert.notEqual(owner, idA);
      assert.notEqual(owner, idB);
      assert.equal(listA.find((x) => x.id === mineB.id), undefined, 'A lists B\'s container');
      const insA = ok(await rec.call(a, 'inspect_container', { container: 'alpha' }));
      assert.equal(insA.labels['dev.container-mcp.session'], owner);
      const pid = insA.init.pid;
      assert.ok(alive(pid));

      // B: not listed, and every tool says "no container" as for a ghost.
      const listB = ok(await rec.call(b, 'list_containers', { all: true })).containers;
      assert.deepEqual(listB.map((x) => x.id), [mineB.id]);
      for (const ref of [c.id, 'alpha', c.id.slice(0, 6)]) {
        for (const [name, args] of targetCalls(ref)) {
          const msg = refusal(await rec.call(b, name, args));
          assert.equal(msg, noSuch(ref), `${name} on ${ref}`);
        }
      }
      // A prefix shared by A's and B's ids resolves to B's own, as if A's did
      // not exist.  B makes containers until one shares A's first character
      // (1 in 16 each; 200 tries fail once in 400,000 runs).
      let twin = mineB.id[0] === c.id[0] ? mineB : null; // else B's only container matching c.id[0] is the twin
      for (let i = 0; i < 200 && !twin; i++) {
        const x = ok(await b.client.callTool({ name: 'run_container', arguments: { image: 'host', command: ['sleep', '300'] } }));
        if (x.id[0] === c.id[0]) twin = x;
        else ok(await b.client.callTool({ name: 'remove_container', arguments: { container: x.id, force: true } }));
      }
      assert.ok(twin, 'no id of B shared a first character with A\'s');
      let common = 0;
      while (c.id[common] === twin.id[common]) common++;
      const exTwin = ok(await rec.call(b, 'exec_in_container', { container: twin.id.slice(0, common), command: ['hostname'] }));
      assert.equal(exTwin.exitCode, 0);
      if (twin !== mineB) ok(await b.client.callTool({ name: 'remove_container', arguments: { container: twin.id, force: true } }));
      // The name is taken: said without saying by whom.
      const clash = refusal(await rec.call(b, 'run_container', { image: 'host', name: 'alpha', command: ['true'] }));
      assert.match(clash, /name "alpha" is taken by another container \(this session's or another's\)/);
      assert.ok(!clash.includes(c.id));
      ok(await rec.call(b, 'system_status', {}));

      // A's container is untouched: running, its init alive, B's file not copied in.
      assert.ok(alive(pid), `init ${pid} of A's container died`);
      assert.equal(ok(await rec.call(a, 'list_containers', {})).containers.find((x) => x.id === c.id).state, 'running');
      const ex = ok(await rec.call(a, 'exec_in_container', { container: 'alpha', command: ['ls', '/workspace'] }));
      assert.equal(ex.stdout, '');
      assert.ok(!fs.existsSync(path.join(allowed, 'stolen')));

      // Nothing any client saw carries a session id.
      for (const r of rec.seen) {
        assert.ok(!r.text.includes(idA), `${r.name} shows A's session id: ${r.text}`);
        assert.ok(!r.text.includes(idB), `${r.name} shows B's session id: ${r.text}`);
      }
      // Nor the server's log.
      assert.ok(!srv.stderr().includes(idA) && !srv.stderr().includes(idB), srv.stderr());
      ok(await rec.call(a, 'remove_container', { container: c.id, force: true }));
      ok(await rec.call(b, 'remove_container', { container: mineB.id, force: true }));
      assert.ok(!alive(pid));
    } finally {
      await a?.close().catch(() => {});
      await b?.close().catch(() => {});
      await srv.stop().finally(() => srv.kill());
    }
  });

  test('CONTAINER_MCP_SHARE_CONTAINERS=1: B lists, execs, stops and removes A\'s container; ids still hidden', T, async (t) => {
    if (nativeReason) return t.skip(nativeReason);
    const { srv, open } = await httpServer({ CONTAINER_MCP_SHARE_CONTAINERS: '1' });
    const rec = recorder();
    let a, b;
    try {
      a = await open();
      b = await open();
      const c = ok(await rec.call(a, 'run_container', { image: 'host', name: 'together', command: ['sleep', '300'] }));
      const seen = ok(await rec.call(b, 'list_containers', {})).containers.find((x) => x.id === c.id);
      assert.ok(seen, 'B lists A\'s container');
      assert.notEqual(seen.labels['dev.container-mcp.session'], a.transport.sessionId);
      assert.equal(ok(await rec.call(b, 'exec_in_container', { container: 'together', command: ['true'] })).exitCode, 0);
      ok(await rec.call(b, 'container_logs', { container: 'together' }));
      ok(await rec.call(b, 'container_stats', { container: 'together' }));
      const pid = ok(await rec.call(b, 'inspect_container', { container: 'together' })).init.pid;
      ok(await rec.call(b, 'stop_container', { container: 'together', timeout: 0 }));
      ok(await rec.call(b, 'remove_container', { container: c.id, force: true }));
      assert.ok(!alive(pid), `init ${pid} still runs after B removed it`);
      for (const r of rec.seen) {
        assert.ok(!r.text.includes(a.transport.sessionId) && !r.text.includes(b.transport.sessionId), r.text);
      }
    } finally {
      await a?.close().catch(() => {});
      await b?.close().catch(() => {});
      await srv.stop().finally(() => srv.kill());
    }
  });

  test('CONTAINER_MCP_SHARED_CONTAINERS: the operator\'s container is usable by every session, its name reserved; other adopted ones belong to nobody', T, async (t) => {
    if (nativeReason) return t.skip(nativeReason);
    // The operator's containers: made by an earlier server whose sandboxes
    // outlive it (CONTAINER_MCP_ORPHANS=adopt).
    const first = await stdioClient({ args: ['serve'], env: { ...ENV, CONTAINER_MCP_ORPHANS: 'adopt' } });
    let common, hidden;
    try {
      common = ok(await first.client.callTool({ name: 'run_container', arguments: { image: 'host', name: 'common', command: ['sleep', '300'] } }));
      hidden = ok(await first.client.callTool({ name: 'run_container', arguments: { image: 'host', name: 'leftover', command: ['sleep', '300'] } }));
    } finally {
      await first.close().finally(() => first.kill());
    }
    const { srv, open } = await httpServer({ CONTAINER_MCP_ORPHANS: 'adopt', CONTAINER_MCP_SHARED_CONTAINERS: 'common' });
    const rec = recorder();
    let a, b;
    try {
      a = await open();
      b = await open();
      for (const s of [a, b]) {
        const list = ok(await rec.call(s, 'list_containers', {})).containers;
        assert.deepEqual(list.map((x) => x.name), ['common']);
        const ex = ok(await rec.call(s, 'exec_in_container', { container: 'common', command: ['sh', '-c', 'echo hi >> /workspace/log; cat /workspace/log'] }));
        assert.equal(ex.exitCode, 0);
        assert.equal(refusal(await rec.call(s, 'exec_in_container', { container: 'leftover', command: ['true'] })), noSuch('leftover'));
      }
      assert.equal(ok(await rec.call(b, 'exec_in_container', { container: common.id, command: ['cat', '/workspace/log'] })).stdout, 'hi\nhi\n');
      assert.match(refusal(await rec.call(a, 'run_container', { image: 'host', name: 'common', command: ['true'] })),
        /name "common" is reserved: CONTAINER_MCP_SHARED_CONTAINERS/);
    } finally {
      await a?.close().catch(() => {});
      await b?.close().catch(() => {});
      await srv.stop().finally(() => srv.kill());
    }
    // The next server without adopt reaps both (and, sharing everything,
    // would list them if it had not).
    const last = await stdioClient({ args: ['serve'], env: { ...ENV, CONTAINER_MCP_SHARE_CONTAINERS: '1' } });
    try {
      const all = ok(await last.client.callTool({ name: 'list_containers', arguments: { all: true } })).containers;
      assert.deepEqual(all.filter((x) => x.id === common.id || x.id === hidden.id), []);
    } finally {
      await last.close().finally(() => last.kill());
    }
  });
});

describe('sessions over stdio', () => {
  const stdio = (as) => as === 'nobody'
    ? stdioClient({
      args: ['serve'],
      env: { ...ENV, CONTAINER_MCP_STATE_DIR: nobodyState, HOME: '/nonexistent' },
      wrap: AS_NOBODY,
    })
    : stdioClient({ args: ['serve'], env: ENV });
  for (const as of [null, 'nobody'])
  test(`a second stdio server on the same state dir does not see the first's containers${as ? ' (as nobody)' : ''}`, T, async (t) => {
    if (nativeReason) return t.skip(nativeReason);
    if (as && process.getuid() !== 0) return t.skip('needs root to become nobody');
    const one = await stdio(as);
    const two = await stdio(as);
    try {
      const c = ok(await one.client.callTool({ name: 'run_container', arguments: { image: 'host', name: 'solo', command: ['sleep', '300'] } }));
      const list = ok(await two.client.callTool({ name: 'list_containers', arguments: { all: true } })).containers;
      assert.equal(list.find((x) => x.id === c.id), undefined);
      for (const ref of [c.id, 'solo']) {
        for (const [name, args] of targetCalls(ref))
          assert.equal(refusal(await two.client.callTool({ name, arguments: args })), noSuch(ref), `${name} on ${ref}`);
      }
      assert.equal(ok(await one.client.callTool({ name: 'exec_in_container', arguments: { container: 'solo', command: ['true'] } })).exitCode, 0);
      ok(await one.client.callTool({ name: 'remove_container', arguments: { container: c.id, force: true } }));
    } finally {
      await one.close().finally(() => one.kill());
      await two.close().finally(() => two.kill());
    }
  });
});
