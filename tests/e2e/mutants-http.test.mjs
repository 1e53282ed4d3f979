// HTTP checks a mutation of tests/mutations/ found unguarded (issue 9): a
// name that only starts like this machine's (localhost.evil.example,
// 127.0.0.1.nip.io: DNS rebinding names) is foreign, as Host and as Origin,
// and an Origin is scheme://host[:port] and nothing more (userinfo, a path
// or a query make it no origin): all 403.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { httpRequest, initBody, mcpHeaders, startHttp } from './lib.mjs';

const T = { timeout: 30000 };

describe('HTTP Host and Origin forms (mutations)', () => {
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
      'http://localhost.evil.example',
      `http://127.0.0.1.nip.io:${srv.port}`,
    ]) {
      res = await httpRequest(target, { headers: mcpHeaders({ extra: { Origin: origin } }), body: initBody() });
      assert.equal(res.status, 403, `Origin ${origin} → ${res.status} ${res.body}`);
    }
  });

  test('a Host that only starts like localhost or 127.0.0.1 is 403', T, async () => {
    const target = { port: srv.port };
    for (const host of ['localhost.evil.example', `localhost.evil.example:${srv.port}`, `127.0.0.1.nip.io:${srv.port}`, 'localhostx']) {
      const res = await httpRequest(target, { headers: mcpHeaders({ extra: { Host: host } }), body: initBody() });
      assert.equal(res.status, 403, `Host ${host} → ${res.status} ${res.body}`);
    }
  });
});
