"""Corpus builders. Each corpus is built once into the cache directory
($HOARD_BENCH_DIR, default ~/.cache/hoard-bench) and reused; a stamp file
marks a complete build."""
import json
import math
import os
import random
import shutil
import struct
import subprocess
import tarfile
import urllib.parse
import urllib.request
import wave

PYPI = "https://pypi.org/pypi/{}/json"


def cache_dir():
    """Where corpora, downloads and scratch files live."""
    d = os.environ.get("HOARD_BENCH_DIR") or os.path.expanduser("~/.cache/hoard-bench")
    os.makedirs(d, exist_ok=True)
    return d


def _rootfs(dest, quick):
    """A copy of system directories, symlinks and hard links kept."""
    sources = (["/usr/lib/python3", "/usr/share/perl"] if quick else
               ["/usr/share", "/usr/lib/python3", "/usr/lib/python3.11",
                "/usr/lib/x86_64-linux-gnu", "/usr/lib/jvm"])
    for src in sources:
        if os.path.isdir(src):
            target = os.path.join(dest, src.lstrip("/"))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            # cp -a keeps links, modes and times; unreadable files are skipped.
            subprocess.run(["cp", "-a", src, target], check=False,
                           stderr=subprocess.DEVNULL)


def _versions(dest, quick):
    """Release source archives of Django from PyPI, unpacked side by side."""
    meta = json.load(urllib.request.urlopen(PYPI.format("Django"), timeout=60))
    releases = []
    for version, files in meta["releases"].items():
        parts = version.split(".")
        if not all(p.isdigit() for p in parts):
            continue  # no pre-releases
        sdists = [f for f in files if f["packagetype"] == "sdist"]
        if sdists:
            releases.append((tuple(int(p) for p in parts), sdists[0]))
    releases.sort()
    # Full: the last patch release of every minor series from 1.8 on, plus
    # some patch releases of recent series; quick: two neighbours.
    newest = releases[-2:] if quick else _spread(releases, 24)
    downloads = os.path.join(cache_dir(), "downloads")
    os.makedirs(downloads, exist_ok=True)
    for _, f in newest:
        path = os.path.join(downloads, f["filename"])
        if not os.path.exists(path):
            url = urllib.parse.urljoin(PYPI.format("Django"), f["url"])
            urllib.request.urlretrieve(url, path + ".part")
            os.rename(path + ".part", path)
        with tarfile.open(path) as t:
            t.extractall(dest, filter="tar")


def _spread(releases, n):
    """`n` releases spread evenly over the list, the newest included."""
    step = max(1, len(releases) // n)
    picked = releases[::-1][::step][:n]
    return sorted(picked)


def _wav(path, seconds, freq):
    with wave.open(path, "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(2)
        w.setframerate(44100)
        frames = bytearray()
        for i in range(int(44100 * seconds)):
            v = int(12000 * math.sin(2 * math.pi * freq * i / 44100))
            frames += struct.pack("<hh", v, v // 2)
        w.writeframes(bytes(frames))


def _small(dest, quick):
    """Edge cases: zeros, random bytes, audio, links, many tiny files."""
    scale = 16 if quick else 1
    rnd = random.Random(42)
    with open(os.path.join(dest, "zeros.bin"), "wb") as f:
        f.write(bytes(256 * 2**20 // scale))
    with open(os.path.join(dest, "random.bin"), "wb") as f:
        f.write(rnd.randbytes(64 * 2**20 // scale))
    audio = os.path.join(dest, "audio")
    os.makedirs(audio)
    for i in range(4 if quick else 12):
        _wav(os.path.join(audio, f"tone{i}.wav"), 3, 220 * (i + 1))
    tiny = os.path.join(dest, "tiny")
    os.makedirs(tiny)
    for i in range(20000 // scale * 2 if quick else 20000):
        with open(os.path.join(tiny, f"f{i:05d}.txt"), "w") as f:
            f.write(f"{i % 777}\n" * (i % 5))
    deep = os.path.join(dest, *[f"level{i}" for i in range(30)])
    os.makedirs(deep)
    with open(os.path.join(deep, "leaf.txt"), "w") as f:
        f.write("deep\n")
    os.link(os.path.join(dest, "random.bin"), os.path.join(dest, "random-link.bin"))
    os.symlink("random.bin", os.path.join(dest, "random-symlink"))
    os.symlink("/nonexistent", os.path.join(dest, "dangling"))


BUILDERS = {"rootfs": _rootfs, "versions": _versions, "small": _small}


def corpus(name, quick):
    """The path of corpus `name` (built if missing)."""
    size = "quick" if quick else "full"
    path = os.path.join(cache_dir(), "corpora", f"{name}-{size}")
    stamp = path + ".done"
    if not os.path.exists(stamp):
        shutil.rmtree(path, ignore_errors=True)
        os.makedirs(path)
        print(f"building corpus {name} ({size}) in {path} ...", flush=True)
        BUILDERS[name](path, quick)
        open(stamp, "w").close()
    return path
