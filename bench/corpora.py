"""The corpora the suite packs: built once into the cache directory, reused.

    rootfs     a sample of this machine's /usr (programs, libraries, Python,
               share/): files picked in the order of a seeded hash of their
               path until a byte budget, copied with their directories,
               symlinks, hard links, modes and times; the "root file system
               of an OS" case, with little redundancy
    versions   many release source trees of one project (Django sdists from
               PyPI, sha256-checked, downloads cached), unpacked side by side:
               the "1,000 Perl installations" case, very redundant
    manyfiles  half a million files of 10-60 bytes in 500 directories,
               generated from a seed: metadata, not data
    small      a synthetic mix of edge cases: a zero file, random bytes, WAV
               audio, text, duplicates, hard and symbolic links, a sparse
               file, thousands of tiny files, a deep path, odd names

`prepare(name, quick, cache, size=...)` returns a `Corpus` (its tree and
statistics), building it first unless a stamp file of the same recipe says
it is there. Each corpus has a full and a `--quick` size; rootfs (bytes)
and manyfiles (files) also take any size.
"""

from __future__ import annotations

import array
import dataclasses
import hashlib
import json
import math
import os
import random
import re
import shutil
import stat
import subprocess
import time
import urllib.parse
import urllib.request
import wave

NAMES = ("rootfs", "versions", "manyfiles", "small")
SIZED = ("rootfs", "manyfiles")  # the corpora `size` applies to
MiB = 1 << 20
GiB = 1 << 30


@dataclasses.dataclass
class Corpus:
    name: str
    quick: bool
    tree: str  # the directory to pack
    stats: dict  # entries, files, dirs, symlinks, hardlinks, bytes, ...
    recipe: dict  # what it was built from
    variant: str = ""  # a size other than the usual one, e.g. "64 MiB"

    @property
    def label(self) -> str:
        return self.name + (f" ({self.variant})" if self.variant else
                            " (quick)" if self.quick else "")


def cache_dir() -> str:
    """$HOARD_BENCH_DIR, else hoard-bench in the user's cache directory."""
    d = os.environ.get("HOARD_BENCH_DIR")
    if not d:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
        d = os.path.join(base, "hoard-bench")
    return os.path.abspath(d)


def prepare(name: str, quick: bool, cache: str, log=print, size: int | None = None) -> Corpus:
    """The corpus `name`, built into `cache` first if it is not there yet.
    `size` (rootfs: bytes; manyfiles: files) replaces the usual size; such a
    corpus is cached apart from the usual one."""
    if size is not None and name not in SIZED:
        raise ValueError(f"corpus {name} has no size option")
    recipe = RECIPES[name](quick)
    variant = ""
    if size is not None:
        recipe, variant = RESIZE[name](recipe, size)
    suffix = "-" + re.sub(r"[ ,]", "", variant) if variant else "-quick" if quick else ""
    root = os.path.join(cache, "corpora", name + suffix)
    stamp = os.path.join(root, "stamp.json")
    tree = os.path.join(root, "tree")
    if os.path.exists(stamp):
        with open(stamp) as f:
            done = json.load(f)
        if done.get("recipe") == recipe and os.path.isdir(tree):
            return Corpus(name, quick, tree, done["stats"], recipe, variant)
        log(f"corpus {name}: recipe changed, rebuilding")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    work = tree + ".partial"
    t0 = time.monotonic()
    log(f"corpus {name}{' (quick)' if quick else ''}: building in {root}")
    BUILDERS[name](work, recipe, cache, log)
    os.rename(work, tree)
    stats = tree_stats(tree)
    with open(stamp, "w") as f:
        json.dump({"recipe": recipe, "stats": stats,
                   "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, f, indent=1)
    log(f"corpus {name}: {stats['bytes'] / MiB:.0f} MiB in {stats['files']} files, "
        f"built in {time.monotonic() - t0:.0f} s")
    return Corpus(name, quick, tree, stats, recipe, variant)


def parse_size(text: str) -> int:
    """Bytes from '1536M', '2G', '800k' or a plain number."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgG]?)(?:i?[bB])?\s*", text)
    if not m:
        raise ValueError(f"not a size: {text!r} (e.g. 64M, 2G)")
    return int(float(m.group(1)) * {"": 1, "k": 1 << 10, "m": MiB, "g": GiB}[m.group(2).lower()])


def tree_stats(tree: str) -> dict:
    """Counts of a tree: entries (as `find` prints them, the root included),
    directories, regular files, symlinks, extra hard-link names, other
    entries; `bytes` counts each inode once, `bytes_all_names` every name."""
    s = dict(entries=1, dirs=1, files=0, symlinks=0, hardlinks=0, other=0,
             bytes=0, bytes_all_names=0, largest_file=0)
    seen = set()
    for root, dirs, files in os.walk(tree):
        for name in dirs + files:
            st = os.lstat(os.path.join(root, name))
            s["entries"] += 1
            if stat.S_ISDIR(st.st_mode):
                s["dirs"] += 1
            elif stat.S_ISREG(st.st_mode):
                s["files"] += 1
                s["bytes_all_names"] += st.st_size
                if (st.st_dev, st.st_ino) in seen:
                    s["hardlinks"] += 1
                else:
                    seen.add((st.st_dev, st.st_ino))
                    s["bytes"] += st.st_size
                    s["largest_file"] = max(s["largest_file"], st.st_size)
            elif stat.S_ISLNK(st.st_mode):
                s["symlinks"] += 1
            else:
                s["other"] += 1
    return s


# ---------------------------------------------------------------- rootfs

def _rootfs_recipe(quick: bool) -> dict:
    return {"roots": ["/usr/bin", "/usr/sbin", "/usr/lib", "/usr/libexec", "/usr/include",
                      "/usr/share"],
            "target": (100 if quick else 1536) * MiB, "seed": 1}


def _rootfs_resize(recipe: dict, size: int) -> tuple:
    if size < 1:
        raise ValueError("rootfs size must be positive")
    return {**recipe, "target": size}, f"{size / MiB:g} MiB"


def _build_rootfs(work: str, recipe: dict, cache: str, log) -> None:
    """Lists the regular files and symlinks under the roots (same file system
    as each root), orders them by a seeded hash of their path — a fixed,
    even spread over programs, libraries, Python, share/ — and takes them in
    that order until `target` bytes, skipping those that would go past it (a
    hard link's second name costs nothing).
    They and their directories go over in one `tar` pipe: directories,
    symlinks, hard links between the chosen names, modes and times kept."""
    entries = []  # (hash key, path, bytes it adds, inode)
    for top in recipe["roots"]:
        if not os.path.isdir(top) or os.path.islink(top):
            continue
        dev = os.lstat(top).st_dev
        for root, dirs, files in os.walk(top):
            dirs[:] = [d for d in dirs if os.lstat(os.path.join(root, d)).st_dev == dev]
            for name in files:
                path = os.path.join(root, name)
                st = os.lstat(path)
                if stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
                    key = hashlib.sha256(f"{recipe['seed']}:{path}".encode(
                        errors="surrogateescape")).digest()
                    size = st.st_size if stat.S_ISREG(st.st_mode) else 0
                    entries.append((key, path, size, (st.st_dev, st.st_ino)))
    if not entries:
        raise RuntimeError(f"rootfs: nothing under {', '.join(recipe['roots'])}")
    entries.sort()
    chosen, seen, total = set(), set(), 0
    for _, path, size, inode in entries:
        if total >= recipe["target"]:
            break
        if size and inode in seen:
            size = 0
        if total + size > recipe["target"]:
            continue  # too big for what is left: smaller ones fill it
        seen.add(inode)
        chosen.add(path)
        total += size
    names = set()
    for path in chosen:  # each chosen path and its directories up to /
        while path not in names and path != "/":
            names.add(path)
            path = os.path.dirname(path)
    log(f"  rootfs: {len(chosen):,} of {len(entries):,} files and symlinks under "
        f"{', '.join(recipe['roots'])}: {total / MiB:.0f} MiB")
    os.makedirs(work)
    listing = os.path.join(os.path.dirname(work), "sources.txt")
    with open(listing, "wb") as f:
        f.write(b"".join(os.fsencode(n.lstrip("/")) + b"\0" for n in sorted(names)))
    # Relative to /, sorted so that each directory comes before its entries.
    pack = subprocess.Popen(["tar", "-C", "/", "--no-recursion", "--null", "-T", listing,
                             "-cf", "-"], stdout=subprocess.PIPE)
    unpack = subprocess.run(["tar", "-C", work, "-xpf", "-"], stdin=pack.stdout)
    pack.stdout.close()
    if pack.wait() != 0 or unpack.returncode != 0:
        raise RuntimeError(f"rootfs: copying with tar failed (exit {pack.returncode}, "
                           f"{unpack.returncode})")


# ---------------------------------------------------------------- versions

PYPI_JSON = os.environ.get("HOARD_BENCH_PYPI", "https://pypi.org/pypi") + "/{}/json"


def _versions_recipe(quick: bool) -> dict:
    # Full: 40 releases spread evenly over Django's final releases (~1.8 GB
    # unpacked). Quick: the first and last release of the 1.11 series.
    if quick:
        return {"project": "Django", "count": 2, "series": r"1\.11(\.\d+)?"}
    return {"project": "Django", "count": 40, "series": r"[0-9.]+"}


def _version_key(v: str):
    return tuple(int(x) for x in v.split("."))


def _pick_releases(meta: dict, recipe: dict) -> list:
    """(version, sdist file info) of `count` final releases spread evenly over
    the matching series, oldest first, the newest included."""
    finals = []
    for v, files in meta["releases"].items():
        if not re.fullmatch(r"\d+(\.\d+)*", v) or not re.fullmatch(recipe["series"], v):
            continue
        sdists = [f for f in files if f["packagetype"] == "sdist" and not f.get("yanked")
                  and f["filename"].endswith((".tar.gz", ".tgz"))]
        if sdists:
            finals.append((v, sdists[0]))
    finals.sort(key=lambda x: _version_key(x[0]))
    n = min(recipe["count"], len(finals))
    if n < 1:
        raise RuntimeError(f"{recipe['project']}: no matching releases on PyPI")
    if n == 1:
        return finals[-1:]
    idx = sorted({round(i * (len(finals) - 1) / (n - 1)) for i in range(n)})
    return [finals[i] for i in idx]


def _fetch(url: str, tries: int = 3) -> bytes:
    for attempt in range(tries):
        try:
            with urllib.request.urlopen(url, timeout=120) as r:
                return r.read()
        except OSError:
            if attempt == tries - 1:
                raise
            time.sleep(2 * (attempt + 1))
    raise AssertionError


def _download(url: str, sha256: str, dest: str, log) -> None:
    """Downloads `url` to `dest` unless a file with that sha256 is there."""
    if os.path.exists(dest):
        with open(dest, "rb") as f:
            if hashlib.sha256(f.read()).hexdigest() == sha256:
                return
    log(f"  versions: downloading {os.path.basename(dest)}")
    data = _fetch(url)
    got = hashlib.sha256(data).hexdigest()
    if got != sha256:
        raise RuntimeError(f"{url}: sha256 {got}, PyPI says {sha256}")
    with open(dest + ".part", "wb") as f:
        f.write(data)
    os.rename(dest + ".part", dest)


def _build_versions(work: str, recipe: dict, cache: str, log) -> None:
    """Downloads the chosen sdists (cached under downloads/pypi) and unpacks
    each into its own directory."""
    api = PYPI_JSON.format(recipe["project"])
    meta = json.loads(_fetch(api))
    downloads = os.path.join(cache, "downloads", "pypi")
    os.makedirs(downloads, exist_ok=True)
    os.makedirs(work)
    picked = _pick_releases(meta, recipe)
    log(f"  versions: {recipe['project']} {', '.join(v for v, _ in picked)}")
    for version, info in picked:
        url = urllib.parse.urljoin(api, info["url"])  # the index may give relative URLs
        archive = os.path.join(downloads, info["filename"])
        _download(url, info["digests"]["sha256"], archive, log)
        dest = os.path.join(work, f"{recipe['project']}-{version}")
        os.makedirs(dest)
        # GNU tar refuses absolute and ../ member names; one top directory is stripped.
        subprocess.run(["tar", "-xzf", archive, "-C", dest, "--strip-components=1",
                        "--no-same-owner"], check=True)


# ---------------------------------------------------------------- manyfiles

def _manyfiles_recipe(quick: bool) -> dict:
    return {"files": 50_000 if quick else 500_000, "dirs": 500, "min_bytes": 10,
            "max_bytes": 60, "seed": 1}


def _manyfiles_resize(recipe: dict, files: int) -> tuple:
    if files < 1:
        raise ValueError("manyfiles needs at least one file")
    # 500 directories, or fewer for a small count (at least 10 files each)
    dirs = max(1, min(recipe["dirs"], files // 10))
    return {**recipe, "files": files, "dirs": dirs}, f"{files:,} files"


def _build_manyfiles(work: str, recipe: dict, cache: str, log) -> None:
    """`files` files of `min_bytes`..`max_bytes` bytes, spread evenly over
    `dirs` directories: lines of words and numbers, as in small
    configuration or data files, drawn from a seeded generator."""
    rng = random.Random(recipe["seed"])
    files, dirs = recipe["files"], recipe["dirs"]
    os.makedirs(work)
    for i in range(files):
        d = i * dirs // files
        if i == 0 or d != (i - 1) * dirs // files:
            os.makedirs(os.path.join(work, f"d{d:03}"))
        size = rng.randint(recipe["min_bytes"], recipe["max_bytes"])
        text = ""
        while len(text) < size:
            text += f"{rng.choice(WORDS)}={rng.randrange(1 << rng.choice((4, 8, 16, 32)))}\n"
        with open(os.path.join(work, f"d{d:03}", f"f{i:06}"), "w") as f:
            f.write(text[:size - 1] + "\n")
        if i % 100_000 == 99_999:
            log(f"  manyfiles: {i + 1:,} of {files:,} files")


# ---------------------------------------------------------------- small

def _small_recipe(quick: bool) -> dict:
    scale = 16 if quick else 1
    return {"zeros": 256 * MiB // scale, "random": 64 * MiB // scale,
            "wav_files": 2 if quick else 8, "wav_seconds": 10 if quick else 30,
            "text": 24 * MiB // scale, "sparse": 64 * MiB // scale,
            "tiny_files": 20000 // (10 if quick else 1), "deep": 30 if quick else 100,
            "hardlink_groups": 200 // (10 if quick else 1), "long_name": 250, "seed": 1}


WORDS = ("the of and to in is was for on that with as by at from this be are or an it "
         "file system image block compress read write mount data tree node inode chunk "
         "metadata segment window level hash table cache worker thread offset size").split()


def _build_small(work: str, recipe: dict, cache: str, log) -> None:
    rng = random.Random(recipe["seed"])
    os.makedirs(work)
    j = lambda *p: os.path.join(work, *p)  # noqa: E731

    # A zero file, written out (not sparse), and random bytes.
    with open(j("zeros.bin"), "wb") as f:
        block = bytes(MiB)
        for _ in range(recipe["zeros"] // MiB):
            f.write(block)
    with open(j("random.bin"), "wb") as f:
        for _ in range(recipe["random"] // MiB):
            f.write(rng.randbytes(MiB))

    # A sparse file: a few islands of data in a hole.
    with open(j("sparse.img"), "wb") as f:
        f.truncate(recipe["sparse"])
        for k in range(4):
            f.seek(k * recipe["sparse"] // 4)
            f.write(rng.randbytes(64 * 1024))

    # WAV audio: 16-bit stereo, 44.1 kHz, chords with a little noise.
    os.makedirs(j("audio"))
    for n in range(recipe["wav_files"]):
        _write_wav(j("audio", f"track{n:02}.wav"), recipe["wav_seconds"], rng)

    # Text: made-up prose, in files of 16–256 KiB; a few duplicated.
    os.makedirs(j("text", "dup"))
    left, k = recipe["text"], 0
    while left > 0:
        size = min(left, rng.randint(16, 256) * 1024)
        words = []
        length = 0
        while length < size:
            w = rng.choice(WORDS)
            words.append(w)
            length += len(w) + 1
        with open(j("text", f"doc{k:04}.txt"), "w") as f:
            f.write(" ".join(words)[:size])
        left -= size
        k += 1
    for i in range(0, k, 7):
        shutil.copy2(j("text", f"doc{i:04}.txt"), j("text", "dup", f"copy-of-doc{i:04}.txt"))

    # Tiny files (0–512 bytes) in 200 directories; some empty, some equal.
    for i in range(recipe["tiny_files"]):
        d = j("tiny", f"d{i % 200:03}")
        if i < 200:
            os.makedirs(d)
        with open(os.path.join(d, f"f{i:05}"), "wb") as f:
            if i % 10:
                f.write(rng.randbytes(rng.randint(1, 512)) if i % 3 else b"same tiny content\n")

    # Hard links: groups of three names for one inode, across directories.
    os.makedirs(j("links", "a"))
    os.makedirs(j("links", "b"))
    for i in range(recipe["hardlink_groups"]):
        first = j("links", "a", f"h{i:04}")
        with open(first, "wb") as f:
            f.write(rng.randbytes(rng.randint(100, 20000)))
        os.link(first, j("links", "b", f"h{i:04}"))
        os.link(first, j("links", f"h{i:04}.again"))
    os.link(j("random.bin"), j("links", "random-hardlink.bin"))

    # Symbolic links: relative, absolute, to a directory, dangling, a chain.
    os.symlink("../text/doc0000.txt", j("links", "rel"))
    os.symlink("/usr/bin/env", j("links", "abs"))
    os.symlink("../audio", j("links", "dir"))
    os.symlink("does/not/exist", j("links", "dangling"))
    os.symlink("rel", j("links", "chain"))

    # A deep path, long names, odd characters (no newlines: `find | wc -l`
    # counts the entries), an empty directory.
    d = j("deep")
    for i in range(recipe["deep"]):
        d = os.path.join(d, f"level{i:03}")
    os.makedirs(d)
    with open(os.path.join(d, "bottom.txt"), "w") as f:
        f.write("the bottom\n")
    os.makedirs(j("names", "empty-dir"))
    # The long name is not 255 bytes: erofs-utils 1.5 fails on one among others.
    for name in ("x" * recipe["long_name"], "space and tab\t.txt", "ünïcödé-名前-🙂.txt",
                 "-leading-dash", "quote'double\"back\\slash", "*glob?[chars]"):
        with open(j("names", name), "w") as f:
            f.write(name + "\n")


def _write_wav(path: str, seconds: int, rng: random.Random) -> None:
    rate = 44100
    chord = [rng.choice([220.0, 261.6, 329.6, 392.0, 440.0, 523.3]) * (1 + i * 0.5)
             for i in range(3)]
    # One second of samples computed, then varied per second by amplitude.
    base = array.array("h")
    for t in range(rate):
        x = sum(math.sin(2 * math.pi * f * t / rate) for f in chord) / len(chord)
        left = int(12000 * x + rng.gauss(0, 300))
        right = int(11000 * x + rng.gauss(0, 300))
        base.append(max(-32768, min(32767, left)))
        base.append(max(-32768, min(32767, right)))
    with wave.open(path, "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(2)
        w.setframerate(rate)
        for s in range(seconds):
            gain = 0.5 + 0.5 * math.sin(s / 3)
            sec = array.array("h", (int(v * gain) for v in base))
            w.writeframes(sec.tobytes())


RECIPES = {"rootfs": _rootfs_recipe, "versions": _versions_recipe,
           "manyfiles": _manyfiles_recipe, "small": _small_recipe}
RESIZE = {"rootfs": _rootfs_resize, "manyfiles": _manyfiles_resize}
BUILDERS = {"rootfs": _build_rootfs, "versions": _build_versions,
            "manyfiles": _build_manyfiles, "small": _build_small}
