"""The programs compared, as data: image builders and extractors.

A `Builder` packs a directory into an image (hoard at levels 1, 7 and 9,
DwarFS's mkdwarfs, mksquashfs, mkfs.erofs, tar | zstd); an `Extractor`
unpacks one builder's image into a directory (hoard extract,
dwarfsextract, unsquashfs, fsck.erofs --extract, zstd -d | tar -x). Each
knows its family (for --tools), the command lines it runs and, through
`probe()`, whether it can run on this machine and why not. The FUSE drivers
live in mounts.py.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess

REFERENCE = "hoard-l7"  # hoard's default level: every ratio is against it
FAMILIES = ("hoard", "dwarfs", "squashfs", "erofs", "tar")


@dataclasses.dataclass
class Builder:
    """One way of packing a tree into an image file."""

    id: str  # e.g. "squashfs-zstd22"
    family: str  # one of FAMILIES
    label: str  # how tables and charts name it
    commands: object  # (src, out, threads) -> list of argv lists (a pipeline)
    needs: tuple  # programs that must exist
    why_not: str | None = None  # set by probe() when it cannot run

    def argv(self, src, out, threads):
        return self.commands(src, out, threads)


@dataclasses.dataclass
class Extractor:
    """One way of unpacking an image (made by `image_of`) into a directory."""

    id: str
    family: str
    label: str
    image_of: tuple  # builder ids whose image it can take, in preference order
    commands: object  # (image, dest, threads) -> list of argv lists
    needs: tuple
    makes_dest: bool = True  # False: dest must exist before it runs
    why_not: str | None = None

    def argv(self, image, dest, threads):
        return self.commands(image, dest, threads)


DWARFS_TOOLS = ("mkdwarfs", "dwarfs", "dwarfsextract", "dwarfsck")
DWARFS_ANCHOR = os.path.join("shared", "anchors", "dwarfs-0.15.3", "bin")


def dwarfs_dir(repo: str) -> str:
    """Where DwarFS's tools are: $DWARFS_BIN when set, else the reference
    build beside the checkout, ../shared/anchors/dwarfs-0.15.3/bin."""
    return os.path.abspath(os.environ.get("DWARFS_BIN")
                           or os.path.join(os.path.dirname(os.path.abspath(repo)),
                                           DWARFS_ANCHOR))


class Programs:
    """Where the programs are: hoard's binary is given, DwarFS's come from
    `dwarfs_bin` only (never PATH), the rest from PATH. A DwarFS tool counts
    only if it is not hoard under another name (hoard answers to mkdwarfs,
    dwarfs, dwarfsck and dwarfsextract when linked so) and its `--help`
    banner names it with a version, as DwarFS's do ("mkdwarfs (v0.15.3 ...")."""

    def __init__(self, hoard: str | None, dwarfs_bin: str | None = None):
        self.hoard = hoard
        self.dwarfs_bin = dwarfs_bin
        self._cache = {}
        self.why = {}  # program name -> why it was not taken, for DwarFS's

    def find(self, name: str) -> str | None:
        if name == "hoard":
            return self.hoard if self.hoard and os.access(self.hoard, os.X_OK) else None
        if name not in self._cache:
            if name in DWARFS_TOOLS:
                path, why = self._find_dwarfs(name)
                if why:
                    self.why[name] = why
            else:
                path = shutil.which(name)
            self._cache[name] = path
        return self._cache[name]

    def _find_dwarfs(self, name: str) -> tuple:
        """(path, None) of DwarFS's tool `name`, or (None, why not)."""
        if not self.dwarfs_bin:
            return None, "no DwarFS directory given"
        path = os.path.join(self.dwarfs_bin, name)
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            return None, f"not in {self.dwarfs_bin} (set $DWARFS_BIN)"
        real = os.path.realpath(path)
        if os.path.basename(real).startswith("hoard") or (
                self.hoard and os.path.exists(self.hoard) and os.path.samefile(real, self.hoard)):
            return None, f"{path} is hoard, not DwarFS"
        try:
            r = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired) as e:
            return None, f"{path} does not run ({e})"
        banner = re.search(rf"^\s*{re.escape(name)} \(v\d[^)]*\)", r.stdout + r.stderr, re.M)
        if r.returncode != 0 or not banner:
            last = (r.stderr.strip().splitlines() or ["no DwarFS banner in --help"])[-1]
            return None, f"{path} is not a working DwarFS tool ({last[:120]})"
        return path, None

    def hoard_can_create(self) -> bool:
        """Whether this hoard binary has the `create` command yet."""
        if not self.find("hoard"):
            return False
        r = subprocess.run([self.hoard, "create", "--help"], capture_output=True)
        return r.returncode == 0

    def erofs_compressors(self) -> set:
        """The compressors this mkfs.erofs was built with."""
        if not self.find("mkfs.erofs"):
            return set()
        r = subprocess.run(["mkfs.erofs", "--help"], capture_output=True, text=True)
        m = re.search(r"Available compressors are:\s*(.*)", r.stdout + r.stderr)
        return set(re.findall(r"[a-z0-9]+", m.group(1))) if m else set()


def builders(p: Programs) -> list:
    """Every image builder the suite knows, in table order."""
    hoard = p.hoard or "hoard"
    mkdwarfs = p.find("mkdwarfs") or "mkdwarfs"
    out = []
    for level in (1, 7, 9):
        out.append(Builder(
            f"hoard-l{level}", "hoard", f"hoard -l{level}",
            lambda s, o, n, level=level: [[hoard, "create", "-i", s, "-o", o, "-l", str(level),
                                           "-N", str(n), "--no-progress"]],
            ("hoard",)))
    # The default level with 5% recovery data: what the data costs.
    out.append(Builder(
        "hoard-l7-recovery5", "hoard", "hoard -l7 --recovery 5",
        lambda s, o, n: [[hoard, "create", "-i", s, "-o", o, "-l", "7", "-N", str(n),
                          "--recovery", "5", "--no-progress"]],
        ("hoard",)))
    for level in (1, 7, 9):
        out.append(Builder(
            f"mkdwarfs-l{level}", "dwarfs", f"mkdwarfs -l{level}",
            lambda s, o, n, level=level: [[mkdwarfs, "-i", s, "-o", o, "-l", str(level),
                                           "-N", str(n), "--no-progress"]],
            ("mkdwarfs",)))
    for comp, args in (("zstd22", ["-comp", "zstd", "-Xcompression-level", "22"]),
                       ("xz", ["-comp", "xz"])):
        out.append(Builder(
            f"squashfs-{comp}", "squashfs",
            f"mksquashfs {'zstd -22' if comp == 'zstd22' else 'xz'} 1M",
            lambda s, o, n, args=args: [["mksquashfs", s, o, *args, "-b", "1M", "-noappend",
                                         "-no-progress", "-quiet", "-processors", str(n)]],
            ("mksquashfs",)))
    out.append(Builder(
        "erofs-lz4hc", "erofs", "mkfs.erofs lz4hc,12",
        lambda s, o, n: [["mkfs.erofs", "-zlz4hc,12", "--quiet", o, s]],
        ("mkfs.erofs",)))
    out.append(Builder(
        "erofs-lzma", "erofs", "mkfs.erofs lzma",
        lambda s, o, n: [["mkfs.erofs", "-zlzma,6", "--quiet", o, s]],
        ("mkfs.erofs",)))
    out.append(Builder(
        "tar-zstd19", "tar", "tar | zstd -19 --long=27",
        lambda s, o, n: [["tar", "-C", s, "-cf", "-", "."],
                         ["zstd", "-19", "--long=27", f"-T{n}", "-q", "-f", "-o", o]],
        ("tar", "zstd")))
    return out


def extractors(p: Programs) -> list:
    """Every extractor the suite knows, in table order."""
    hoard = p.hoard or "hoard"
    dwarfsextract = p.find("dwarfsextract") or "dwarfsextract"
    return [
        Extractor("hoard-extract", "hoard", "hoard extract", ("hoard-l7",),
                  lambda i, d, n: [[hoard, "extract", i, "-o", d, "-n", str(n)]], ("hoard",)),
        Extractor("dwarfsextract", "dwarfs", "dwarfsextract", ("mkdwarfs-l7", "hoard-l7"),
                  lambda i, d, n: [[dwarfsextract, "-i", i, "-o", d, "-n", str(n)]],
                  ("dwarfsextract",), makes_dest=False),
        Extractor("unsquashfs", "squashfs", "unsquashfs", ("squashfs-zstd22",),
                  lambda i, d, n: [["unsquashfs", "-d", d, "-n", "-q", "-p", str(n), i]],
                  ("unsquashfs",)),
        Extractor("fsck.erofs", "erofs", "fsck.erofs --extract", ("erofs-lz4hc",),
                  lambda i, d, n: [["fsck.erofs", f"--extract={d}", i]], ("fsck.erofs",)),
        Extractor("tar-x", "tar", "zstd -d | tar -x", ("tar-zstd19",),
                  lambda i, d, n: [["zstd", "-d", "--long=27", "-q", "-c", i],
                                   ["tar", "-xf", "-", "-C", d]],
                  ("zstd", "tar"), makes_dest=False),
    ]


def probe(items: list, p: Programs) -> None:
    """Sets `why_not` on every builder or extractor that cannot run here."""
    can_create = None
    erofs = None
    for t in items:
        missing = [n for n in t.needs if not p.find(n)]
        if missing:
            t.why_not = "; ".join(f"{n}: {p.why[n]}" if n in p.why else f"{n} not found"
                                  for n in missing)
            continue
        if t.id.startswith("hoard-l"):
            if can_create is None:
                can_create = p.hoard_can_create()
            if not can_create:
                t.why_not = "this hoard has no `create` command yet"
        if t.id == "erofs-lzma":
            if erofs is None:
                erofs = p.erofs_compressors()
            if "lzma" not in erofs:
                t.why_not = f"mkfs.erofs has no lzma (only {', '.join(sorted(erofs)) or 'none'})"


def select(items: list, wanted: list | None) -> list:
    """The items whose id or family is named in `wanted` (all when None)."""
    if not wanted:
        return list(items)
    return [t for t in items if t.id in wanted or t.family in wanted]


def version(p: Programs, name: str) -> str | None:
    """A one-line version of a program, for the report: the first line of
    its version (or help) output that names it and has a digit."""
    path = p.find(name)
    if not path:
        return None
    for flags in (["--version"], ["-version"], ["-V"], ["--help"]):
        try:
            r = subprocess.run([path, *flags], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        for line in (r.stdout + r.stderr).splitlines():
            low = line.lower()
            names = {name.split(".")[0].lower(), {"zstd": "zstandard"}.get(name, name)}
            if (any(n in low for n in names) and re.search(r"\d", line)
                    and "usage" not in low and "syntax" not in low):
                return line.strip()[:100]
    return None
