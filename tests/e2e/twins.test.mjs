// The CLI twins of the third seed: `container-mcp exec --container NAME
// 'cmd' [-]` (dexec) and `container-mcp patch --container NAME FILE|-`
// (dpatch), through the daemon when one runs, else through a server of
// their own.  Their effects are checked in the container itself (a file a
// patch wrote, read back by a command) and in the run log on disk.
// Until dexec and dpatch are in tools/list these skip with "dexec not
// present" / "dpatch not present"; what the twins do without them (no
// daemon started behind the user's back, the refusal passed on) is tested
// now.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { DIAG, eventually, runCli, stdioClient, tmpDir } from './lib.mjs';
import { alive, call, nativeBackend, ok } from './tools.mjs';

const T = { timeout: 180000 };
const root = tmpDir('cmcp-twins-');
const runlog = path.join(root, 'runlog');
// The run log's place by its setting (dexec's; the daemon keeps the
// environment it was started with).
const ENV = { CONTAINER_MCP_STATE_DIR: path.join(root, 'state'), CONTAINER_MCP_RUNLOG_DIR: runlog };
const sock = path.join(root, 'daemon.sock');
const nosock = path.join(root, 'none.sock');
const NAME = `twinbox-${process.pid}`;

const cli = (args, opts = {}) => runCli(args, { env: ENV, timeout: 90000, ...opts });
const viaDaemon = (args, opts) => cli([args[0], '--socket-path', sock, ...args.slice(1)], opts);
const direct = (args, opts) =>
  cli([args[0], '--socket-path', nosock, '--allow-container', NAME, ...args.slice(1)], opts);

let tools = [];
let native = null;
let keeper; // the session that owns the container the twins act on
let daemonPid;

before(async () => {
  native = (await nativeBackend(() => stdioClient({ args: ['serve'], env: ENV }))).reason;
  // The container the twins act on is made first by a server without the
  // allowlist (a listed name is reserved: run_container refuses it), then
  // the daemon opens it with --allow-container.
  keeper = await stdioClient({ args: ['serve'], env: ENV });
  tools = (await keeper.client.listTools()).tools.map((t) => t.name);
  if (!native && tools.includes('dexec')) ok(await call(keeper, 'run_container', { image: 'host', name: NAME, command: ['sleep', 'infinity'] }));
  const r = await cli(['daemon', 'start', '--socket-path', sock, ...DIAG, '--allow-container', NAME]);
  if (fs.existsSync(path.join(root, 'daemon.pid'))) daemonPid = Number(fs.readFileSync(path.join(root, 'daemon.pid'), 'utf8'));
  assert.equal(r.code, 0, r.stderr);
});

after(async () => {
  await keeper?.close().finally(() => keeper.kill());
  await cli(['daemon', 'stop', '--socket-path', sock]);
  if (daemonPid && alive(daemonPid)) process.kill(daemonPid, 'SIGKILL');
  fs.rmSync(root, { recursive: true, force: true });
});

const need = (t, tool) => {
  if (!tools.includes(tool)) return t.skip(`${tool} not present`), true;
  if (native) return t.skip(native), true;
  return false;
};

const runlogText = () =>
  (fs.existsSync(runlog) ? fs.readdirSync(runlog) : []).map((f) => fs.readFileSync(path.join(runlog, f), 'utf8')).join('\n');

describe('exec and patch twins', () => {
  test('without a daemon the twins start none, and pass on what the server says', T, async () => {
    const r = await direct(['exec', '--container', NAME, 'true']);
    assert.ok(!fs.existsSync(path.join(root, 'none.pid')), 'no daemon was started for a twin');
    assert.ok(!fs.existsSync(nosock));
    if (!tools.includes('dexec')) {
      assert.equal(r.code, 125, 'the tool could not run: 125');
      assert.match(r.stderr, /dexec/);
    }
    if (!tools.includes('dexec')) {
      const before = (await cli(['daemon', 'status', '--json', '--socket-path', sock])).stdout;
      const d = await viaDaemon(['exec', '--container', NAME, 'true']);
      assert.equal(d.code, 125, 'through the daemon too');
      assert.match(d.stderr, /dexec/);
      assert.equal(JSON.parse(before).sessions, 1, 'only the keeper\'s session before');
      const after = JSON.parse((await cli(['daemon', 'status', '--json', '--socket-path', sock])).stdout);
      assert.equal(after.sessions, 1, 'the twin ended the session it opened in the daemon');
    }
    const usage = await cli(['exec', 'true']);
    assert.equal(usage.code, 2);
    assert.match(usage.stderr, /--container NAME is required/);
  });

  for (const [how, run] of [['through the daemon', viaDaemon], ['directly', direct]]) {
    test(`exec ${how}: output on stdout, the command's exit code, stdin with -, the run log written`, T, async (t) => {
      if (need(t, 'dexec')) return;
      const mark = `twin-${how.replace(/\W/g, '')}-${process.pid}`;
      const r = await run(['exec', '--container', NAME, `echo ${mark}; echo err >&2; exit 3`]);
      assert.equal(r.code, 3, r.stderr);
      assert.match(r.stdout, new RegExp(mark));
      const s = await run(['exec', '--container', NAME, 'cat', '-'], { input: 'from stdin\nline 2\n' });
      assert.equal(s.code, 0, s.stderr);
      assert.equal(s.stdout, 'from stdin\nline 2\n');
      await eventually(() => runlogText().includes(mark), 10000, `the run log to hold ${mark}`);
    });

    test(`patch ${how}: a file added in the container; a failing patch changes nothing and exits 1`, T, async (t) => {
      if (need(t, 'dpatch') || need(t, 'dexec')) return;
      const file = `/tmp/twin-${how.replace(/\W/g, '')}.txt`;
      const add = `*** Begin Patch\n*** Add File: ${file}\n+one\n+two\n*** End Patch\n`;
      const p = await run(['patch', '--container', NAME, '-'], { input: add });
      assert.equal(p.code, 0, p.stderr);
      assert.equal((await run(['exec', '--container', NAME, `cat ${file}`])).stdout, 'one\ntwo\n');
      const pf = path.join(root, 'bad.patch');
      fs.writeFileSync(pf, `*** Begin Patch\n*** Update File: ${file}\n@@\n-absent line\n+x\n*** End Patch\n`);
      const bad = await run(['patch', '--container', NAME, pf]);
      assert.equal(bad.code, 1);
      assert.equal((await run(['exec', '--container', NAME, `cat ${file}`])).stdout, 'one\ntwo\n', 'untouched');
    });
  }
});
