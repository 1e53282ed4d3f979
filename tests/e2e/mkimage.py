#!/usr/bin/env python3
"""Make a two-layer image from a root file system directory, for the image
store's tests (tests/e2e/images.test.mjs), with no registry and no engine.

  mkimage.py ROOTFS OUT --format oci|docker|docker-oci [--tar] [--name REF]
             [--config JSON]

Layer 1 (gzip) is ROOTFS; layer 2 (plain tar) adds /etc/layer2 (mode 0600,
owned by uid 1000), removes /etc/hidden with a whiteout (`.wh.hidden`) and
makes /opq opaque (`.wh..wh..opq`), hiding /opq/old of layer 1.  --config
is the image config's "config" object (Env, Entrypoint, Cmd, WorkingDir,
User).  oci: an OCI image layout; docker: `docker save`'s legacy form
(<id>/layer.tar, <id>.json, manifest.json); docker-oci: Docker 25's (an
OCI layout plus manifest.json).  --tar: OUT is a tarball of it.
"""
import argparse, gzip, hashlib, io, json, os, tarfile


def sha(b):
    return hashlib.sha256(b).hexdigest()


def layer1(rootfs):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        t.add(rootfs, arcname=".", recursive=True)
        d = tarfile.TarInfo("opq"); d.type = tarfile.DIRTYPE; d.mode = 0o755; t.addfile(d)
        for name, data in (("opq/old", b"old\n"), ("etc/hidden", b"hidden\n")):
            f = tarfile.TarInfo(name); f.size = len(data); f.mode = 0o644; t.addfile(f, io.BytesIO(data))
    return buf.getvalue()


def layer2():
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        d = tarfile.TarInfo("opq"); d.type = tarfile.DIRTYPE; d.mode = 0o755; t.addfile(d)
        w = tarfile.TarInfo("opq/.wh..wh..opq"); t.addfile(w, io.BytesIO(b""))
        data = b"new\n"
        f = tarfile.TarInfo("opq/new"); f.size = len(data); f.mode = 0o644; t.addfile(f, io.BytesIO(data))
        w = tarfile.TarInfo("etc/.wh.hidden"); t.addfile(w, io.BytesIO(b""))
        data = b"from layer 2\n"
        f = tarfile.TarInfo("etc/layer2"); f.size = len(data); f.mode = 0o600; f.uid = 1000; f.gid = 1000
        t.addfile(f, io.BytesIO(data))
    return buf.getvalue()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("rootfs"); ap.add_argument("out")
    ap.add_argument("--format", default="oci"); ap.add_argument("--tar", action="store_true")
    ap.add_argument("--name"); ap.add_argument("--config", default="{}")
    a = ap.parse_args()

    l1, l2 = layer1(a.rootfs), layer2()
    blobs = {}
    def put(b):
        blobs[sha(b)] = b
        return "sha256:" + sha(b)
    gz1 = gzip.compress(l1, mtime=0)
    config = {"architecture": {"x86_64": "amd64", "aarch64": "arm64"}.get(os.uname().machine, os.uname().machine),
              "os": "linux", "created": "2026-01-02T03:04:05Z", "config": json.loads(a.config),
              "rootfs": {"type": "layers", "diff_ids": ["sha256:" + sha(l1), "sha256:" + sha(l2)]}}
    cfg = json.dumps(config).encode()
    files = {}
    if a.format in ("oci", "docker-oci"):
        layers = [(gz1, "application/vnd.oci.image.layer.v1.tar+gzip"), (l2, "application/vnd.oci.image.layer.v1.tar")]
        if a.format == "docker-oci":  # docker 25 keeps layers uncompressed
            layers = [(l1, "application/vnd.oci.image.layer.v1.tar"), (l2, "application/vnd.oci.image.layer.v1.tar")]
        man = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
               "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": put(cfg), "size": len(cfg)},
               "layers": [{"mediaType": mt, "digest": put(b), "size": len(b)} for b, mt in layers]}
        mb = json.dumps(man).encode()
        desc = {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": put(mb), "size": len(mb)}
        if a.name:
            desc["annotations"] = {"org.opencontainers.image.ref.name": a.name}
        files["index.json"] = json.dumps({"schemaVersion": 2, "manifests": [desc]}).encode()
        files["oci-layout"] = b'{"imageLayoutVersion":"1.0.0"}'
        for d, b in blobs.items():
            files["blobs/sha256/" + d] = b
        if a.format == "docker-oci":
            files["manifest.json"] = json.dumps([{"Config": "blobs/sha256/" + sha(cfg),
                                                  "RepoTags": [a.name] if a.name else [],
                                                  "Layers": ["blobs/sha256/" + sha(b) for b, _ in layers]}]).encode()
    else:
        files[sha(cfg) + ".json"] = cfg
        names = []
        for b in (l1, l2):
            files[sha(b) + "/layer.tar"] = b
            files[sha(b) + "/VERSION"] = b"1.0"
            names.append(sha(b) + "/layer.tar")
        files["manifest.json"] = json.dumps([{"Config": sha(cfg) + ".json", "RepoTags": [a.name] if a.name else [],
                                              "Layers": names}]).encode()
    if a.tar:
        with tarfile.open(a.out, "w") as t:
            for name, b in sorted(files.items()):
                f = tarfile.TarInfo(name); f.size = len(b); f.mode = 0o644; t.addfile(f, io.BytesIO(b))
    else:
        for name, b in files.items():
            p = os.path.join(a.out, name)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "wb") as f:
                f.write(b)


if __name__ == "__main__":
    main()
