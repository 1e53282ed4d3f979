// HTTP is authenticated by default (issue 7, point 8): without
// CONTAINER_MCP_TOKEN the server generates a token into <state dir>/http-token
// (0600, never through a symlink, reused on restart); another local user
// without it gets 401 and cannot read the file; --no-auth works on loopback
// only; a wildcard or non-loopback bind needs CONTAINER_MCP_TOKEN.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, test } from 'node:test';

import { DIAG, httpClient, httpRequest, initBody, mcpHeaders, rawHttpSession, runCli, spawnServer, tmpDir } from './lib.mjs';

const T = { timeout: 30000 };
const NOBODY = 65534;
const isRoot = process.getuid?.() === 0;
const haveSetpriv = spawnSync('setpriv', ['--version']).status === 0;
const haveCurl = spawnSync('curl', ['--version']).status === 0;
const asNobodySkip = !isRoot ? 'needs root to act as the user nobody' : !haveSetpriv ? 'setpriv is missing' : false;

// A server on 127.0.0.1 with its own state dir and no CONTAINER_MCP_TOKEN.
async function startDefault(state, args = []) {
  const srv = spawnServer(['serve', '--http', '127.0.0.1:0', ...DIAG, ...args], {
    env: { CONTAINER_MCP_STATE_DIR: state, CONTAINER_MCP_TOKEN: undefined },
  });
  try {
    const m = await srv.waitStderr(/listening on (http:\/\/127\.0\.0\.1:(\d+)\/mcp)/);
    srv.url = m[1];
    srv.port = Number(m[2]);
  } catch (e) {
    srv.kill();
    throw e;
  }
  return srv;
}

// Run a command as nobody (no groups); returns spawnSync's result.
function asNobody(cmd, args) {
  return spawnSync('setpriv', [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', '--', cmd, ...args], { encoding: 'utf8', timeout: 10000 });
}

// A POST to /mcp with curl, as nobody, without a token: the HTTP status.
function curlAsNobody(port, body, headers = {}) {
  const h = Object.entries(mcpHeaders({ extra: headers })).flatMap(([k, v]) => ['-H', `${k}: ${v}`]);
  const r = asNobody('curl', ['-s', '-o', '/dev/null', '-w', '%{http_code}', '-X', 'POST', ...h, '--data-binary', JSON.stringify(body), `http://127.0.0.1:${port}/mcp`]);
  return r.stdout.trim();
}

async function startFails(args, env) {
  const r = await runCli(['serve', ...args, ...DIAG], { env: { CONTAINER_MCP_TOKEN: undefined, ...env } });
  assert.notEqual(r.code, 0, `serve ${args.join(' ')} must refuse to start; stderr:\n${r.stderr}`);
  assert.doesNotMatch(r.stderr, /listening on/);
  return r.stderr;
}

describe('HTTP authenticated by default', () => {
  test('the token file: 0600, owned by the server, named in the log; without it 401, with it the tools work', T, async () => {
    const state = tmpDir('cmcp-auth-');
    fs.chmodSync(state, 0o755); // let nobody reach the file: its own mode must stop them
    const srv = await startDefault(state);
    try {
      const file = path.join(state, 'http-token');
      const m = srv.stderr().match(/Authorization: Bearer \$\(cat ([^)]+)\)/);
      assert.ok(m, `the log says how to pass the token:\n${srv.stderr()}`);
      assert.equal(m[1], file);
      assert.match(srv.stderr(), /claude mcp add --transport http \S+ http:\/\/127\.0\.0\.1:\d+\/mcp --header "Authorization: Bearer \$\(cat /);
      const st = fs.lstatSync(file);
      assert.ok(st.isFile(), 'a regular file');
      assert.equal(st.mode & 0o7777, 0o600, `mode ${(st.mode & 0o7777).toString(8)}`);
      assert.equal(st.uid, process.getuid(), 'owned by the server');
      const token = fs.readFileSync(file, 'utf8').trim();
      assert.match(token, /^[0-9a-f]{64}$/, 'a 256-bit hex token');
      assert.ok(!srv.stderr().includes(token), 'the token itself is not logged');

      const t = { port: srv.port };
      const res = await httpRequest(t, { headers: mcpHeaders(), body: initBody() });
      assert.equal(res.status, 401, `no token → ${res.status}`);
      assert.match(res.headers['www-authenticate'] || '', /^Bearer/);
      const auth = { Authorization: `Bearer ${token}` };
      const { session } = await rawHttpSession(t, { headers: auth });
      const c = await httpClient(srv.url, { requestInit: { headers: auth } });
      const r = await c.client.callTool({ name: 'echo', arguments: { text: 'with the token' } });
      assert.equal(r.structuredContent.text, 'with the token');
      await c.close();

      if (!asNobodySkip) {
        const cat = asNobody('cat', [file]);
        assert.notEqual(cat.status, 0, 'nobody read the token file');
        assert.match(cat.stderr, /Permission denied/);
        assert.equal(cat.stdout, '');
        if (haveCurl) {
          assert.equal(curlAsNobody(srv.port, initBody()), '401', 'nobody without the token: initialize');
          // even with a live session id, no tool runs without the token
          const call = { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'echo', arguments: { text: 'x' } } };
          assert.equal(curlAsNobody(srv.port, call, { 'Mcp-Session-Id': session }), '401', 'nobody without the token: tools/call');
          assert.equal(curlAsNobody(srv.port, initBody(), { Authorization: 'Bearer ' + '0'.repeat(64) }), '401', 'a guessed token');
        }
      }
      await srv.stop();

      // a second start reuses the token: configured clients keep working
      const again = await startDefault(state);
      try {
        assert.equal(fs.readFileSync(file, 'utf8').trim(), token, 'the same token');
        assert.doesNotMatch(again.stderr(), /created the HTTP bearer token/);
        const c2 = await httpClient(again.url, { requestInit: { headers: auth } });
        assert.deepEqual(await c2.client.ping(), {});
        await c2.close();
      } finally {
        await again.stop().finally(() => again.kill());
      }
    } finally {
      srv.kill();
      fs.rmSync(state, { recursive: true, force: true });
    }
  });

  test('a symlink planted at the token path is not followed: the server refuses to start', T, async () => {
    const state = tmpDir('cmcp-auth-');
    const target = path.join(tmpDir('cmcp-auth-target-'), 'stolen');
    try {
      fs.symlinkSync(target, path.join(state, 'http-token'));
      const err = await startFails(['--http', '127.0.0.1:0'], { CONTAINER_MCP_STATE_DIR: state });
      assert.match(err, /symbolic link/);
      assert.ok(!fs.existsSync(target), 'nothing was written through the link');
      // a link to an existing file with a valid-looking token is refused too
      fs.writeFileSync(target, 'a'.repeat(64) + '\n', { mode: 0o600 });
      await startFails(['--http', '127.0.0.1:0'], { CONTAINER_MCP_STATE_DIR: state });
      assert.equal(fs.readFileSync(target, 'utf8'), 'a'.repeat(64) + '\n');
    } finally {
      fs.rmSync(state, { recursive: true, force: true });
      fs.rmSync(path.dirname(target), { recursive: true, force: true });
    }
  });

  test('a token file others can read, or an empty one, is refused with what to fix', T, async () => {
    const state = tmpDir('cmcp-auth-');
    const file = path.join(state, 'http-token');
    try {
      fs.writeFileSync(file, 'b'.repeat(64) + '\n', { mode: 0o644 });
      fs.chmodSync(file, 0o644);
      let err = await startFails(['--http', '127.0.0.1:0'], { CONTAINER_MCP_STATE_DIR: state });
      assert.match(err, /mode 0644/);
      assert.match(err, /chmod 600/);
      fs.writeFileSync(file, '', { mode: 0o600 });
      fs.chmodSync(file, 0o600);
      err = await startFails(['--http', '127.0.0.1:0'], { CONTAINER_MCP_STATE_DIR: state });
      assert.match(err, /no valid token/);
    } finally {
      fs.rmSync(state, { recursive: true, force: true });
    }
  });

  test('0.0.0.0 needs CONTAINER_MCP_TOKEN; --no-auth is refused there', T, async () => {
    const state = tmpDir('cmcp-auth-');
    try {
      let err = await startFails(['--http', '0.0.0.0:0'], { CONTAINER_MCP_STATE_DIR: state });
      assert.match(err, /CONTAINER_MCP_TOKEN/);
      err = await startFails(['--http', '0.0.0.0:0', '--no-auth'], { CONTAINER_MCP_STATE_DIR: state });
      assert.match(err, /--no-auth is for loopback only/);
      assert.ok(!fs.existsSync(path.join(state, 'http-token')), 'no token file for a refused start');
      // with a token of the operator's, it serves
      const srv = spawnServer(['serve', '--http', '0.0.0.0:0', ...DIAG], { env: { CONTAINER_MCP_STATE_DIR: state, CONTAINER_MCP_TOKEN: 'operator-chosen-token-0123456789abcdef' } });
      try {
        await srv.waitStderr(/listening on http:\/\/0\.0\.0\.0:\d+\/mcp/);
      } finally {
        await srv.stop().finally(() => srv.kill());
      }
    } finally {
      fs.rmSync(state, { recursive: true, force: true });
    }
  });

  test('--no-auth on loopback serves without a token and warns', T, async () => {
    const state = tmpDir('cmcp-auth-');
    const srv = await startDefault(state, ['--no-auth']);
    try {
      assert.match(srv.stderr(), /warn: --no-auth/);
      assert.ok(!fs.existsSync(path.join(state, 'http-token')), 'no token file with --no-auth');
      const c = await httpClient(srv.url);
      assert.deepEqual(await c.client.ping(), {});
      await c.close();
      await srv.stop();
    } finally {
      srv.kill();
      fs.rmSync(state, { recursive: true, force: true });
    }
  });
});
