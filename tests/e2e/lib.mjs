// Helpers for the end-to-end tests: spawn container-mcp over stdio, HTTP or a
// Unix socket, talk to it with the official MCP SDK client or with raw bytes,
// and check that it exits cleanly (exit code 0, no sanitizer report).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import crypto from 'node:crypto';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const REPO = path.resolve(HERE, '..', '..');
export const BIN = path.resolve(REPO, process.env.CONTAINER_MCP_BIN || 'build/container-mcp');
export const VERSION = '0.1.0';
export const LATEST = '2025-11-25';
export const SUPPORTED = ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05'];
export const DEFAULT_CAP = 16 * 1024 * 1024;
// Every spawned server gets the diagnostics tools (echo, sleep) unless a test
// says otherwise.
export const DIAG = ['--toolsets', 'all'];

// A sanitizer build (ASan/UBSan) keeps freed memory in quarantine, so RSS
// bounds are only checked on a plain build.
let sanitized;
export function isSanitized() {
  if (sanitized === undefined) {
    if (process.env.CONTAINER_MCP_SANITIZED) {
      sanitized = process.env.CONTAINER_MCP_SANITIZED !== '0';
    } else {
      try {
        const buf = fs.readFileSync(BIN);
        sanitized = buf.includes('__asan_init') || buf.includes('__ubsan_handle');
      } catch {
        sanitized = false;
      }
    }
  }
  return sanitized;
}

export function binExists() {
  try {
    fs.accessSync(BIN, fs.constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

// ---------------------------------------------------------------- timing --

export function withTimeout(promise, ms, what = 'operation') {
  let timer;
  const t = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([promise, t]).finally(() => clearTimeout(timer));
}

// Poll `fn` until it returns a truthy value (for state only visible in /proc).
// The deadline only matters when the condition never comes, so it is long:
// the suite runs on loaded 2-core machines.
export async function eventually(fn, ms = 30000, what = 'a condition', every = 50) {
  const end = Date.now() + ms;
  let last;
  for (;;) {
    last = await fn();
    if (last) return last;
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, every));
  }
}

// A promise with its resolve/reject exposed.
export function deferred() {
  let resolve, reject;
  const promise = new Promise((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

// ------------------------------------------------------------- processes --

// process.env with `extra` on top; a key set to undefined is removed.
export function envWith(extra = {}) {
  const env = { ...process.env };
  for (const [k, v] of Object.entries(extra)) {
    if (v === undefined) delete env[k];
    else env[k] = String(v);
  }
  return env;
}

const SANITIZER_MARKS = ['ERROR: AddressSanitizer', 'LeakSanitizer', 'runtime error:', 'ERROR: ThreadSanitizer', 'WARNING: ThreadSanitizer'];

export function assertNoSanitizerReport(stderr, what = 'server') {
  for (const mark of SANITIZER_MARKS) {
    if (stderr.includes(mark)) {
      const at = stderr.indexOf(mark);
      assert.fail(`${what} stderr contains "${mark}":\n${stderr.slice(Math.max(0, at - 200), at + 4000)}`);
    }
  }
}

export function assertCleanExit({ code, signal }, stderr, what = 'server') {
  assertNoSanitizerReport(stderr, what);
  assert.equal(signal, null, `${what} was killed by ${signal}; stderr tail:\n${tail(stderr)}`);
  assert.equal(code, 0, `${what} exited with ${code}; stderr tail:\n${tail(stderr)}`);
}

export function tail(s, n = 3000) {
  return s.length > n ? '…' + s.slice(-n) : s;
}

// Collect a stream's text, keeping at most `max` characters (head and tail).
function collect(stream, max = 4 * 1024 * 1024) {
  const c = { text: '', listeners: new Set() };
  if (!stream) return c;
  stream.setEncoding?.('utf8');
  stream.on('data', (d) => {
    c.text += d;
    if (c.text.length > max) c.text = c.text.slice(0, max / 2) + '\n[…]\n' + c.text.slice(-max / 2);
    for (const l of c.listeners) l();
  });
  return c;
}

function waitText(c, re, ms, what) {
  return withTimeout(
    new Promise((resolve) => {
      const check = () => {
        const m = c.text.match(re);
        if (m) {
          c.listeners.delete(check);
          resolve(m);
        }
      };
      c.listeners.add(check);
      check();
    }),
    ms,
    what,
  );
}

function exitPromise(proc) {
  if (proc.exitCode !== null || proc.signalCode !== null) {
    return Promise.resolve({ code: proc.exitCode, signal: proc.signalCode });
  }
  return new Promise((resolve) => proc.once('close', (code, signal) => resolve({ code, signal })));
}

// Run the binary to completion (CLI tests).
export async function runCli(args, { env = {}, input, timeout = 15000 } = {}) {
  const proc = spawn(BIN, args, { env: envWith(env), stdio: ['pipe', 'pipe', 'pipe'] });
  const out = collect(proc.stdout);
  const err = collect(proc.stderr);
  const exited = exitPromise(proc);
  proc.stdin.on('error', () => {});
  proc.stdin.end(input ?? '');
  let res;
  try {
    res = await withTimeout(exited, timeout, `container-mcp ${args.join(' ')} to exit`);
  } catch (e) {
    proc.kill('SIGKILL');
    throw e;
  }
  assertNoSanitizerReport(err.text, `container-mcp ${args.join(' ')}`);
  return { code: res.code, signal: res.signal, stdout: out.text, stderr: err.text };
}

// A server process with its output collected.
export function spawnServer(args, { env = {}, stdin = 'ignore' } = {}) {
  const proc = spawn(BIN, args, { env: envWith(env), stdio: [stdin, 'pipe', 'pipe'] });
  const out = collect(proc.stdout);
  const err = collect(proc.stderr);
  const exited = exitPromise(proc);
  proc.on('error', () => {});
  proc.stdin?.on('error', () => {});
  const srv = {
    proc,
    pid: proc.pid,
    args,
    exited,
    stdout: () => out.text,
    stderr: () => err.text,
    waitStderr: (re, ms = 10000) =>
      Promise.race([
        waitText(err, re, ms, `${re} on stderr of container-mcp ${args.join(' ')}`),
        exited.then((r) => {
          throw new Error(`server exited (${JSON.stringify(r)}) before printing ${re}; stderr:\n${tail(err.text)}`);
        }),
      ]),
    alive: () => proc.exitCode === null && proc.signalCode === null,
    // Stop with a signal and check the exit is clean.
    async stop(signal = 'SIGTERM', ms = 10000) {
      if (srv.alive()) proc.kill(signal);
      let r;
      try {
        r = await withTimeout(exited, ms, `server to exit after ${signal}`);
      } catch (e) {
        proc.kill('SIGKILL');
        throw e;
      }
      assertCleanExit(r, err.text);
      return r;
    },
    // For cleanup paths (after a failed assertion): never throws.
    kill() {
      if (srv.alive()) proc.kill('SIGKILL');
    },
  };
  return srv;
}

export function procStatus(pid) {
  const txt = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (k) => {
    const m = txt.match(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm'));
    return m ? Number(m[1]) : NaN;
  };
  return { rssKb: kb('VmRSS'), hwmKb: kb('VmHWM'), threads: Number((txt.match(/^Threads:\s+(\d+)/m) || [])[1]) };
}

export function fdCount(pid) {
  return fs.readdirSync(`/proc/${pid}/fd`).length;
}

// The TCP connections on `port` that process `pid` holds open: its socket
// fds matched against its network namespace's table, so fds the server
// opens for other work (a backend warming up) do not count, nor do
// connections still waiting in the listen backlog (no fd yet).
export function heldConnections(pid, port) {
  const inodes = new Set();
  for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
    let link;
    try {
      link = fs.readlinkSync(`/proc/${pid}/fd/${fd}`);
    } catch {
      continue;
    }
    const m = /^socket:\[(\d+)\]$/.exec(link);
    if (m) inodes.add(m[1]);
  }
  let n = 0;
  for (const table of ['tcp', 'tcp6']) {
    let text;
    try {
      text = fs.readFileSync(`/proc/${pid}/net/${table}`, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 10 || f[3] === '0A') continue; // 0A: the listening socket
      if (parseInt(f[1].split(':')[1], 16) === port && inodes.has(f[9])) n++;
    }
  }
  return n;
}

// An http.Server listening on a free loopback port: { host: "127.0.0.1:PORT",
// close() } where close also drops the connections still open (a held
// response would keep server.close() waiting).
export async function listenLoopback(server) {
  const sockets = new Set();
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    host: `127.0.0.1:${server.address().port}`,
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise((r) => server.close(r));
    },
  };
}

// The KEY=VALUE lines of DIR/env that tests/engines/start.sh and
// tests/registry/start.sh write; { MISSING: missing } when there is none.
export function readEnvFile(dir, missing) {
  const env = {};
  try {
    for (const line of fs.readFileSync(path.join(dir, 'env'), 'utf8').split('\n')) {
      const m = /^([A-Z_]+)=(.*)$/.exec(line);
      if (m) env[m[1]] = m[2].replace(/^'(.*)'$/, '$1');
    }
  } catch {
    env.MISSING = missing;
  }
  return env;
}

export function tmpDir(prefix = 'cmcp-e2e-') {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

// ----------------------------------------------------- SDK client helpers --

const CLIENT_INFO = { name: 'container-mcp-e2e', version: '1.0.0' };

// The client collects the errors its transport reports (unparseable lines,
// progress for unknown tokens…) until close() starts: aborting the streams on
// close is reported as an error by some SDK transports.
function newClient() {
  const client = new Client(CLIENT_INFO, { capabilities: {} });
  const errors = [];
  let closing = false;
  client.onerror = (e) => {
    if (!closing) errors.push(e);
  };
  const close = client.close.bind(client);
  client.close = () => {
    closing = true;
    return close();
  };
  return { client, errors };
}

// The SDK client over stdio, the server spawned by StdioClientTransport.
// `wrap`: a command that runs the server, e.g. setpriv to drop privileges.
export async function stdioClient({ args = ['serve', ...DIAG], env = {}, wrap = [], initTimeout = 10000 } = {}) {
  const transport = new StdioClientTransport({
    command: wrap.length ? wrap[0] : BIN,
    args: wrap.length ? [...wrap.slice(1), BIN, ...args] : args,
    env: envWith(env),
    stderr: 'pipe',
  });
  const err = collect(transport.stderr);
  const { client, errors } = newClient();
  await withTimeout(client.connect(transport), initTimeout, 'stdio initialize');
  const proc = transport._process;
  const exited = exitPromise(proc);
  return {
    client,
    transport,
    proc,
    pid: proc.pid,
    errors,
    stderr: () => err.text,
    // Close stdin (the SDK sends SIGTERM after 2 s if the server lingers) and
    // check the exit.
    // `grace`: end stdin and give the server that long to exit before the
    // client closes, instead of the SDK's 2 s + SIGTERM + 2 s + SIGKILL
    // (several sanitizer builds exiting at once on a loaded machine).
    async close({ grace = 0 } = {}) {
      if (grace) {
        proc.stdin.end();
        const r = await withTimeout(exited, grace, 'stdio server exit after stdin closed');
        transport._process = undefined; // gone: nothing for the SDK to end
        await client.close();
        assertCleanExit(r, err.text);
        assert.deepEqual(errors.map(String), [], 'SDK client reported transport/protocol errors');
        return;
      }
      await client.close();
      const r = await withTimeout(exited, 10000, 'stdio server exit');
      assertCleanExit(r, err.text);
      assert.deepEqual(errors.map(String), [], 'SDK client reported transport/protocol errors');
    },
    kill() {
      if (proc.exitCode === null) proc.kill('SIGKILL');
    },
  };
}

// HTTP is authenticated by default.  startHttp() gives each server a token of
// its own (CONTAINER_MCP_TOKEN) unless the test chose the token or --no-auth,
// and records it by port: the helpers below send it to that port unless the
// request already carries an Authorization header or says `auth: false`.
const TOKENS = new Map(); // port -> token
export const tokenFor = (port) => TOKENS.get(Number(port));
const hasAuth = (h = {}) => Object.keys(h).some((k) => k.toLowerCase() === 'authorization');
function withAuth(port, headers = {}, auth = true) {
  const token = auth ? tokenFor(port) : undefined;
  return token && !hasAuth(headers) ? { ...headers, Authorization: `Bearer ${token}` } : headers;
}
function initWithAuth(url, requestInit = {}) {
  const u = new URL(url);
  if (u.protocol !== 'http:' || !u.port) return requestInit;
  return { ...requestInit, headers: withAuth(u.port, requestInit.headers) };
}

// The SDK client over Streamable HTTP.
export async function httpClient(url, { fetch, requestInit } = {}) {
  const transport = new StreamableHTTPClientTransport(new URL(url), { fetch, requestInit: initWithAuth(url, requestInit) });
  const { client, errors } = newClient();
  await withTimeout(client.connect(transport), 10000, 'HTTP initialize');
  return {
    client,
    transport,
    errors,
    async close({ terminate = true } = {}) {
      if (terminate) await withTimeout(transport.terminateSession(), 5000, 'DELETE session');
      await client.close();
    },
  };
}

// The SDK client over the legacy HTTP+SSE transport.
export async function sseClient(url, { requestInit } = {}) {
  const init = initWithAuth(url, requestInit);
  const transport = new SSEClientTransport(new URL(url), { requestInit: init });
  const { client, errors } = newClient();
  await withTimeout(client.connect(transport), 10000, 'SSE initialize');
  return {
    client,
    transport,
    errors,
    async close() {
      await client.close();
    },
  };
}

// ------------------------------------------------------------ raw stdio --

// container-mcp over stdio, spoken to line by line.
export class RawStdio {
  constructor(args = ['serve', ...DIAG], { env = {} } = {}) {
    this.srv = spawnServer(args, { env, stdin: 'pipe' });
    this.proc = this.srv.proc;
    this.pid = this.proc.pid;
    this.messages = []; // every message received, in order
    this.pending = []; // not yet taken by next()
    this.garbage = []; // stdout lines that are not JSON
    this.waiters = new Set();
    this.nextId = 1000;
    let buf = '';
    this.proc.stdout.removeAllListeners('data');
    this.proc.stdout.on('data', (d) => {
      buf += d;
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i).replace(/\r$/, '');
        buf = buf.slice(i + 1);
        if (line.trim() === '') continue;
        let msg;
        try {
          msg = JSON.parse(line);
        } catch {
          this.garbage.push(line.slice(0, 500));
          continue;
        }
        this.messages.push(msg);
        this.pending.push(msg);
        for (const w of [...this.waiters]) w();
      }
    });
  }

  // Write raw text or bytes (a newline is added unless `raw`).
  async write(text, { raw = false } = {}) {
    const s = Buffer.isBuffer(text) ? (raw ? text : Buffer.concat([text, Buffer.from('\n')])) : raw ? text : text + '\n';
    if (!this.proc.stdin.write(s)) await once(this.proc.stdin, 'drain');
  }

  send(obj) {
    return this.write(JSON.stringify(obj));
  }

  // The next message (in arrival order) matching pred; it is taken from the
  // pending queue.
  next(pred = () => true, ms = 10000, what = 'a message') {
    return withTimeout(
      new Promise((resolve, reject) => {
        const check = () => {
          const i = this.pending.findIndex(pred);
          if (i >= 0) {
            const [m] = this.pending.splice(i, 1);
            this.waiters.delete(check);
            this.waiters.delete(onExit);
            resolve(m);
          }
        };
        const onExit = () => {
          if (!this.srv.alive()) {
            this.waiters.delete(check);
            reject(new Error(`server exited while waiting for ${what}; stderr:\n${tail(this.srv.stderr())}`));
          }
        };
        this.waiters.add(check);
        this.srv.exited.then(() => {
          // let remaining stdout be parsed first
          setImmediate(() => {
            check();
            if (this.waiters.has(check)) onExit();
          });
        });
        check();
      }),
      ms,
      what,
    );
  }

  response(id, ms = 10000) {
    return this.next((m) => m.id === id && ('result' in m || 'error' in m), ms, `the response to id ${JSON.stringify(id)}`);
  }

  async request(method, params, { id = this.nextId++, ms = 10000 } = {}) {
    const msg = { jsonrpc: '2.0', id, method };
    if (params !== undefined) msg.params = params;
    await this.send(msg);
    return this.response(id, ms);
  }

  notify(method, params) {
    const msg = { jsonrpc: '2.0', method };
    if (params !== undefined) msg.params = params;
    return this.send(msg);
  }

  async initialize(protocolVersion = LATEST, { initialized = true } = {}) {
    const r = await this.request('initialize', {
      protocolVersion,
      capabilities: {},
      clientInfo: { name: 'raw-e2e', version: '1.0.0' },
    });
    if (initialized && r.result) await this.notify('notifications/initialized');
    return r;
  }

  // Close stdin and check the server exits cleanly by itself.
  async close(ms = 10000) {
    this.proc.stdin.end();
    let r;
    try {
      r = await withTimeout(this.srv.exited, ms, 'server exit after stdin closed');
    } catch (e) {
      this.srv.kill();
      throw e;
    }
    assertCleanExit(r, this.srv.stderr());
    assert.deepEqual(this.garbage, [], 'stdout carried lines that are not JSON (logs must go to stderr)');
    return r;
  }

  kill() {
    this.srv.kill();
  }
}

// ------------------------------------------------------------ HTTP servers --

export async function startHttp({ args = [], env = {}, toolsets = true } = {}) {
  const own = !('CONTAINER_MCP_TOKEN' in env) && !args.includes('--no-auth');
  const token = own ? crypto.randomBytes(24).toString('hex') : undefined;
  const srv = spawnServer(['serve', '--http', '127.0.0.1:0', ...(toolsets ? DIAG : []), ...args], {
    env: own ? { ...env, CONTAINER_MCP_TOKEN: token } : env,
  });
  try {
    const m = await srv.waitStderr(/listening on (http:\/\/127\.0\.0\.1:(\d+))\/mcp/);
    srv.base = m[1];
    srv.port = Number(m[2]);
    srv.token = token;
    if (own) TOKENS.set(srv.port, token);
    srv.url = `${srv.base}/mcp`;
    srv.hostHeader = `127.0.0.1:${srv.port}`;
  } catch (e) {
    srv.kill();
    throw e;
  }
  return srv;
}

export async function startSocket({ socketPath, args = [], env = {} } = {}) {
  const srv = spawnServer(['serve', '--socket', socketPath, ...DIAG, ...args], { env });
  try {
    const esc = socketPath.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    await srv.waitStderr(new RegExp(`listening on unix:${esc}`));
    srv.socketPath = socketPath;
  } catch (e) {
    srv.kill();
    throw e;
  }
  return srv;
}

// ------------------------------------------------------------- raw HTTP --

export const keepAliveAgent = () => new http.Agent({ keepAlive: true, maxSockets: 16 });

// One HTTP request with full control of the headers (Host included).  The
// body is read to its end.  `target` is {port} or {socketPath}.
export function httpRequest(target, { method = 'POST', path: p = '/mcp', headers = {}, body, agent, timeout = 10000, auth = true } = {}) {
  const payload = body === undefined ? undefined : typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body);
  const h = withAuth(target.port, { ...headers }, auth);
  if (payload !== undefined && !Object.keys(h).some((k) => k.toLowerCase() === 'content-length')) {
    h['Content-Length'] = Buffer.byteLength(payload);
  }
  return withTimeout(
    new Promise((resolve, reject) => {
      const req = http.request(
        {
          host: target.socketPath ? undefined : '127.0.0.1',
          port: target.socketPath ? undefined : target.port,
          socketPath: target.socketPath,
          method,
          path: p,
          headers: h,
          agent: agent ?? false,
          setHost: !Object.keys(h).some((k) => k.toLowerCase() === 'host'),
        },
        (res) => {
          const chunks = [];
          const done = () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') });
          res.on('data', (c) => chunks.push(c));
          res.on('end', done);
          // a server that answers early (413) may close before the body is sent
          res.on('close', done);
          res.on('error', done);
        },
      );
      req.on('error', (e) => (req.res ? undefined : reject(e)));
      if (payload !== undefined) req.end(payload);
      else req.end();
    }),
    timeout,
    `${method} ${p}`,
  );
}

// Open a request and resolve as soon as the response headers arrive; the
// response stream is handed back unread (for SSE streams).
export function httpOpen(target, { method = 'GET', path: p = '/mcp', headers = {}, body, agent, auth = true } = {}) {
  const payload = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
  const h = withAuth(target.port, { ...headers }, auth);
  if (payload !== undefined) h['Content-Length'] = Buffer.byteLength(payload);
  return withTimeout(
    new Promise((resolve, reject) => {
      const req = http.request(
        { host: '127.0.0.1', port: target.port, socketPath: target.socketPath, method, path: p, headers: h, agent: agent ?? false },
        (res) => resolve({ req, res, status: res.statusCode, headers: res.headers }),
      );
      req.on('error', reject);
      req.end(payload);
    }),
    10000,
    `${method} ${p} response headers`,
  );
}

// Parse a text/event-stream body into events.
export function parseSse(text) {
  const events = [];
  for (const block of text.replace(/\r\n/g, '\n').split('\n\n')) {
    if (!block.trim()) continue;
    const ev = { event: 'message', data: '', id: undefined };
    const data = [];
    for (const line of block.split('\n')) {
      if (line.startsWith(':')) continue;
      const i = line.indexOf(':');
      const field = i < 0 ? line : line.slice(0, i);
      let value = i < 0 ? '' : line.slice(i + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (field === 'data') data.push(value);
      else if (field === 'event') ev.event = value;
      else if (field === 'id') ev.id = value;
    }
    ev.data = data.join('\n');
    // an event with empty data (a stream's priming event: its id only, to
    // resume from) carries no message
    if (data.length && ev.data !== '') events.push(ev);
  }
  return events;
}

// The JSON-RPC messages of a POST /mcp response, JSON or SSE.
export function mcpMessages(res) {
  const ct = String(res.headers['content-type'] || '');
  if (ct.includes('text/event-stream')) {
    return parseSse(res.body)
      .filter((e) => e.event === 'message' && e.data)
      .map((e) => JSON.parse(e.data));
  }
  if (!res.body) return [];
  const v = JSON.parse(res.body);
  return Array.isArray(v) ? v : [v];
}

export function mcpHeaders({ session, version, extra = {} } = {}) {
  const h = {
    Accept: 'application/json, text/event-stream',
    'Content-Type': 'application/json',
  };
  if (session) h['Mcp-Session-Id'] = session;
  if (version) h['MCP-Protocol-Version'] = version;
  return { ...h, ...extra };
}

export const initBody = (id = 1, protocolVersion = LATEST) => ({
  jsonrpc: '2.0',
  id,
  method: 'initialize',
  params: { protocolVersion, capabilities: {}, clientInfo: { name: 'raw-http-e2e', version: '1.0.0' } },
});

// initialize + notifications/initialized over raw HTTP; returns the session id.
export async function rawHttpSession(target, { version = LATEST, agent, headers = {} } = {}) {
  const res = await httpRequest(target, { headers: mcpHeaders({ extra: headers }), body: initBody(1, version), agent });
  assert.equal(res.status, 200, `initialize: HTTP ${res.status} ${res.body}`);
  const session = res.headers['mcp-session-id'];
  assert.ok(session, 'initialize response carries Mcp-Session-Id');
  const [msg] = mcpMessages(res);
  assert.equal(msg.id, 1);
  assert.ok(msg.result, `initialize result: ${res.body}`);
  const n = await httpRequest(target, {
    headers: mcpHeaders({ session, version: msg.result.protocolVersion, extra: headers }),
    body: { jsonrpc: '2.0', method: 'notifications/initialized' },
    agent,
  });
  assert.equal(n.status, 202, `notifications/initialized: HTTP ${n.status} ${n.body}`);
  return { session, version: msg.result.protocolVersion, result: msg.result };
}

// One request on a raw HTTP session; returns {res, messages, response}.
export async function rawHttpCall(target, session, method, params, { id = 7, version = LATEST, agent, headers = {} } = {}) {
  const res = await httpRequest(target, {
    headers: mcpHeaders({ session, version, extra: headers }),
    body: { jsonrpc: '2.0', id, method, ...(params === undefined ? {} : { params }) },
    agent,
  });
  const messages = res.status === 200 ? mcpMessages(res) : [];
  return { res, messages, response: messages.find((m) => m.id === id) };
}

// Bytes of the regular files below dir (symlinks not followed).
export function treeBytes(dir) {
  let sum = 0;
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) sum += treeBytes(p);
    else if (e.isFile()) sum += fs.lstatSync(p).size;
  }
  return sum;
}
