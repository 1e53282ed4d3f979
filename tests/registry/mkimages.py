#!/usr/bin/python3
"""Build the test images as OCI image layouts from this machine's own files
(no network): mkimages.py OUT.  Each OUT/<name> is a layout skopeo pushes.

  busybox  busybox-static with its applet links, two gzip layers
  zstd     the same files, one zstd layer
  python   the host's python3, the libraries ldd names, its stdlib
  multi    an index: linux/amd64 -> busybox, linux/arm64 -> a tiny other image
  config   busybox plus a user `app`, with Env, WorkingDir, User, Entrypoint,
           Cmd and ExposedPorts set

Reproducible: fixed mtimes and owners, so a rebuild gives the same digests.
"""
import gzip, hashlib, io, json, os, subprocess, sys, tarfile

MTIME = 1700000000
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"


class Layer:
    def __init__(self):
        self.buf = io.BytesIO()
        self.tar = tarfile.open(fileobj=self.buf, mode="w", format=tarfile.PAX_FORMAT)
        self.dirs = set()

    def _info(self, name, kind, mode):
        ti = tarfile.TarInfo(name.lstrip("/"))
        ti.type, ti.mode, ti.mtime, ti.uid, ti.gid = kind, mode, MTIME, 0, 0
        return ti

    def dir(self, name, mode=0o755):
        name = name.strip("/")
        if not name or name in self.dirs:
            return
        self.dir(os.path.dirname(name))
        self.dirs.add(name)
        self.tar.addfile(self._info(name, tarfile.DIRTYPE, mode))

    def data(self, name, data, mode=0o644):
        self.dir(os.path.dirname(name.strip("/")))
        ti = self._info(name, tarfile.REGTYPE, mode)
        ti.size = len(data)
        self.tar.addfile(ti, io.BytesIO(data))

    def file(self, name, host_path):
        with open(host_path, "rb") as f:
            self.data(name, f.read(), os.stat(host_path).st_mode & 0o755 | 0o644)

    def link(self, name, target):
        self.dir(os.path.dirname(name.strip("/")))
        ti = self._info(name, tarfile.SYMTYPE, 0o777)
        ti.linkname = target
        self.tar.addfile(ti)

    def tarball(self):
        self.tar.close()
        return self.buf.getvalue()


def sha(b):
    return "sha256:" + hashlib.sha256(b).hexdigest()


class Layout:
    def __init__(self, path):
        self.path = path
        os.makedirs(os.path.join(path, "blobs", "sha256"), exist_ok=True)

    def blob(self, data, media_type):
        d = sha(data)
        with open(os.path.join(self.path, "blobs", "sha256", d[7:]), "wb") as f:
            f.write(data)
        return {"mediaType": media_type, "digest": d, "size": len(data)}

    def image(self, layers, compression="gzip", config=None, arch="amd64", variant=None):
        """layers: tarballs (bytes); returns the manifest's descriptor."""
        descs, diff_ids = [], []
        for tar in layers:
            diff_ids.append(sha(tar))
            if compression == "gzip":
                descs.append(self.blob(gzip.compress(tar, 6, mtime=0), "application/vnd.oci.image.layer.v1.tar+gzip"))
            elif compression == "zstd":
                z = subprocess.run(["zstd", "-q", "-c", "-3"], input=tar, stdout=subprocess.PIPE, check=True).stdout
                descs.append(self.blob(z, "application/vnd.oci.image.layer.v1.tar+zstd"))
            else:
                descs.append(self.blob(tar, "application/vnd.oci.image.layer.v1.tar"))
        cfg = {"created": "2023-11-14T22:13:20Z", "architecture": arch, "os": "linux",
               "config": config or {"Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
                                    "Cmd": ["sh"]},
               "rootfs": {"type": "layers", "diff_ids": diff_ids},
               # one entry a layer, as builders write them (buildah counts them)
               "history": [{"created": "2023-11-14T22:13:20Z", "created_by": f"layer {i + 1} of the test image"}
                           for i in range(len(layers))]}
        if variant:
            cfg["variant"] = variant
        manifest = {"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                    "config": self.blob(json.dumps(cfg, sort_keys=True).encode(), OCI_CONFIG), "layers": descs}
        d = self.blob(json.dumps(manifest, sort_keys=True).encode(), OCI_MANIFEST)
        d["platform"] = {"architecture": arch, "os": "linux"}
        if variant:
            d["platform"]["variant"] = variant
        return d

    def index(self, descs, tag="latest"):
        top = descs[0] if len(descs) == 1 else self.blob(json.dumps(
            {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": descs}, sort_keys=True).encode(), OCI_INDEX)
        top = dict(top, annotations={"org.opencontainers.image.ref.name": tag})
        top.pop("platform", None)
        with open(os.path.join(self.path, "index.json"), "w") as f:
            json.dump({"schemaVersion": 2, "manifests": [top]}, f)
        with open(os.path.join(self.path, "oci-layout"), "w") as f:
            f.write('{"imageLayoutVersion":"1.0.0"}')


PASSWD = "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"
GROUP = "root:x:0:\nnogroup:x:65534:\n"


def busybox_layers():
    bb = Layer()
    bb.file("bin/busybox", "/bin/busybox")
    applets = subprocess.run(["/bin/busybox", "--list"], stdout=subprocess.PIPE, check=True, text=True).stdout.split()
    for a in applets:
        if a != "busybox":
            bb.link("bin/" + a, "busybox")
    etc = Layer()
    etc.data("etc/passwd", PASSWD.encode())
    etc.data("etc/group", GROUP.encode())
    etc.dir("tmp", 0o1777)
    etc.dir("root", 0o700)
    return [bb.tarball(), etc.tarball()]


def arch():
    m = os.uname().machine
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(m, m)


def python_layer():
    lay = Layer()
    exe = os.path.realpath("/usr/bin/python3")
    lay.file(exe, exe)
    lay.link("usr/bin/python3", os.path.basename(exe))
    out = subprocess.run(["ldd", exe], stdout=subprocess.PIPE, check=True, text=True).stdout
    for line in out.splitlines():
        parts = line.split()
        path = parts[2] if "=>" in parts and len(parts) > 2 else parts[0]
        if path.startswith("/"):
            lay.file(path, os.path.realpath(path))
    ver = os.path.basename(exe)  # python3.11
    stdlib = "/usr/lib/" + ver
    skip = {"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "__pycache__", "site-packages",
            "dist-packages", "lib2to3", "config-3.11-x86_64-linux-gnu"}
    for root, dirs, files in os.walk(stdlib):
        dirs[:] = sorted(d for d in dirs if d not in skip)
        for f in sorted(files):
            p = os.path.join(root, f)
            if os.path.islink(p):
                if os.path.exists(p):
                    lay.file(p, os.path.realpath(p))
            elif os.path.isfile(p):
                lay.file(p, p)
    return lay.tarball()


def build(out):
    arch_ = arch()
    bb = busybox_layers()

    Layout(os.path.join(out, "busybox")).index([Layout(os.path.join(out, "busybox")).image(bb, arch=arch_)])

    lz = Layout(os.path.join(out, "zstd"))
    lz.index([lz.image([bb[0] + b"", bb[1]], compression="zstd", arch=arch_)])

    lp = Layout(os.path.join(out, "python"))
    lp.index([lp.image(bb + [python_layer()], arch=arch_,
                       config={"Env": ["PATH=/usr/bin:/bin"], "Cmd": ["python3"]})])

    lm = Layout(os.path.join(out, "multi"))
    other = Layer()
    other.data("ARCH", b"arm64\n")
    other.file("bin/busybox", "/bin/busybox")
    amd = lm.image(bb, arch="amd64")
    arm = lm.image([other.tarball()], arch="arm64", variant="v8")
    lm.index([amd, arm])

    lc = Layout(os.path.join(out, "config"))
    app = Layer()
    app.data("etc/passwd", (PASSWD + "app:x:1234:1234:app:/home/app:/bin/sh\n").encode())
    app.data("etc/group", (GROUP + "app:x:1234:\n").encode())
    app.dir("home/app")
    app.data("home/app/hello.txt", b"hello from the image\n")
    lc.index([lc.image(bb + [app.tarball()], arch=arch_, config={
        "Env": ["PATH=/bin", "GREETING=hello from config"], "WorkingDir": "/home/app", "User": "app",
        "Entrypoint": ["/bin/sh", "-c"], "Cmd": ["echo $GREETING; id -un; pwd"],
        "ExposedPorts": {"8080/tcp": {}}})])


if __name__ == "__main__":
    build(sys.argv[1])
