#!/usr/bin/python3
"""A token server for the test registry (distribution's `auth: token`):
token_server.py PORT_FILE KEY CERT ISSUER SERVICE USER PASSWORD.

GET /token?service=S&scope=repository:NAME:ACTIONS with Basic USER:PASSWORD
answers {"token": JWT, "access_token": JWT}, the JWT signed RS256 with KEY
and carrying CERT in x5c, so the registry (rootcertbundle: CERT) trusts it.
Anything else is 401.  Listens on a free loopback port written to PORT_FILE.
"""
import base64, http.server, json, secrets, sys, time, urllib.parse

import jwt  # python3-jwt
from cryptography import x509
from cryptography.hazmat.primitives import serialization

port_file, key_file, cert_file, issuer, service, user, password = sys.argv[1:8]
key = open(key_file, "rb").read()
cert = x509.load_pem_x509_certificate(open(cert_file, "rb").read())
x5c = [base64.b64encode(cert.public_bytes(serialization.Encoding.DER)).decode()]
want = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        q = urllib.parse.parse_qs(url.query)
        if url.path != "/token" or self.headers.get("Authorization") != want:
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"details":"bad credentials"}')
            return
        access = []
        for scope in q.get("scope", []):
            for one in scope.split(" "):
                parts = one.split(":")
                if len(parts) >= 3 and parts[0] == "repository":
                    access.append({"type": "repository", "name": ":".join(parts[1:-1]),
                                   "actions": parts[-1].split(",")})
        now = int(time.time())
        claims = {"iss": issuer, "sub": user, "aud": q.get("service", [service])[0], "exp": now + 3600,
                  "nbf": now - 60, "iat": now, "jti": secrets.token_hex(8), "access": access}
        tok = jwt.encode(claims, key, algorithm="RS256", headers={"x5c": x5c})
        body = json.dumps({"token": tok, "access_token": tok, "expires_in": 3600}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(port_file + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
import os
os.rename(port_file + ".tmp", port_file)
srv.serve_forever()
