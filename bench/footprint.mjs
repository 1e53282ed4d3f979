#!/usr/bin/env node
// The server's memory footprint, printed, never asserted: figures a loaded
// or differently configured machine moves, so the test suite does not judge
// them (leaks are caught there by LeakSanitizer and valgrind instead).
//
//   CONTAINER_MCP_BIN=build/container-mcp node bench/footprint.mjs
//
// Each line is "name: value (target)"; a figure over its target says MISS.
// Exits 1 only when the measurement itself failed.
import { eventually, fdCount, httpOpen, httpRequest, keepAliveAgent, procStatus, rawHttpCall, rawHttpSession, startHttp } from '../tests/e2e/lib.mjs';

function show(name, kb, targetKb) {
  const miss = kb > targetKb ? '  MISS' : '';
  console.log(`${name}: ${kb} kB (target under ${targetKb} kB)${miss}`);
}

// n sessions, 16 at a time: initialize, one call, DELETE.
async function churn(target, n) {
  const agent = keepAliveAgent();
  try {
    for (let i = 0; i < n; i += 16) {
      await Promise.all(Array.from({ length: Math.min(16, n - i) }, async () => {
        const { session } = await rawHttpSession(target, { agent });
        await rawHttpCall(target, session, 'tools/call', { name: 'echo', arguments: { text: 'x' } }, { agent });
        await httpRequest(target, { method: 'DELETE', headers: { 'Mcp-Session-Id': session }, agent });
      }));
    }
  } finally {
    agent.destroy();
  }
}

// n legacy SSE streams opened and dropped, 10 at a time.
async function streams(target, n) {
  for (let i = 0; i < n; i += 10) {
    const batch = await Promise.all(Array.from({ length: 10 }, () =>
      httpOpen(target, { path: '/sse', headers: { Accept: 'text/event-stream' } })));
    for (const b of batch) b.res.destroy();
  }
}

const srv = await startHttp();
try {
  const target = { port: srv.port };
  show('idle HTTP server RSS', procStatus(srv.pid).rssKb, 32 * 1024);

  await churn(target, 100); // warm up allocator, thread pools, caches
  let m0 = procStatus(srv.pid);
  await churn(target, 1000);
  show('RSS growth over 1,000 HTTP sessions opened and deleted', procStatus(srv.pid).rssKb - m0.rssKb, 4096);

  await streams(target, 20);
  const fd0 = fdCount(srv.pid);
  m0 = procStatus(srv.pid);
  await streams(target, 300);
  await eventually(() => fdCount(srv.pid) <= fd0 + 1, 30000, 'the streams\' fds to close').catch(() => {});
  show('RSS growth over 300 SSE streams opened and dropped', procStatus(srv.pid).rssKb - m0.rssKb, 2048);
} finally {
  await srv.stop().catch(() => {}).finally(() => srv.kill());
}
