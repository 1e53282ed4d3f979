// HTTP checks a mutation of tests/mutations/ found unguarded (issue 9): an
// Origin is scheme://host[:port] and nothing more, so a page of
// http://localhost@evil.example (a userinfo trick) is a foreign origin,
// refused with 403 like any other, and never taken for localhost.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { httpRequest, initBody, mcpHeaders, startHttp } from './lib.mjs';

const T = { timeout: 30000 };

describe('HTTP Origin forms (mutations)', () => {
  let srv;
  before(async () => {
    srv = await startHttp();
  });
  after(async () => {
    if (srv) await srv.stop().finally(() => srv.kill());
  });

  test('an Origin with userinfo, a path or a query is 403, however local its start looks', T, async () => {
    const target = { port: srv.port };
    const local = `http://127.0.0.1:${srv.port}`;
    // The control: the plain local origin is served.
    let res = await httpRequest(target, { headers: mcpHeaders({ extra: { Origin: local } }), body: initBody() });
    assert.equal(res.status, 200, `Origin ${local} → ${res.status} ${res.body}`);
    for (const origin of [
      'http://localhost@evil.example',
      `http://127.0.0.1:${srv.port}@evil.example`,
      `http://user:pw@localhost:${srv.port}`,
      `${local}/path`,
      `${local}?q=1`,
      'null',
    ]) {
      res = await httpRequest(target, { headers: mcpHeaders({ extra: { Origin: origin } }), body: initBody() });
      assert.equal(res.status, 403, `Origin ${origin} → ${res.status} ${res.body}`);
    }
  });
});
