// Shape checks shared by the transport tests.
import assert from 'node:assert/strict';

import { VERSION } from './lib.mjs';

// The checks every tool listing must pass, whatever the transport.
export function checkToolShape(tool) {
  assert.equal(typeof tool.name, 'string', 'tool.name');
  assert.match(tool.name, /^[A-Za-z0-9_.-]{1,128}$/, `tool name ${tool.name}`);
  assert.equal(typeof tool.title, 'string', `${tool.name}.title`);
  assert.ok(tool.title.length > 0, `${tool.name}.title is empty`);
  assert.equal(typeof tool.description, 'string', `${tool.name}.description`);
  assert.ok(tool.description.length > 10, `${tool.name}.description is too short`);
  assert.equal(tool.inputSchema?.type, 'object', `${tool.name}.inputSchema.type`);
  assert.equal(tool.outputSchema?.type, 'object', `${tool.name}.outputSchema.type`);
  assert.equal(typeof tool.annotations, 'object', `${tool.name}.annotations`);
  assert.equal(typeof tool.annotations.readOnlyHint, 'boolean', `${tool.name}.annotations.readOnlyHint`);
}

export function checkSystemStatus(result) {
  assert.notEqual(result.isError, true, `system_status failed: ${JSON.stringify(result.content)}`);
  const sc = result.structuredContent;
  assert.equal(typeof sc, 'object');
  assert.equal(sc.server?.name, 'container-mcp');
  assert.equal(sc.server?.version, VERSION);
  assert.ok(Array.isArray(sc.backends) && sc.backends.length > 0, 'backends is a non-empty array');
  for (const b of sc.backends) {
    assert.equal(typeof b.name, 'string', 'backend.name');
    assert.equal(typeof b.available, 'boolean', `backend ${b.name}.available`);
    for (const k of ['version', 'reason', 'fix']) {
      assert.ok(k in b, `backend ${b.name} has "${k}"`);
      assert.ok(b[k] === null || typeof b[k] === 'string', `backend ${b.name}.${k} is a string or null`);
    }
    if (!b.available) {
      assert.ok(b.reason, `unavailable backend ${b.name} says why`);
      assert.ok(b.fix, `unavailable backend ${b.name} says how to fix it`);
    }
  }
  assert.equal(typeof sc.policy, 'object', 'policy');
  assert.ok(sc.policy !== null && !Array.isArray(sc.policy), 'policy is an object');
  assert.ok(Array.isArray(result.content) && result.content.length > 0, 'content');
  assert.equal(result.content[0].type, 'text');
  assert.ok(result.content[0].text.length > 0);
}

// sleep reports the time it really slept: at least what was asked.  (No
// upper bound: a loaded machine may wake it late; a sleep that ran to its
// end and was not cut short is what the callers check.)
export function assertSlept(sleptMs, ms) {
  assert.equal(typeof sleptMs, 'number', 'sleptMs is a number');
  assert.ok(Number.isInteger(sleptMs), 'sleptMs is an integer');
  assert.ok(sleptMs >= ms, `sleptMs ${sleptMs} for ms ${ms}`);
}

// Progress notifications of a `sleep` in `steps` slices: one per slice, the
// progress strictly increasing and never above the total, total = steps.
// (The server numbers the slices from 0, as each one starts, or from 1, as
// each one ends: both are fine by the spec.)
export function assertProgress(seen, steps, what = 'progress') {
  const shown = JSON.stringify(seen.map((p) => [p.progress, p.total]));
  assert.equal(seen.length, steps, `${what}: one notification per slice: ${shown}`);
  let last = -Infinity;
  for (const p of seen) {
    assert.equal(typeof p.progress, 'number', `${what}: progress is a number`);
    assert.ok(p.progress > last, `${what}: progress increases: ${shown}`);
    assert.equal(p.total, steps, `${what}: total = steps: ${shown}`);
    assert.ok(p.progress >= 0 && p.progress <= steps, `${what}: 0 <= progress <= total: ${shown}`);
    last = p.progress;
  }
}
