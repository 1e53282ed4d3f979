// Minimal MCP server on the TypeScript SDK's McpServer: the baseline that
// bench/mcp-overhead compares container-mcp against.  One tool, `echo`.
//
//   node dist/server.js                      MCP over stdio
//   node dist/server.js --http 127.0.0.1:0   Streamable HTTP at /mcp, prints
//                                            "listening on http://HOST:PORT/mcp"
//                                            on stderr (same contract as
//                                            container-mcp serve --http)
//   node dist/server.js --http ADDR --sse    answer POSTs as text/event-stream,
//                                            the SDK's default (to exercise
//                                            mcp-load's SSE parsing)
//
// HTTP is configured like container-mcp answers: stateful sessions
// (sessionIdGenerator) and plain JSON responses (enableJsonResponse), so the
// two servers are measured on the same footing.
import { randomUUID } from "node:crypto";
import { createServer, IncomingMessage, ServerResponse } from "node:http";
import { AddressInfo } from "node:net";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";

function newServer(): McpServer {
  const server = new McpServer({ name: "ts-bench-server", version: "1.0.0" });
  server.registerTool(
    "echo",
    {
      description: "Return the given text unchanged.",
      inputSchema: { text: z.string() },
      outputSchema: { text: z.string() },
    },
    async ({ text }) => ({
      content: [{ type: "text", text }],
      structuredContent: { text },
    }),
  );
  return server;
}

async function serveStdio(): Promise<void> {
  await newServer().connect(new StdioServerTransport());
}

const sessions = new Map<string, StreamableHTTPServerTransport>();
let jsonResponses = true;

// A request without Mcp-Session-Id starts a session: one McpServer and one
// transport per session, as in the SDK's stateful example.
async function newSession(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const transport = new StreamableHTTPServerTransport({
    sessionIdGenerator: () => randomUUID(),
    enableJsonResponse: jsonResponses,
    onsessioninitialized: (id) => {
      sessions.set(id, transport);
    },
  });
  transport.onclose = () => {
    if (transport.sessionId !== undefined) sessions.delete(transport.sessionId);
  };
  await newServer().connect(transport);
  await transport.handleRequest(req, res);
  if (transport.sessionId === undefined) await transport.close();
}

function reject(res: ServerResponse, status: number, message: string): void {
  res.writeHead(status, { "Content-Type": "application/json" });
  res.end(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32000, message } }));
}

async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const path = (req.url ?? "").split("?")[0];
  if (path !== "/mcp") return reject(res, 404, "not found");
  const id = req.headers["mcp-session-id"];
  if (id === undefined) return newSession(req, res);
  const transport = typeof id === "string" ? sessions.get(id) : undefined;
  if (transport === undefined) return reject(res, 404, "unknown session");
  await transport.handleRequest(req, res);
}

function parseHostPort(arg: string): [string, number] {
  const colon = arg.lastIndexOf(":");
  if (colon < 0) throw new Error(`--http wants HOST:PORT, got ${arg}`);
  return [arg.slice(0, colon), Number(arg.slice(colon + 1))];
}

function serveHttp(arg: string): void {
  const [host, port] = parseHostPort(arg);
  const http = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      process.stderr.write(`request failed: ${String(err)}\n`);
      if (!res.headersSent) reject(res, 500, "internal error");
    });
  });
  http.keepAliveTimeout = 60_000;
  http.listen(port, host, () => {
    const addr = http.address() as AddressInfo;
    process.stderr.write(`listening on http://${host}:${addr.port}/mcp\n`);
  });
}

function main(argv: string[]): void {
  // Exit through process.exit so that node's exit hooks (--cpu-prof) run.
  for (const sig of ["SIGINT", "SIGTERM"] as const) process.on(sig, () => process.exit(0));
  const at = argv.indexOf("--http");
  if (at >= 0) {
    if (argv[at + 1] === undefined) throw new Error("--http wants HOST:PORT");
    jsonResponses = !argv.includes("--sse");
    serveHttp(argv[at + 1]);
    return;
  }
  serveStdio().catch((err: unknown) => {
    process.stderr.write(`stdio failed: ${String(err)}\n`);
    process.exit(1);
  });
}

main(process.argv.slice(2));
