// Settings a mutation of tests/mutations/ found unguarded (issue 9): a
// CONTAINER_MCP_USERNS_BASE that would map sandbox ids onto the host's own
// users (below 65536) or past 2^32 stops the server at start, naming the
// variable, instead of leaving it running without its native runtime.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { after, describe, test } from 'node:test';

import { runCli, tmpDir } from './lib.mjs';

const T = { timeout: 30000 };
const state = tmpDir('cmcp-mut-cli-');

after(() => fs.rmSync(state, { recursive: true, force: true }));

describe('CONTAINER_MCP_USERNS_BASE bounds (mutations)', () => {
  test('a base below 65536 or too close to 2^32 is refused at start; the bounds themselves are fine', T, async () => {
    const env = (base) => ({ CONTAINER_MCP_STATE_DIR: state, CONTAINER_MCP_USERNS_BASE: base });
    for (const base of ['0', '1000', '65535', '4294901760']) {
      const r = await runCli(['status'], { env: env(base) });
      assert.notEqual(r.code, 0, `USERNS_BASE=${base}: exit ${r.code}, stdout ${r.stdout}`);
      assert.match(r.stderr, /CONTAINER_MCP_USERNS_BASE/, `USERNS_BASE=${base}: ${r.stderr}`);
      assert.equal(r.stdout, '', `USERNS_BASE=${base} printed a status`);
    }
    for (const base of ['65536', '4294901759']) {
      const r = await runCli(['status'], { env: env(base) });
      assert.equal(r.code, 0, `USERNS_BASE=${base}: exit ${r.code}, ${r.stderr}`);
    }
  });
});
