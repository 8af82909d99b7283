#!/usr/bin/env python3
"""Container images: what they cost stored, and what a first command costs
from a registry. Prints Markdown.

The image is a real root file system in four layers, made with umoci from
this machine's /usr: (1) the shared libraries the programs below load,
with the loader and the merged-/usr symlinks; (2) the programs of
/usr/bin under 1 MiB, and python3.11 and perl; (3) Python's standard
library; (4) a layer that deletes a directory (`.wh.pydoc_data`), makes
another opaque (`lib2to3/.wh..wh..opq`) with a new file in it, and adds
/etc files.

Stored: the OCI layers (tar+gzip, as umoci writes them), hoard's
`create --layers` (one delta layer per OCI layer) and one flat hoard image,
at the level's block size and with 1 MiB blocks (`-S 20`: less read
around each small file, for lazy reads over a network).

A first command (`python3.11 -c "import json, email.parser, http.client"`
under chroot) from a cold start: the page cache dropped, nothing pulled,
a fresh archive cache. The registry is Debian's docker-registry on
127.0.0.1, reached through a proxy of this script's own that counts the
bytes and, for the second network, holds them to a rate (a token bucket):

  (a) pull and unpack: `skopeo copy docker://… oci:…`, `umoci unpack`,
      then the command in the unpacked rootfs;
  (b) `hoard mount docker://…` of the flat hoard image pushed with
      `hoard push` (read lazily by range requests), then the command in
      the mount; once at the level's block size, once with 1 MiB blocks;
  (c) `hoard mount docker://…` of the container image itself (pulled and
      converted into the archive cache, at its level 1), then the command.

    bench/containers.py                      # about 7 minutes on 2 cores
    bench/containers.py --rate-mbit 100 --level 7 --hoard target/release/hoard

Run as root (chroot, FUSE, dropping the page cache), with docker-registry,
skopeo and umoci installed (scripts/install-deps.sh). Python 3 standard
library only; uses the measuring of the rest of the suite.
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpora  # noqa: E402
import measure  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REGISTRY_BIN = "/usr/bin/docker-registry"
MiB = 1 << 20
COMMAND = ["/usr/bin/python3.11", "-c",
           "import json, email.parser, http.client, decimal; print('ok')"]
TIMEOUT = 900


def mib(n: int) -> str:
    return f"{n / MiB:,.1f} MiB"


def check(sample: measure.Sample, what: str) -> measure.Sample:
    if not sample.ok:
        raise SystemExit(f"{what} failed (exit {sample.rc})")
    return sample


def sh(argv: list, what: str, **kw) -> measure.Sample:
    return check(measure.run([argv], timeout=TIMEOUT, **kw), what)


# ---------------------------------------------------------------- the image

def libraries(programs: list) -> list:
    """The shared libraries `programs` load (as ldd names them, and the
    files their symlinks lead to), as paths under /usr without the `/`."""
    found = set()
    for program in programs:
        out = subprocess.run(["ldd", program], capture_output=True, text=True).stdout
        for word in out.split():
            if word.startswith("/") and os.path.exists(word):
                for path in (word, os.path.realpath(word)):
                    # /lib is a link to usr/lib on a merged-/usr system.
                    real_dir = os.path.realpath(os.path.dirname(path))
                    found.add(os.path.join(real_dir, os.path.basename(path)).lstrip("/"))
    return sorted(found)


def parents(paths: list) -> list:
    """The directories above `paths`, outermost first."""
    dirs = set()
    for p in paths:
        d = os.path.dirname(p)
        while d:
            dirs.add(d)
            d = os.path.dirname(d)
    return sorted(dirs, key=lambda d: (d.count("/"), d))


def tar_list(tar: str, names: list) -> None:
    """A pax tar of the entries `names` of / (not recursing)."""
    listing = tar + ".list"
    with open(listing, "w") as f:
        f.write("\n".join(names) + "\n")
    sh(["tar", "-C", "/", "--xattrs", "--format=pax", "--no-recursion", "-cf", tar,
        "-T", listing], f"tar {tar}")
    os.remove(listing)


def make_image(work: str) -> tuple:
    """The four-layer OCI layout `work/layout:t` (see the module's doc);
    returns (the layout, bytes of the layers' tars)."""
    programs = sorted(os.path.join("/usr/bin", n) for n in os.listdir("/usr/bin")
                      if os.path.isfile(os.path.join("/usr/bin", n))
                      and not os.path.islink(os.path.join("/usr/bin", n))
                      and os.path.getsize(os.path.join("/usr/bin", n)) < MiB)
    programs += ["/usr/bin/python3.11", "/usr/bin/perl"]
    libs = libraries(programs)
    loader = ["usr/lib64", "usr/lib64/ld-linux-x86-64.so.2"]
    roots = [n for n in ("bin", "sbin", "lib", "lib64") if os.path.islink("/" + n)]
    layer1 = roots + parents(libs + loader) + loader + libs
    layer2 = ["usr", "usr/bin"] + [p.lstrip("/") for p in programs]
    stdlib = []
    for top, dirs, files in os.walk("/usr/lib/python3.11"):
        dirs.sort()
        stdlib.append(top.lstrip("/"))
        stdlib += [os.path.join(top, f).lstrip("/") for f in sorted(files)]
    layer3 = parents(stdlib[:1]) + stdlib
    layout = os.path.join(work, "layout")
    sh(["umoci", "init", "--layout", layout], "umoci init")
    sh(["umoci", "new", "--image", layout + ":t"], "umoci new")
    tars = 0
    for i, names in enumerate([layer1, layer2, layer3], 1):
        tar = os.path.join(work, f"l{i}.tar")
        tar_list(tar, list(dict.fromkeys(names)))
        tars += os.path.getsize(tar)
        sh(["umoci", "raw", "add-layer", "--image", layout + ":t", tar], f"add layer {i}")
        os.remove(tar)
    top = os.path.join(work, "l4")
    py = os.path.join(top, "usr/lib/python3.11")
    os.makedirs(os.path.join(py, "lib2to3"))
    os.makedirs(os.path.join(top, "etc"))
    open(os.path.join(py, ".wh.pydoc_data"), "w").close()
    open(os.path.join(py, "lib2to3", ".wh..wh..opq"), "w").close()
    with open(os.path.join(py, "lib2to3", "README"), "w") as f:
        f.write("lib2to3 is not in this image\n")
    with open(os.path.join(top, "etc", "hostname"), "w") as f:
        f.write("bench\n")
    with open(os.path.join(top, "etc", "os-release"), "w") as f:
        f.write("NAME=bench\n")
    tar = os.path.join(work, "l4.tar")
    sh(["tar", "-C", top, "--format=pax", "-cf", tar, "."], "tar l4")
    tars += os.path.getsize(tar)
    sh(["umoci", "raw", "add-layer", "--image", layout + ":t", tar], "add layer 4")
    os.remove(tar)
    shutil.rmtree(top)
    return layout, tars


def layer_blobs(layout: str) -> list:
    """(media type, size) of each layer of the layout's image."""
    def blob(digest):
        return os.path.join(layout, "blobs", *digest.split(":"))
    with open(os.path.join(layout, "index.json")) as f:
        index = json.load(f)
    with open(blob(index["manifests"][0]["digest"])) as f:
        manifest = json.load(f)
    return [(layer["mediaType"], layer["size"]) for layer in manifest["layers"]]


# ------------------------------------------------------- registry and proxy

class Registry:
    """docker-registry serving a directory on 127.0.0.1."""

    def __init__(self, work: str):
        self.port = free_port()
        config = os.path.join(work, "registry.yml")
        with open(config, "w") as f:
            f.write(f"version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\n"
                    f"storage:\n  filesystem:\n    rootdirectory: {work}/registry\n"
                    f"http:\n  addr: 127.0.0.1:{self.port}\n")
        self.process = subprocess.Popen([REGISTRY_BIN, "serve", config],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(self.port)

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int) -> None:
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit(f"nothing answers on 127.0.0.1:{port}")
            time.sleep(0.05)


class Bucket:
    """A token bucket of `rate` bytes a second (None: no limit), shared by
    every connection in one direction: each chunk takes its bytes, and
    waits while the bucket is in debt."""

    def __init__(self, rate):
        self.rate = rate
        self.burst = max(64 << 10, rate / 100) if rate else 0
        self.tokens = 0.0
        self.last = time.monotonic()
        self.lock = threading.Lock()

    def take(self, n: int) -> None:
        if not self.rate:
            return
        with self.lock:
            now = time.monotonic()
            self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate) - n
            self.last = now
            wait = -self.tokens / self.rate if self.tokens < 0 else 0.0
        if wait > 0:
            time.sleep(wait)


class Proxy:
    """A TCP proxy on 127.0.0.1 in front of 127.0.0.1:`upstream` that
    counts the bytes each way and holds each direction to `rate` bytes a
    second (None: as fast as they come). At most MAX_CONNECTIONS at once
    (more wait in the listen queue); chunks of CHUNK bytes."""

    MAX_CONNECTIONS = 64
    CHUNK = 16 << 10

    def __init__(self, upstream: int, rate):
        self.upstream = upstream
        self.down, self.up = Bucket(rate), Bucket(rate)
        self.served = 0  # bytes the upstream sent back
        self.sent = 0  # bytes the clients sent
        self.count_lock = threading.Lock()
        self.slots = threading.BoundedSemaphore(self.MAX_CONNECTIONS)
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self.open = set()
        self.stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    def reset(self) -> None:
        with self.count_lock:
            self.served = self.sent = 0

    def _accept(self) -> None:
        while not self.stopped:
            self.slots.acquire()
            try:
                client, _ = self.listener.accept()
            except OSError:
                self.slots.release()
                return
            try:
                server = socket.create_connection(("127.0.0.1", self.upstream), timeout=10)
                server.settimeout(None)
            except OSError:
                client.close()
                self.slots.release()
                continue
            self.open.update((client, server))
            done = threading.Barrier(2, action=lambda c=client, s=server: self._close(c, s))
            threading.Thread(target=self._pump, args=(client, server, self.up, False, done),
                             daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, self.down, True, done),
                             daemon=True).start()

    def _pump(self, src, dst, bucket, served, done) -> None:
        try:
            while chunk := src.recv(self.CHUNK):
                bucket.take(len(chunk))
                dst.sendall(chunk)
                with self.count_lock:
                    if served:
                        self.served += len(chunk)
                    else:
                        self.sent += len(chunk)
        except OSError:
            pass
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        try:
            done.wait()
        except threading.BrokenBarrierError:
            pass

    def _close(self, client, server) -> None:
        for s in (client, server):
            s.close()
            self.open.discard(s)
        self.slots.release()

    def stop(self) -> None:
        self.stopped = True
        self.listener.close()
        for s in list(self.open):
            try:
                s.close()
            except OSError:
                pass


# ------------------------------------------------------------ first command

def first_command(root: str) -> measure.Sample:
    """The command under chroot in `root`; its output checked."""
    done = sh(["chroot", root, *COMMAND], f"the command in {root}", capture=True)
    if done.stdout != b"ok\n":
        raise SystemExit(f"the command in {root} said {done.stdout!r}")
    return done


def pull_and_unpack(hoard: str, url: str, work: str) -> dict:
    pulled = os.path.join(work, "pulled")
    bundle = os.path.join(work, "bundle")
    steps = {
        "pull": sh(["skopeo", "copy", "-q", "--src-tls-verify=false", url, f"oci:{pulled}:t"],
                   "skopeo copy").wall,
        "unpack": sh(["umoci", "unpack", "--image", f"{pulled}:t", bundle], "umoci unpack").wall,
    }
    steps["command"] = first_command(os.path.join(bundle, "rootfs")).wall
    shutil.rmtree(pulled)
    shutil.rmtree(bundle)
    return steps


def mounted(hoard: str, url: str, work: str, options: list) -> dict:
    mnt = os.path.join(work, "mnt")
    os.makedirs(mnt, exist_ok=True)
    steps = {"mount": sh([hoard, "mount", url, mnt, *options], f"hoard mount {url}").wall}
    try:
        steps["command"] = first_command(mnt).wall
    finally:
        subprocess.run([hoard, "umount", mnt], check=True)
    return steps


def lazy_mount(hoard: str, url: str, work: str) -> dict:
    return mounted(hoard, url, work, [])


def converting_mount(hoard: str, url: str, work: str) -> dict:
    cache = os.path.join(work, "archive-cache")
    try:
        return mounted(hoard, url, work, ["-o", f"archive_cache={cache}"])
    finally:
        shutil.rmtree(cache, ignore_errors=True)


# --------------------------------------------------------------------- main

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hoard", default=os.environ.get("HOARD") or os.path.join(
        os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target")), "release", "hoard"))
    ap.add_argument("--level", type=int, default=7, help="of the hoard images stored and pushed")
    ap.add_argument("--rate-mbit", type=float, default=100, help="the slow network's rate")
    a = ap.parse_args()
    for tool in (REGISTRY_BIN, "skopeo", "umoci", a.hoard):
        if not shutil.which(tool):
            raise SystemExit(f"{tool} is missing (scripts/install-deps.sh)")
    if not measure.can_drop_caches():
        raise SystemExit("run as root: the page cache is dropped before each first command")
    load_before = os.getloadavg()
    os.makedirs(corpora.cache_dir(), exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="containers-", dir=corpora.cache_dir()) as work:
        layout, tars = make_image(work)
        blobs = layer_blobs(layout)
        source = f"oci:{layout}:t"
        level = ["-l", str(a.level), "--no-progress"]
        flat = os.path.join(work, "flat.dwarfs")
        flat_build = sh([a.hoard, "create", "-i", source, "-o", flat, *level], "hoard create")
        small = os.path.join(work, "flat-1m.dwarfs")
        small_build = sh([a.hoard, "create", "-i", source, "-o", small, "-S", "20", *level],
                         "hoard create -S 20")
        layers = os.path.join(work, "layers")
        layers_build = sh([a.hoard, "create", "-i", source, "--layers", layers, *level],
                          "hoard create --layers")
        layer_bytes = sum(os.path.getsize(os.path.join(layers, n)) for n in os.listdir(layers))

        registry = Registry(work)
        try:
            direct = f"docker://127.0.0.1:{registry.port}"
            sh(["skopeo", "copy", "-q", "--dest-tls-verify=false", source, f"{direct}/app:t"],
               "skopeo copy to the registry")
            sh([a.hoard, "push", "-q", flat, f"{direct}/app-hoard:t"], "hoard push")
            sh([a.hoard, "push", "-q", small, f"{direct}/app-hoard-1m:t"], "hoard push")
            networks = [("loopback", None), (f"{a.rate_mbit:g} Mbit/s", a.rate_mbit * 1e6 / 8)]
            ways = [("(a) skopeo copy + umoci unpack + run", pull_and_unpack, "app:t"),
                    ("(b) hoard mount of the pushed hoard image + run", lazy_mount, "app-hoard:t"),
                    ("(b) the same, 1 MiB blocks", lazy_mount, "app-hoard-1m:t"),
                    ("(c) hoard mount of the container image (converted) + run",
                     converting_mount, "app:t")]
            rows = []
            for network, rate in networks:
                proxy = Proxy(registry.port, rate)
                try:
                    for label, way, name in ways:
                        measure.drop_caches()
                        proxy.reset()
                        steps = way(a.hoard, f"docker://127.0.0.1:{proxy.port}/{name}", work)
                        rows.append((network, label, proxy.served, proxy.sent, steps))
                        print(f"  {network}: {label}: {sum(steps.values()):.2f} s, "
                              f"{mib(proxy.served)}", file=sys.stderr, flush=True)
                finally:
                    proxy.stop()
        finally:
            registry.stop()
        flat_size = os.path.getsize(flat)
        small_size = os.path.getsize(small)
    load_after = os.getloadavg()

    gz = sum(size for _, size in blobs)
    types = sorted({t.rsplit(".", 1)[-1] for t, _ in blobs})
    print(f"### Stored: a {len(blobs)}-layer root file system from /usr "
          f"({mib(tars)} of layer tars)\n")
    print("| | bytes | vs OCI layers | build |")
    print("|---|---|---|---|")
    print(f"| OCI layers ({', '.join(types)}, umoci) | {mib(gz)} | 1.00x | |")
    print(f"| hoard `create --layers` (`-l {a.level}`) | {mib(layer_bytes)} | "
          f"{layer_bytes / gz:.2f}x | {layers_build.wall:.1f} s |")
    print(f"| hoard flat image (`-l {a.level}`) | {mib(flat_size)} | {flat_size / gz:.2f}x | "
          f"{flat_build.wall:.1f} s |")
    print(f"| hoard flat image (`-l {a.level} -S 20`) | {mib(small_size)} | "
          f"{small_size / gz:.2f}x | {small_build.wall:.1f} s |")
    print(f"\n### First command from a cold start: `chroot ROOT {' '.join(COMMAND[:2])} "
          f"\"{COMMAND[2]}\"`\n")
    print("| network | way | time | of which | bytes from the registry |")
    print("|---|---|---|---|---|")
    for network, label, served, sent, steps in rows:
        parts = ", ".join(f"{k} {v:.2f} s" for k, v in steps.items())
        print(f"| {network} | {label} | {sum(steps.values()):.2f} s | {parts} | {mib(served)} |")
    print(f"\nload average (1, 5, 15 min): before {', '.join(f'{x:.2f}' for x in load_before)}; "
          f"after {', '.join(f'{x:.2f}' for x in load_after)} (on {os.cpu_count()} cores)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
