// The apple backend (issue 12), driven through the official SDK client
// against tests/apple/fake-container: Apple's `container` CLI cannot run on
// this Linux machine, so a stand-in records every argv the server spawns
// (one JSON line per call) and answers in the first seed's terms.  Each test
// checks the argv the fake recorded (exact, `--network none` by default, no
// `--` after exec, the labels) and what the tool returned; hostile values
// must be refused before any `run`/`exec` reaches the CLI.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, describe, test } from 'node:test';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

import { BIN, REPO, envWith, eventually, stdioClient, tmpDir, withTimeout } from './lib.mjs';
import { alive, call, ok, procsWith, refused } from './tools.mjs';

const T = { timeout: 240000 }; // each CLI call is a python start: slow on a loaded machine
const FAKE = path.join(REPO, 'tests', 'apple', 'fake-container');
const dirs = [];
after(() => {
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

// A fresh fake (its own state and argv log) and the server's environment.
function fake(extra = {}) {
  const state = tmpDir('cmcp-apple-fake-');
  const allowed = tmpDir('cmcp-apple-allowed-');
  const serverState = tmpDir('cmcp-apple-state-');
  dirs.push(state, allowed, serverState);
  const log = path.join(state, 'argv.jsonl');
  const env = {
    CM_FAKE_CONTAINER_STATE: state,
    CM_FAKE_CONTAINER_LOG: log,
    CONTAINER_MCP_APPLE_CLI: FAKE,
    CONTAINER_MCP_STATE_DIR: serverState,
    CONTAINER_MCP_ALLOWED_MOUNTS: allowed,
    ...extra,
  };
  return {
    state,
    allowed,
    env,
    // Every argv the fake was given, in order (without argv[0]).
    calls: () => (fs.existsSync(log) ? fs.readFileSync(log, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l).argv) : []),
    record: (id) => JSON.parse(fs.readFileSync(path.join(state, 'containers', `${id}.json`), 'utf8')),
    exists: (id) => fs.existsSync(path.join(state, 'containers', `${id}.json`)),
    open: (more = {}) => stdioClient({ args: ['serve', '--backend', 'apple'], env: { ...env, ...more } }),
  };
}

const verbs = (calls) => calls.map((a) => a[0]);
const MANAGED = 'dev.container-mcp.managed';

// The labels of a recorded `run`, in order, as one argv element each.
function labelsOf(argv) {
  const out = [];
  argv.forEach((a, i) => {
    if (a === '--label') out.push(argv[i + 1]);
  });
  return out;
}

async function withServer(f, fn, more) {
  const s = await f.open(more);
  try {
    return await fn(s);
  } finally {
    await s.close().finally(() => s.kill());
  }
}

describe('apple backend against the fake CLI', () => {
  test('system_status: the CLI found (CONTAINER_MCP_APPLE_CLI or PATH), its version, the service running', T, async () => {
    const f = fake();
    await withServer(f, async (s) => {
      const st = ok(await call(s, 'system_status', {}));
      assert.equal(st.activeBackend, 'apple');
      const apple = st.backends.find((b) => b.name === 'apple');
      assert.equal(apple.available, true, apple.reason);
      assert.equal(apple.version, 'container CLI version 1.0.0 (build: release, commit: fake)');
      assert.equal(apple.details.cli, FAKE);
    });
    // The status at start (picking the backend) and the call's: nothing else.
    assert.deepEqual([...new Set(f.calls().map((a) => a.join(' ')))], ['--version', 'system status']);
    // Found as `container` on PATH when CONTAINER_MCP_APPLE_CLI is unset.
    const bin = tmpDir('cmcp-apple-path-');
    dirs.push(bin);
    fs.symlinkSync(FAKE, path.join(bin, 'container'));
    await withServer(f, async (s) => {
      const apple = ok(await call(s, 'system_status', {})).backends.find((b) => b.name === 'apple');
      assert.equal(apple.available, true, apple.reason);
      assert.equal(apple.details.cli, path.join(bin, 'container'));
    }, { CONTAINER_MCP_APPLE_CLI: undefined, PATH: `${bin}:${process.env.PATH}` });
  });

  test('not chosen by default off macOS, even with the CLI working and no other backend usable', T, async () => {
    const f = fake();
    // Native without a state dir and Docker without an engine: unusable, so
    // only the platform rule keeps the apple backend from being picked.
    const s = await stdioClient({
      args: ['serve'],
      env: { ...f.env, CONTAINER_MCP_STATE_DIR: '/proc/cmcp-no-state', DOCKER_HOST: 'unix:///nonexistent/docker.sock', CONTAINER_MCP_DOCKER_HOST: undefined },
    });
    try {
      const st = ok(await call(s, 'system_status', {}));
      const apple = st.backends.find((b) => b.name === 'apple');
      assert.equal(apple.available, true, `the fake CLI works: ${apple.reason}`);
      assert.equal(apple.active, false);
      assert.equal(st.activeBackend, null, 'nothing is active: the apple backend is used off macOS only when chosen');
      refused(await call(s, 'run_container', { image: 'alpine', command: ['id'] }), /no container backend is available/);
      assert.ok(!f.calls().some((a) => a[0] === 'run'));
    } finally {
      await s.close().finally(() => s.kill());
    }
  });

  test('system_status start: true starts a stopped service (`container system start`), once', T, async () => {
    const f = fake();
    fs.writeFileSync(path.join(f.state, 'service-stopped'), '');
    await withServer(f, async (s) => {
      let apple = ok(await call(s, 'system_status', {})).backends.find((b) => b.name === 'apple');
      assert.equal(apple.available, false);
      assert.match(apple.reason, /service is not running: apiserver is not running/);
      assert.match(apple.fix, /start: true|container system start/);
      const before = f.calls().length;
      const st = ok(await call(s, 'system_status', { start: true }));
      assert.deepEqual(st.service, { backend: 'apple', state: 'started', message: 'container system service started' });
      assert.ok(f.calls().slice(before).some((a) => a.join(' ') === 'system start'), JSON.stringify(f.calls()));
      assert.equal(fs.existsSync(path.join(f.state, 'service-stopped')), false, 'the service was started');
      apple = st.backends.find((b) => b.name === 'apple');
      assert.equal(apple.available, true, apple.reason);
      const again = f.calls().length;
      assert.equal(ok(await call(s, 'system_status', { start: true })).service.state, 'running');
      assert.ok(!f.calls().slice(again).some((a) => a.join(' ') === 'system start'), 'no second start');
    });
  });

  test('run_container wait: the exact argv (--rm, labels, --network none, limits), output and exit code, removed after', T, async () => {
    const f = fake();
    await withServer(f, async (s) => {
      const r = ok(await call(s, 'run_container', {
        image: 'python:3.12-alpine', wait: true, cpus: 1.5, memory: '512m', env: { A: 'x=y z' }, workdir: '/srv',
        command: ['sh', '-c', 'echo out; echo err >&2; echo "$A"; exit 3'],
      }));
      assert.deepEqual([r.exitCode, r.stdout, r.stderr], [3, 'out\nx=y z\n', 'err\n']);
      const run = f.calls().find((a) => a[0] === 'run');
      const name = run[3];
      assert.match(name, /^cm-[0-9a-f]{16}$/);
      const session = labelsOf(run)[1];
      assert.match(session, /^dev\.container-mcp\.session=[0-9a-f]{32}$/);
      assert.deepEqual(run, [
        'run', '--rm', '--name', name,
        '--label', `${MANAGED}=true`, '--label', session,
        '--label', 'dev.container-mcp.client=container-mcp-e2e', '--label', 'dev.container-mcp.agent=agent',
        '--network', 'none', '--cpus', '2', '--memory', '512M', '--env', 'A=x=y z', '--workdir', '/srv',
        'python:3.12-alpine', 'sh', '-c', 'echo out; echo err >&2; echo "$A"; exit 3',
      ]);
      assert.equal(f.exists(name), false, '--rm removed it');
    });
  });

  test('run_container detached: --network none by default, none of it with network: true; list and inspect read configuration.labels', T, async () => {
    const f = fake();
    await withServer(f, async (s) => {
      const r = ok(await call(s, 'run_container', { image: 'alpine', name: 'web1', command: ['sleep', '120'] }));
      assert.deepEqual([r.id, r.name, r.state], ['web1', 'web1', 'running']);
      const run = f.calls().find((a) => a[0] === 'run');
      assert.deepEqual(run.slice(0, 4), ['run', '-d', '--name', 'web1']);
      assert.ok(run.join('\0').includes('--network\0none\0'), `default-deny: ${JSON.stringify(run)}`);
      assert.deepEqual(run.slice(-3), ['alpine', 'sleep', '120']);
      assert.ok(alive(f.record('web1').pid), 'the fake runs the main process');

      ok(await call(s, 'run_container', { image: 'alpine', name: 'net1', network: true, command: ['sleep', '120'] }));
      const net = f.calls().filter((a) => a[0] === 'run')[1];
      assert.ok(!net.includes('--network'), `network: true leaves --network out: ${JSON.stringify(net)}`);

      const list = ok(await call(s, 'list_containers', {})).containers;
      const web = list.find((c) => c.id === 'web1');
      assert.equal(web.state, 'running');
      assert.equal(web.image, 'alpine');
      assert.equal(web.labels[MANAGED], 'true');
      assert.equal(web.labels['dev.container-mcp.client'], 'container-mcp-e2e');
      assert.ok(f.calls().some((a) => a.join(' ') === 'ls --all --format json'));

      const doc = ok(await call(s, 'inspect_container', { container: 'web1' }));
      assert.deepEqual([doc.id, doc.runtime, doc.state, doc.network], ['web1', 'apple', 'running', false]);
      assert.equal(doc.configuration.labels[MANAGED], 'true', 'the CLI\'s own document is kept');
      assert.deepEqual(doc.argv, ['sleep', '120']);
      assert.equal(ok(await call(s, 'inspect_container', { container: 'net1' })).network, true);
      assert.ok(f.calls().some((a) => a.join(' ') === 'inspect web1'));
      // hostPort 0: a free port picked on 127.0.0.1, published there, reported back from inspect.
      const pub = ok(await call(s, 'run_container', { image: 'alpine', name: 'pub1', network: true, ports: [{ containerPort: 80 }], command: ['sleep', '120'] }));
      const spec = f.calls().filter((a) => a[0] === 'run').at(-1);
      const m = /^127\.0\.0\.1:(\d+):80\/tcp$/.exec(spec[spec.indexOf('--publish') + 1]);
      assert.ok(m && Number(m[1]) > 0, JSON.stringify(spec));
      assert.deepEqual(pub.ports, [{ hostIp: '127.0.0.1', hostPort: Number(m[1]), containerPort: 80, protocol: 'tcp' }]);
      for (const id of ['web1', 'net1', 'pub1']) ok(await call(s, 'remove_container', { container: id, force: true }));
    });
  });

  test('exec_in_container: no -- after the container id, stdin, env, workdir, exit code', T, async () => {
    const f = fake();
    await withServer(f, async (s) => {
      ok(await call(s, 'run_container', { image: 'alpine', name: 'box', command: ['sleep', '120'] }));
      const r = ok(await call(s, 'exec_in_container', {
        container: 'box', command: ['sh', '-c', 'echo hi; cat; echo "$K"; exit 5'], stdin: 'in\n',
        env: { K: 'v w' }, workdir: '/tmp',
      }));
      assert.deepEqual([r.exitCode, r.stdout], [5, 'hi\nin\nv w\n']);
      const exec = f.calls().find((a) => a[0] === 'exec');
      assert.deepEqual(exec, ['exec', '--interactive', '--env', 'K=v w', '--workdir', '/tmp', 'box',
        'sh', '-c', 'echo hi; cat; echo "$K"; exit 5']);
      assert.ok(!exec.includes('--'), 'no -- terminator: Apple would run it');
      // Later words may start with '-': they are the program's.
      const pf = ok(await call(s, 'exec_in_container', { container: 'box', command: ['printf', '%s|', '-n', '--x'] }));
      assert.equal(pf.stdout, '-n|--x|');
      ok(await call(s, 'remove_container', { container: 'box', force: true }));
    });
  });

  test('hostile values: a leading-dash command, env name or workdir never reaches the CLI; labels and env pass as one argv element', T, async () => {
    const f = fake();
    await withServer(f, async (s) => {
      ok(await call(s, 'run_container', { image: 'alpine', name: 'h1', command: ['sleep', '120'] }));
      const before = f.calls().length;
      for (const command of [['--privileged'], ['-it', 'sh'], ['--user=root', 'id'], ['-e', 'X=1', 'sh']]) {
        refused(await call(s, 'exec_in_container', { container: 'h1', command }), /starts with '-'/, /refused before running it/);
        refused(await call(s, 'run_container', { image: 'alpine', command }), /starts with '-'/);
      }
      refused(await call(s, 'exec_in_container', { container: 'h1', command: ['id'], env: { '-it': 'x' } }), /starts with '-'/);
      refused(await call(s, 'exec_in_container', { container: 'h1', command: ['id'], workdir: '--privileged' }), /starts with '-'/);
      refused(await call(s, 'run_container', { image: 'alpine', command: ['id'], workdir: '-w' }), /starts with '-'/);
      for (const name of ['a=b', 'a b', 'a\nb', '--privileged']) {
        refused(await call(s, 'run_container', { image: 'alpine', name, command: ['id'] }), /name/);
      }
      const after = f.calls().slice(before);
      assert.deepEqual(after.filter((a) => a[0] === 'run' || a[0] === 'exec'), [], `nothing ran: ${JSON.stringify(after)}`);
      assert.deepEqual([...new Set(verbs(after))].filter((v) => v !== 'ls'), [], 'only listing (the container lookup) happened');
      ok(await call(s, 'remove_container', { container: 'h1', force: true }));
    });

    // A client whose name holds '=', spaces, a newline and a flag: one label element, read back the same.
    const evil = 'evil = name\n--privileged x';
    const transport = new StdioClientTransport({ command: BIN, args: ['serve', '--backend', 'apple'], env: envWith(f.env), stderr: 'pipe' });
    const client = new Client({ name: evil, version: '1' }, { capabilities: {} });
    await withTimeout(client.connect(transport), 10000, 'initialize');
    try {
      const s = { client };
      ok(await call(s, 'run_container', { image: 'alpine', name: 'ev', env: { E: 'a=b\nc d' }, command: ['sleep', '120'] }));
      const run = f.calls().filter((a) => a[0] === 'run').at(-1);
      assert.ok(labelsOf(run).includes(`dev.container-mcp.client=${evil}`), JSON.stringify(run));
      assert.ok(run.join('\0').includes(`--env\0E=a=b\nc d\0`), JSON.stringify(run));
      assert.ok(!run.includes('--privileged'), 'the flag inside the label stayed inside it');
      const c = ok(await call(s, 'list_containers', {})).containers.find((x) => x.id === 'ev');
      assert.equal(c.labels['dev.container-mcp.client'], evil);
      ok(await call(s, 'remove_container', { container: 'ev', force: true }));
    } finally {
      await client.close();
    }
  });

  test('a container without the managed label in configuration.labels is refused', T, async () => {
    const f = fake();
    // Made with the CLI directly, as a user would: no labels.
    const { execFileSync } = await import('node:child_process');
    execFileSync(FAKE, ['run', '-d', '--name', 'theirs', 'alpine', 'sleep', '120'], { env: envWith(f.env) });
    await withServer(f, async (s) => {
      refused(await call(s, 'exec_in_container', { container: 'theirs', command: ['id'] }), /no container "theirs"|CONTAINER_MCP_ALLOW_UNMANAGED/);
      refused(await call(s, 'stop_container', { container: 'theirs' }), /no container "theirs"|CONTAINER_MCP_ALLOW_UNMANAGED/);
      assert.ok(!f.calls().some((a) => a[0] === 'exec' || a[0] === 'stop'));
      assert.equal(alive(f.record('theirs').pid), true);
    });
    execFileSync(FAKE, ['delete', '--force', 'theirs'], { env: envWith(f.env) });
  });

  test('container_logs (tail), container_stats, stop_container, remove_container: argv and effect', T, async () => {
    const f = fake();
    await withServer(f, async (s) => {
      ok(await call(s, 'run_container', { image: 'alpine', name: 'lg', command: ['sh', '-c', 'echo one; echo two; exec sleep 120'] }));
      const logs = await eventually(async () => {
        const r = ok(await call(s, 'container_logs', { container: 'lg' }));
        return r.logs.includes('two') && r;
      }, 30000, 'the main process\'s output in the logs');
      assert.equal(logs.logs, 'one\ntwo\n');
      assert.ok(f.calls().some((a) => a.join(' ') === 'logs lg'));
      assert.equal(ok(await call(s, 'container_logs', { container: 'lg', tail: 1 })).logs, 'two\n');
      assert.ok(f.calls().some((a) => a.join(' ') === 'logs -n 1 lg'));
      refused(await call(s, 'container_logs', { container: 'lg', since: '10m' }), /no --since/);

      const st = ok(await call(s, 'container_stats', { container: 'lg' }));
      assert.deepEqual([st.cpuUsec, st.memoryBytes, st.pids, st.ioReadBytes, st.source], [1234, 1 << 20, 1, 4096, 'container stats']);
      assert.ok(f.calls().some((a) => a.join(' ') === 'stats --no-stream --format json lg'));

      const pid = f.record('lg').pid;
      refused(await call(s, 'remove_container', { container: 'lg' }), /running/);
      assert.ok(alive(pid));
      ok(await call(s, 'stop_container', { container: 'lg', timeout: 3 }));
      assert.ok(f.calls().some((a) => a.join(' ') === 'stop -t 3 lg'));
      assert.equal(alive(pid), false, 'the main process is gone');
      assert.equal(ok(await call(s, 'list_containers', { all: true })).containers.find((c) => c.id === 'lg').state, 'exited');
      ok(await call(s, 'remove_container', { container: 'lg' }));
      assert.ok(f.calls().some((a) => a.join(' ') === 'delete lg'));
      assert.equal(f.exists('lg'), false);

      ok(await call(s, 'run_container', { image: 'alpine', name: 'lg2', command: ['sleep', '120'] }));
      const pid2 = f.record('lg2').pid;
      ok(await call(s, 'remove_container', { container: 'lg2', force: true }));
      assert.ok(f.calls().some((a) => a.join(' ') === 'delete --force lg2'));
      assert.equal(alive(pid2), false);
    });
  });

  test('container_stats on a CLI without `container stats`: says the backend cannot', T, async () => {
    const f = fake({ CM_FAKE_CONTAINER_NO_STATS: '1' });
    await withServer(f, async (s) => {
      ok(await call(s, 'run_container', { image: 'alpine', name: 'ns', command: ['sleep', '120'] }));
      refused(await call(s, 'container_stats', { container: 'ns' }), /apple backend cannot report stats/, /update Apple's container CLI/);
      ok(await call(s, 'remove_container', { container: 'ns', force: true }));
    });
  });

  test('copy_files both ways through `container cp`; a host path with \':\' refused before the CLI', T, async () => {
    const f = fake();
    await withServer(f, async (s) => {
      ok(await call(s, 'run_container', { image: 'alpine', name: 'cp1', command: ['sleep', '120'] }));
      const src = path.join(f.allowed, 'in.txt');
      fs.writeFileSync(src, 'hello apple\n');
      const inn = ok(await call(s, 'copy_files', { container: 'cp1', direction: 'to_container', source: src, destination: '/data/in.txt' }));
      assert.deepEqual([inn.files, inn.bytes], [1, 12]);
      assert.ok(f.calls().some((a) => JSON.stringify(a) === JSON.stringify(['cp', src, 'cp1:/data/in.txt'])), JSON.stringify(f.calls()));
      assert.equal(fs.readFileSync(path.join(f.state, 'roots', 'cp1', 'data', 'in.txt'), 'utf8'), 'hello apple\n');

      const dst = path.join(f.allowed, 'out.txt');
      const out = ok(await call(s, 'copy_files', { container: 'cp1', direction: 'from_container', source: '/data/in.txt', destination: dst }));
      assert.deepEqual([out.files, out.bytes], [1, 12]);
      assert.ok(f.calls().some((a) => JSON.stringify(a) === JSON.stringify(['cp', 'cp1:/data/in.txt', dst])));
      assert.equal(fs.readFileSync(dst, 'utf8'), 'hello apple\n');

      const colon = path.join(f.allowed, 'a:b');
      fs.writeFileSync(colon, 'x');
      const before = f.calls().filter((a) => a[0] === 'cp').length;
      refused(await call(s, 'copy_files', { container: 'cp1', direction: 'to_container', source: colon, destination: '/x' }), /holds ':'/);
      fs.symlinkSync('/etc/passwd', path.join(f.allowed, 'link'));
      refused(await call(s, 'copy_files', { container: 'cp1', direction: 'to_container', source: path.join(f.allowed, 'link'), destination: '/x' }), /symlink|allow/);
      assert.equal(f.calls().filter((a) => a[0] === 'cp').length, before, 'no cp ran');
      ok(await call(s, 'remove_container', { container: 'cp1', force: true }));
    });
  });

  test('the CLI missing: system_status says why and how to fix it; tools fail with the same', T, async () => {
    const f = fake();
    const empty = tmpDir('cmcp-apple-empty-');
    dirs.push(empty);
    await withServer(f, async (s) => {
      const st = ok(await call(s, 'system_status', {}));
      const apple = st.backends.find((b) => b.name === 'apple');
      assert.equal(apple.available, false);
      assert.match(apple.reason, /container CLI was not found/);
      assert.equal(apple.fix, "install Apple's container CLI (macOS 26, Apple silicon) or choose --backend native|docker");
      refused(await call(s, 'run_container', { image: 'alpine', command: ['id'] }), /not found.*install Apple's container CLI/);
    }, { CONTAINER_MCP_APPLE_CLI: undefined, PATH: empty });
    assert.deepEqual(f.calls(), []);
  });

  test('the CLI hanging: a clear error at the deadline, the hung CLI killed (it ignores SIGTERM), the server keeps serving', T, async () => {
    // A path of its own, so the test finds the hung CLI among the host's processes.
    const bin = tmpDir('cmcp-apple-hang-');
    dirs.push(bin);
    const cli = path.join(bin, 'container');
    fs.symlinkSync(FAKE, cli);
    const f = fake({ CM_FAKE_CONTAINER_HANG: 'ls', CONTAINER_MCP_APPLE_TIMEOUT_MS: '5000', CONTAINER_MCP_APPLE_CLI: cli });
    await withServer(f, async (s) => {
      refused(await call(s, 'list_containers', {}), /`container ls --all --format json` did not finish within 5000 ms/, /CONTAINER_MCP_APPLE_TIMEOUT_MS/);
      assert.ok(f.calls().some((a) => a[0] === 'ls'), 'the CLI was run');
      await eventually(() => procsWith(cli).length === 0, 30000, 'no hung CLI left');
      const hung = path.join(f.state, 'hung.pids');
      for (const pid of fs.existsSync(hung) ? fs.readFileSync(hung, 'utf8').split('\n').filter(Boolean) : []) {
        assert.equal(alive(Number(pid)), false, 'the CLI that ignored SIGTERM got SIGKILL');
      }
      const st = ok(await call(s, 'system_status', {}));
      assert.equal(st.backends.find((b) => b.name === 'apple').available, true);
    });
  });
});
