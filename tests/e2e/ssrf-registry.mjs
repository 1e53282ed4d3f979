// A registry that tries to aim the server at local addresses, for
// pull.test.mjs (run inside the test's network namespace):
//   node ssrf-registry.mjs PUBLIC_IP KEY CERT
// serves https on PUBLIC_IP:8443 (the certificate KEY/CERT), and listens on
// 127.0.0.1:8080 and 127.0.0.1:8443 where nothing should arrive: every
// connection there is printed as "conn PORT".  Prints "ready" when all three
// listen, and an HTTP CONNECT proxy on 127.0.0.1:3128 that prints
// "proxy HOST:PORT" for each tunnel it opens.  Repositories on the https side:
//   redir  a manifest whose blobs redirect to http://127.0.0.1:8080/blob
//   realm  a 401 whose Bearer realm is http://127.0.0.1:8080/token
//   realm2 a 401 whose Bearer realm is https://other-host.test:8443/token
//          (this server, by a name its certificate does not have)
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';

const [ip, key, cert] = process.argv.slice(2);
const digest = `sha256:${'a'.repeat(64)}`;
const manifest = JSON.stringify({
  schemaVersion: 2, mediaType: 'application/vnd.oci.image.manifest.v1+json',
  config: { mediaType: 'application/vnd.oci.image.config.v1+json', digest, size: 2 },
  layers: [],
});

const server = https.createServer({ key: fs.readFileSync(key), cert: fs.readFileSync(cert) }, (req, res) => {
  const url = req.url;
  if (url === '/v2/' || url === '/v2') return res.writeHead(200, { 'Content-Type': 'application/json' }).end('{}');
  if (url.startsWith('/v2/realm/')) {
    return res.writeHead(401, { 'WWW-Authenticate': 'Bearer realm="http://127.0.0.1:8080/token",service="x"' }).end();
  }
  if (url.startsWith('/v2/realm2/')) {
    return res.writeHead(401, { 'WWW-Authenticate': 'Bearer realm="https://other-host.test:8443/token",service="x"' }).end();
  }
  if (url.startsWith('/token')) return res.writeHead(200, { 'Content-Type': 'application/json' }).end('{"token":"t"}');
  if (url.startsWith('/v2/redir/manifests/')) {
    return res.writeHead(200, { 'Content-Type': 'application/vnd.oci.image.manifest.v1+json' }).end(manifest);
  }
  if (url.startsWith('/v2/redir/blobs/')) return res.writeHead(307, { Location: 'http://127.0.0.1:8080/blob' }).end();
  res.writeHead(404).end();
});

let up = 0;
const ready = () => ++up === 4 && console.log('ready');
const proxy = http.createServer((req, res) => res.writeHead(405).end());
proxy.on('connect', (req, client, head) => {
  console.log(`proxy ${req.url}`);
  const [host, port] = req.url.split(':');
  const up = net.connect(Number(port), host, () => {
    client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    if (head.length) up.write(head);
    up.pipe(client);
    client.pipe(up);
  });
  up.on('error', () => client.destroy());
  client.on('error', () => up.destroy());
});
proxy.listen(3128, '127.0.0.1', ready);
for (const port of [8080, 8443]) {
  net.createServer((sock) => {
    console.log(`conn ${port}`);
    sock.destroy();
  }).listen(port, '127.0.0.1', ready);
}
server.listen(8443, ip, ready);
