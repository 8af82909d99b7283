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

3. Delta layers (`--base ... --delta`) on two workloads, against
   today's `--base` layer, `zstd -19 --long --patch-from` and restic (when
   installed): `versions` (a directory of releases, `--releases DIR`: a
   base of the first half, a layer adding the second half) and `daily`
   (`--files` files over `--days` snapshots, each day 1% of the files
   changed by an append or a small edit, 0.2% added, 0.1% removed; each
   day a layer on all the days before). Size, build time and peak memory,
   and the cold full read (`hoard manifest`, which reads and hashes every
   file, in a new process: its block cache empty; the best of three) of
   the stack against a flat image of the same tree.

    bench/layers.py                          # quick versions corpus, 1,000 images
    bench/layers.py --full --level 9         # the 40-release corpus
    bench/layers.py --images 5000 --cachesize 64m --skip-chain
    bench/layers.py --skip-chain --skip-each --delta versions --releases DIR
    bench/layers.py --skip-chain --skip-each --delta daily --files 20000 --days 30
    bench/layers.py --skip-chain --skip-each --delta daily --files 5000 --days 12 --patch-level 9

(zstd --patch-from is single-threaded here and slow on a day's whole
tar: for the 215 MB of 20,000 files, about 4.4 minutes of CPU a day at
`-15` and 9-10 at `-19`, whose deltas came out larger; the patches run
two at a time beside the builds and each is printed as it is done.
`--patch-level` trades them for time.)

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


def tree_of(dirs: list, into: str) -> str:
    """A directory holding hard links of each of `dirs`, by base name."""
    os.makedirs(into)
    for d in dirs:
        subprocess.run(["cp", "-al", d, os.path.join(into, os.path.basename(d))], check=True)
    return into


def create(hoard: str, tree: str, out: str, level: int, *extra) -> measure.Sample:
    made = measure.run([[hoard, "create", "-i", tree, "-o", out, "-l", str(level),
                         "--no-progress", "-f", *extra]])
    if not made.ok:
        raise SystemExit(f"hoard create {' '.join(extra)} failed for {tree}")
    return made


def full_read(hoard: str, images: list, work: str) -> measure.Sample:
    """Reads every file of the stack of `images` (bottom first) in a new
    process: `hoard manifest`, which hashes each (and writes nothing)."""
    layers = [a for i in images[1:] for a in ("--layer", i)]
    runs = [measure.run([[hoard, "manifest", images[0], *layers]]) for _ in range(3)]
    if not all(r.ok for r in runs):
        raise SystemExit(f"hoard manifest of {images[-1]} failed")
    return min(runs, key=lambda r: r.wall)


def patch(base_tar: str, new_tar: str, level: int) -> tuple:
    """(bytes, CPU seconds) of `zstd -LEVEL --long --patch-from=BASE_TAR NEW_TAR`."""
    out = new_tar + ".patch.zst"
    window = max(27, (max(os.path.getsize(base_tar), os.path.getsize(new_tar)) - 1).bit_length())
    done = measure.run([["zstd", "-q", "-f", "-T0", f"-{level}", f"--long={window}",
                         f"--patch-from={base_tar}", new_tar, "-o", out]])
    if not done.ok:
        raise SystemExit(f"zstd --patch-from={base_tar} {new_tar} failed")
    size = os.path.getsize(out)
    os.remove(out)
    return size, done.cpu


class DailyPatches:
    """`zstd --patch-from` of each day's tar on the day before, two at a
    time beside the day's builds (it takes minutes a day; its optimal
    parser is single-threaded); a tar is removed once both patches that
    read it are done."""

    def __init__(self, level: int):
        import concurrent.futures
        import threading
        self.level = level
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=2)
        self.readers = {}
        self.lock = threading.Lock()
        self.jobs = []

    def add(self, base_tar: str, new_tar: str) -> None:
        with self.lock:
            self.readers.setdefault(base_tar, 1)
            self.readers[new_tar] = 2  # this patch and the next day's
        self.jobs.append(self.pool.submit(self._patch, base_tar, new_tar))

    def _patch(self, base_tar: str, new_tar: str) -> tuple:
        try:
            size, cpu = patch(base_tar, new_tar, self.level)
            print(f"  patch of {os.path.basename(new_tar)}: {size:,} B ({cpu:.0f} s CPU)",
                  file=sys.stderr, flush=True)
            return size, cpu
        finally:
            with self.lock:
                for tar in (base_tar, new_tar):
                    self.readers[tar] -= 1
                    if self.readers[tar] == 0:
                        os.remove(tar)

    def totals(self) -> tuple:
        """(bytes, CPU seconds) of all the patches, once done."""
        done = [job.result() for job in self.jobs]
        self.pool.shutdown()
        for tar, readers in self.readers.items():
            if readers > 0:
                os.remove(tar)
        return sum(d[0] for d in done), sum(d[1] for d in done)


def tar_of(tree: str, names: list, out: str) -> str:
    subprocess.run(["tar", "-C", tree, "-cf", out, *names], check=True)
    return out


class Restic:
    """A restic repository (None when restic is not installed)."""

    def __init__(self, work: str):
        self.repo = os.path.join(work, "restic")
        # A throwaway repository of the bench: its password is no secret.
        self.env = dict(os.environ, RESTIC_REPOSITORY=self.repo, RESTIC_PASSWORD="bench")
        subprocess.run(["restic", "init", "-q"], env=self.env, check=True,
                       stdout=subprocess.DEVNULL)

    @staticmethod
    def available() -> bool:
        return shutil.which("restic") is not None

    def size(self) -> int:
        return sum(os.path.getsize(os.path.join(d, f))
                   for d, _, files in os.walk(self.repo) for f in files)

    def backup(self, tree: str) -> tuple:
        """(repository growth in bytes, seconds) of a backup of `tree`."""
        before = self.size()
        done = measure.run([["restic", "backup", "-q", "."]], cwd=tree, env=self.env)
        if not done.ok:
            raise SystemExit(f"restic backup of {tree} failed")
        return self.size() - before, done.wall


def delta_versions(hoard: str, level: int, releases_dir: str, work: str) -> None:
    if releases_dir:
        releases = [os.path.join(releases_dir, r) for r in os.listdir(releases_dir)]
    else:
        corpus = corpora.prepare("versions", True, corpora.cache_dir(), log=lambda *x: None)
        releases = [os.path.join(corpus.tree, r) for r in os.listdir(corpus.tree)]
    releases.sort(key=lambda d: [int(x) if x.isdigit() else x
                                 for x in os.path.basename(d).replace("-", ".").split(".")])
    half = len(releases) // 2
    base_tree = tree_of(releases[:half], os.path.join(work, "base-tree"))
    all_tree = tree_of(releases, os.path.join(work, "all-tree"))
    base = os.path.join(work, "base.dwarfs")
    create(hoard, base_tree, base, level)
    rows = []
    plain = os.path.join(work, "plain.dwarfs")
    made = create(hoard, all_tree, plain, level, "--base", base)
    rows.append(("`--base` layer (today)", os.path.getsize(plain), made, full_read(hoard, [base, plain], work)))
    delta = os.path.join(work, "delta.dwarfs")
    made = create(hoard, all_tree, delta, level, "--base", base, "--delta")
    rows.append(("`--base --delta` layer", os.path.getsize(delta), made, full_read(hoard, [base, delta], work)))
    flat = os.path.join(work, "flat.dwarfs")
    made = create(hoard, all_tree, flat, level)
    rows.append(("flat image of all releases (for the read)", os.path.getsize(flat), made,
                 full_read(hoard, [flat], work)))
    names = [os.path.basename(r) for r in releases]
    base_tar = tar_of(all_tree, names[:half], os.path.join(work, "base.tar"))
    new_tar = tar_of(all_tree, names[half:], os.path.join(work, "new.tar"))
    patch_bytes, patch_s = patch(base_tar, new_tar, 19)
    print(f"### Delta layers, `versions`: {half} releases over {len(releases) - half} "
          f"({names[0]} ... {names[-1]}, `-l {level}`)\n")
    print("| | size | vs `--base` layer | build | build memory | stack cold full read | read memory |")
    print("|---|---|---|---|---|---|---|")
    today = rows[0][1]
    for what, size, made, read in rows:
        print(f"| {what} | {mib(size)} | {size / today:.2f}x | {made.wall:.2f} s | "
              f"{made.rss_kib / 1024:.0f} MiB | {read.wall:.2f} s | {read.rss_kib / 1024:.0f} MiB |")
    print(f"| `zstd -19 --long --patch-from` (new releases' tar on the base's) | {mib(patch_bytes)} | "
          f"{patch_bytes / today:.2f}x | {patch_s:.2f} s CPU | | | |")
    if Restic.available():
        restic = Restic(work)
        restic.backup(base_tree)
        grown, took = restic.backup(all_tree)
        print(f"| restic: repository growth | {mib(grown)} | {grown / today:.2f}x | {took:.2f} s | | | |")
    print()


def daily_day(tree: str, rng, day: int, live: list, next_id: list) -> None:
    """Changes `tree` as one day does: 1% of the files appended to or
    edited, 0.2% added, 0.1% removed."""
    n = len(live)
    for name in rng.sample(live, max(1, n // 100)):
        path = os.path.join(tree, name)
        if rng.random() < 0.5:
            with open(path, "ab") as f:
                f.write(f"day {day}: {rng.getrandbits(64):x} appended\n".encode() * rng.randint(1, 20))
        else:
            with open(path, "r+b") as f:
                size = os.fstat(f.fileno()).st_size
                f.seek(rng.randrange(max(1, size)))
                f.write(f"edit {day}".encode())
    for _ in range(max(1, n // 500)):
        live.append(daily_file(tree, rng, next_id))
    for name in rng.sample(live, max(1, n // 1000)):
        os.remove(os.path.join(tree, name))
        live.remove(name)


def daily_file(tree: str, rng, next_id: list) -> str:
    """A new text-like file of 1 to 16 KiB (a few larger); its name."""
    i = next_id[0]
    next_id[0] += 1
    name = os.path.join(f"d{i % 97:02d}", f"file{i:06d}.txt")
    os.makedirs(os.path.join(tree, os.path.dirname(name)), exist_ok=True)
    words = [f"w{rng.randrange(5000)}" for _ in range(200)]
    size = rng.randint(1 << 10, 16 << 10) * (16 if rng.random() < 0.01 else 1)
    text = []
    length = 0
    while length < size:
        line = " ".join(rng.choice(words) for _ in range(rng.randint(4, 14))) + "\n"
        text.append(line)
        length += len(line)
    with open(os.path.join(tree, name), "w") as f:
        f.write("".join(text))
    return name


def delta_daily(hoard: str, level: int, files: int, days: int, patch_level: int,
                work: str) -> None:
    import random
    rng = random.Random(37)
    tree = os.path.join(work, "tree")
    os.makedirs(tree)
    next_id = [0]
    live = [daily_file(tree, rng, next_id) for _ in range(files)]
    first = os.path.join(work, "day00.dwarfs")
    create(hoard, tree, first, level)
    plain, delta = [first], [first]
    sizes = {"plain": 0, "delta": 0, "patch": 0, "restic": 0}
    times = {"plain": 0.0, "delta": 0.0, "patch": 0.0, "restic": 0.0}
    peak = {"plain": 0, "delta": 0}
    restic = Restic(work) if Restic.available() else None
    if restic:
        restic.backup(tree)
    patches = DailyPatches(patch_level)
    prev_tar = tar_of(tree, ["."], os.path.join(work, "day00.tar"))
    for day in range(1, days + 1):
        daily_day(tree, rng, day, live, next_id)
        for kind, chain, extra in (("plain", plain, []), ("delta", delta, ["--delta"])):
            out = os.path.join(work, f"{kind}{day:02d}.dwarfs")
            bases = [a for b in chain for a in ("--base", b)]
            made = create(hoard, tree, out, level, "--trust-mtime", *bases, *extra)
            chain.append(out)
            print(f"  day {day}, {kind} layer: {os.path.getsize(out):,} B ({made.wall:.1f} s)",
                  file=sys.stderr, flush=True)
            sizes[kind] += os.path.getsize(out)
            times[kind] += made.wall
            peak[kind] = max(peak[kind], made.rss_kib)
        tar = tar_of(tree, ["."], os.path.join(work, f"day{day:02d}.tar"))
        patches.add(prev_tar, tar)
        prev_tar = tar
        if restic:
            grown, took = restic.backup(tree)
            sizes["restic"] += grown
            times["restic"] += took
    sizes["patch"], times["patch"] = patches.totals()
    flat = os.path.join(work, "flat.dwarfs")
    create(hoard, tree, flat, level)
    reads = {"plain": full_read(hoard, plain, work), "delta": full_read(hoard, delta, work),
             "flat": full_read(hoard, [flat], work)}
    print(f"### Delta layers, `daily`: {files:,} files, {days} daily layers (`-l {level}`, "
          "`--trust-mtime`)\n")
    print(f"day 0 image: {mib(os.path.getsize(first))}; flat image of day {days}: "
          f"{mib(os.path.getsize(flat))}\n")
    print(f"| | {days} days together | vs `--base` layers | build, all days | peak build memory "
          f"| day {days} cold full read | read memory |")
    print("|---|---|---|---|---|---|---|")
    today = sizes["plain"]
    for kind, what in (("plain", "`--base` layers (today)"), ("delta", "`--base --delta` layers")):
        r = reads[kind]
        print(f"| {what} | {mib(sizes[kind])} | {sizes[kind] / today:.2f}x | {times[kind]:.1f} s | "
              f"{peak[kind] / 1024:.0f} MiB | {r.wall:.2f} s | {r.rss_kib / 1024:.0f} MiB |")
    r = reads["flat"]
    print(f"| flat image of day {days} | | | | | {r.wall:.2f} s | {r.rss_kib / 1024:.0f} MiB |")
    print(f"| `zstd -{patch_level} --long --patch-from` of each day's tar on the day before | "
          f"{mib(sizes['patch'])} | {sizes['patch'] / today:.2f}x | {times['patch']:.1f} s CPU | | | |")
    if restic:
        print(f"| restic: repository growth | {mib(sizes['restic'])} | "
              f"{sizes['restic'] / today:.2f}x | {times['restic']:.1f} s | | | |")
    print(f"\nThe delta layers are {sizes['delta'] / sizes['patch']:.2f}x the `--patch-from` "
          f"deltas ({sizes['delta']:,} against {sizes['patch']:,} bytes); day {days} reads "
          f"through the chain in {reads['delta'].wall / reads['flat'].wall:.2f}x the time of "
          "its flat image.\n")


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
    ap.add_argument("--delta", action="append", choices=["versions", "daily"], default=[],
                    help="delta layer workloads to run")
    ap.add_argument("--releases", help="versions: a directory of release directories")
    ap.add_argument("--files", type=int, default=20000)
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--patch-level", type=int, default=19,
                    help="daily: the zstd level of the --patch-from deltas")
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
        if "versions" in a.delta:
            os.makedirs(os.path.join(work, "versions"))
            delta_versions(a.hoard, a.level, a.releases, os.path.join(work, "versions"))
        if "daily" in a.delta:
            os.makedirs(os.path.join(work, "daily"))
            delta_daily(a.hoard, a.level, a.files, a.days, a.patch_level,
                        os.path.join(work, "daily"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
