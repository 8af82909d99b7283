#!/usr/bin/env python3
"""Layers and many images: prints two Markdown tables.

1. The `versions` corpus (one directory per release) built as a chain of
   layers, each release a layer (`hoard create --base ...`) on the ones
   before it: per release, the layer's size and build time, against one
   full image of that release; at the end the whole chain against one
   full image per release and one image of all releases. The top of the
   chain is checked to read back as the last release. Layers are made
   with `--metacopy` (unless `--whole-files`): each release's tarball
   gives every file a new time, and without it a file whose time alone
   changed goes into its layer whole.
2. `hoard mount --each` over N copies of a small image (default 1,000):
   how long the mount takes, and the driver's resident memory after the
   mount, after listing the root, and after reading a file in 10, 100 and
   all N images (each opened image costs a little; the block cache is
   bounded by `cachesize`).

    bench/layers.py                          # quick versions corpus, 1,000 images
    bench/layers.py --full --level 9         # the 40-release corpus
    bench/layers.py --images 5000 --cachesize 64m --skip-chain

Run as root (FUSE). Python 3 standard library only; uses the corpora and
the measuring of the rest of the suite.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpora  # noqa: E402
import measure  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MiB = 1 << 20


def mib(n: int) -> str:
    return f"{n / MiB:,.2f} MiB"


def chain(hoard: str, level: int, quick: bool, work: str, layer_options: list) -> None:
    corpus = corpora.prepare("versions", quick, corpora.cache_dir(), log=lambda *x: None)
    releases = sorted(os.listdir(corpus.tree),
                      key=lambda d: tuple(int(x) for x in d.split("-")[-1].split(".")))
    print(f"### versions corpus {corpus.label}: {len(releases)} releases as a chain of layers "
          f"(`-l {level}{' ' if layer_options else ''}{' '.join(layer_options)}`)\n")
    print("| release | layer | layer build | full image | full build |")
    print("|---|---|---|---|---|")
    layers, total_layers, total_full = [], 0, 0
    for name in releases:
        tree = os.path.join(corpus.tree, name)
        layer = os.path.join(work, f"layer-{name}.dwarfs")
        bases = [a for b in layers for a in ("--base", b)]
        made = measure.run([[hoard, "create", "-i", tree, "-o", layer, "-l", str(level),
                             "--no-progress", "-f", *(layer_options if bases else []), *bases]])
        if not made.ok:
            raise SystemExit(f"hoard create --base failed for {name}")
        full = os.path.join(work, f"full-{name}.dwarfs")
        whole = measure.run([[hoard, "create", "-i", tree, "-o", full, "-l", str(level),
                              "--no-progress", "-f"]])
        if not whole.ok:
            raise SystemExit(f"hoard create failed for {name}")
        layers.append(layer)
        size, full_size = os.path.getsize(layer), os.path.getsize(full)
        total_layers += size
        total_full += full_size
        os.remove(full)
        print(f"| {name} | {mib(size)} | {made.wall:.2f} s | {mib(full_size)} | {whole.wall:.2f} s |")
    everything = os.path.join(work, "all.dwarfs")
    allin = measure.run([[hoard, "create", "-i", corpus.tree, "-o", everything, "-l", str(level),
                          "--no-progress", "-f"]])
    top = [layers[0]] + [a for b in layers[1:] for a in ("--layer", b)]
    same = subprocess.run([hoard, "diff", *top, os.path.join(corpus.tree, releases[-1]),
                           "--ignore", "mtime_ns", "-q"], stdout=subprocess.DEVNULL)
    print(f"\nchain of {len(layers)} layers: {mib(total_layers)}; one full image per release: "
          f"{mib(total_full)}; one image of all releases: {mib(os.path.getsize(everything))} "
          f"({allin.wall:.1f} s). Top of the chain reads back as {releases[-1]}: "
          f"{'yes' if same.returncode == 0 else 'NO'}\n")


def rss_kib(pid: int) -> tuple:
    """Resident KiB: (anonymous memory, mapped image pages)."""
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("RssAnon", "RssFile"):
                fields[key] = int(value.split()[0])
    return fields.get("RssAnon", 0), fields.get("RssFile", 0)


def each(hoard: str, count: int, cachesize: str, work: str) -> None:
    tree = os.path.join(work, "small")
    os.makedirs(os.path.join(tree, "sub"))
    for i in range(20):
        with open(os.path.join(tree, "sub", f"f{i}"), "wb") as f:
            f.write(os.urandom(16 << 10))
    images = os.path.join(work, "images")
    os.makedirs(images)
    first = os.path.join(images, "img00000.dwarfs")
    subprocess.run([hoard, "create", "-i", tree, "-o", first, "--no-progress"], check=True,
                   stdout=subprocess.DEVNULL)
    for i in range(1, count):
        shutil.copyfile(first, os.path.join(images, f"img{i:05d}.dwarfs"))
    mnt = os.path.join(work, "mnt")
    os.makedirs(mnt)
    start = time.monotonic()
    subprocess.run([hoard, "mount", "--each", "-o", f"cachesize={cachesize}", images, mnt],
                   check=True)
    mount_s = time.monotonic() - start
    try:
        pid = int(os.getxattr(mnt, "user.dwarfs.driver.pid"))
        rows = [("mounted", rss_kib(pid))]
        os.listdir(mnt)
        rows.append(("root listed", rss_kib(pid)))
        names = sorted(os.listdir(mnt))
        done = 0
        for upto in (10, 100, count):
            for name in names[done:upto]:
                with open(os.path.join(mnt, name, "sub", "f7"), "rb") as f:
                    f.read()
            done = max(done, min(upto, count))
            rows.append((f"a file read in {done} images", rss_kib(pid)))
    finally:
        subprocess.run([hoard, "umount", mnt])
    print(f"### `hoard mount --each` over {count:,} images (cachesize={cachesize})\n")
    print(f"mounted in {mount_s:.3f} s\n")
    print("| after | driver RSS: memory | driver RSS: mapped image pages |")
    print("|---|---|---|")
    for what, (anon, mapped) in rows:
        print(f"| {what} | {anon / 1024:,.1f} MiB | {mapped / 1024:,.1f} MiB |")
    cache_kib = int(cachesize[:-1]) << {"k": 0, "m": 10, "g": 20}[cachesize[-1].lower()] \
        if cachesize[-1].isalpha() else int(cachesize) >> 10
    beyond = max(0, rows[-1][1][0] - rows[1][1][0] - cache_kib)
    print(f"\nmemory per open image beyond the full block cache: {beyond / count:,.1f} KiB "
          "(images are read, not mapped: no image pages stay mapped)\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="the full versions corpus")
    ap.add_argument("--level", type=int, default=7)
    ap.add_argument("--images", type=int, default=1000)
    ap.add_argument("--cachesize", default="64m")
    ap.add_argument("--skip-chain", action="store_true")
    ap.add_argument("--whole-files", action="store_true",
                    help="no --metacopy: a file whose time changed goes into its layer whole")
    ap.add_argument("--skip-each", action="store_true")
    ap.add_argument("--hoard", default=os.path.join(
        os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target")), "release", "hoard"))
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="hoard-layers-") as work:
        if not a.skip_chain:
            os.makedirs(os.path.join(work, "chain"))
            chain(a.hoard, a.level, not a.full, os.path.join(work, "chain"),
                  [] if a.whole_files else ["--metacopy"])
        if not a.skip_each:
            os.makedirs(os.path.join(work, "each"))
            each(a.hoard, a.images, a.cachesize, os.path.join(work, "each"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
