// The command line a person types: help, version, status, and clear errors.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { checkSystemStatus } from './checks.mjs';
import { VERSION, runCli } from './lib.mjs';

const T = { timeout: 20000 };

describe('command line', () => {
  test('--help lists the subcommands and exits 0', T, async () => {
    const r = await runCli(['--help']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /usage/i);
    assert.match(r.stdout, /\bserve\b/);
    assert.match(r.stdout, /\bstatus\b/);
    assert.equal(r.stderr.includes('ERROR'), false);
  });

  test('--version prints "container-mcp 0.1.0"', T, async () => {
    const r = await runCli(['--version']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.trim(), `container-mcp ${VERSION}`);
  });

  test('serve --help documents the transports and options', T, async () => {
    const r = await runCli(['serve', '--help']);
    assert.equal(r.code, 0, r.stderr);
    for (const opt of ['--http', '--socket', '--page-size', '--toolsets', '--max-message-bytes', '--allow-host']) {
      assert.ok(r.stdout.includes(opt), `serve --help mentions ${opt}`);
    }
    assert.match(r.stdout, /CONTAINER_MCP_TOKEN/);
  });

  test('status --help exits 0', T, async () => {
    const r = await runCli(['status', '--help']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /status/);
  });

  test('status prints the system_status JSON', T, async () => {
    const r = await runCli(['status']);
    assert.equal(r.code, 0, r.stderr);
    let j;
    assert.doesNotThrow(() => (j = JSON.parse(r.stdout)), `status output is JSON: ${r.stdout.slice(0, 500)}`);
    checkSystemStatus({ structuredContent: j, content: [{ type: 'text', text: r.stdout }] });
  });

  test('an unknown flag exits non-zero and names the flag', T, async () => {
    for (const args of [['--bogus-flag'], ['serve', '--bogus-flag'], ['status', '--bogus-flag']]) {
      const r = await runCli(args);
      assert.notEqual(r.code, 0, `${args.join(' ')} must fail`);
      assert.ok(r.stderr.includes('--bogus-flag'), `stderr names the flag: ${r.stderr}`);
      assert.equal(r.stdout, '', 'nothing on stdout');
    }
  });

  test('an unknown subcommand exits non-zero and names it', T, async () => {
    const r = await runCli(['frobnicate']);
    assert.notEqual(r.code, 0);
    assert.match(r.stderr, /frobnicate/);
  });

  test('bad option values are refused with a message', T, async () => {
    for (const args of [
      ['serve', '--page-size', 'zero'],
      ['serve', '--max-message-bytes', '-1'],
      ['serve', '--http', 'not-a-port:xx'],
      ['serve', '--http'],
    ]) {
      const r = await runCli(args, { input: '' });
      assert.notEqual(r.code, 0, `${args.join(' ')} must fail (stderr: ${r.stderr})`);
      assert.ok(r.stderr.trim().length > 0, `${args.join(' ')} explains the failure`);
    }
  });

  test('no arguments means MCP over stdio: EOF on stdin exits 0 with nothing on stdout', T, async () => {
    const r = await runCli([], { input: '' });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, '');
    const init = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'cli', version: '1' } } });
    const r2 = await runCli([], { input: init + '\n' });
    assert.equal(r2.code, 0, r2.stderr);
    const lines = r2.stdout.trim().split('\n');
    assert.equal(lines.length, 1, `one reply line: ${r2.stdout}`);
    assert.equal(JSON.parse(lines[0]).result.serverInfo.name, 'container-mcp');
  });
});
