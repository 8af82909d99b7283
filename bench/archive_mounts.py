#!/usr/bin/env python3
"""Mounting archives directly: `hoard mount ARCHIVE MNT` against
ratarmount, archivemount and fuse-archive, on a `.tar.gz` and a `.zip` of
the `versions` corpus. Prints a Markdown table, each figure with its ratio
against hoard's on the same archive.

    bench/archive_mounts.py                # quick versions corpus (2 Django releases)
    bench/archive_mounts.py --full         # the 40-release corpus

For each tool and archive, each phase on a mount of its own, the page
cache dropped before each (root):

    first mount    the mount command until it returns and a stat of the
                   root answers, with an empty cache directory (hoard packs
                   the archive into an image, ratarmount builds its index)
    second mount   the same again, the cache directory kept
    full read      every file read in path order, its bytes hashed; the
                   hash of all paths and contents must equal the source
                   tree's
    4k random      fio random 4k reads over a fixed set of files (psync,
                   O_DIRECT, fio's seeded offsets), IOPS
    peak RSS       the most of the mount command's (os.wait4) and the FUSE
                   process's (VmHWM) over the first mount, and over the
                   read phases

A tool that is not installed is named in the table with why. Run as root
(FUSE, dropping the page cache). Python 3 standard library only; uses the
corpora, the measuring and the mount helpers of the rest of the suite.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpora  # noqa: E402
import machine  # noqa: E402
import measure  # noqa: E402
import mounts  # noqa: E402
from report import num  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MiB = 1 << 20
ARCHIVES = ("tar.gz", "zip")


@dataclasses.dataclass
class Mounter:
    """One way of mounting an archive."""

    id: str
    program: str
    argv: object  # (program, archive, mnt, cache dir) -> argv
    why_not: str | None = None


def mounters(hoard: str) -> list:
    """The tools compared, hoard first; `why_not` set for those not here."""
    items = [
        Mounter("hoard", hoard,
                lambda p, a, m, c: [p, "mount", "-o", f"archive_cache={c}", a, m]),
        Mounter("ratarmount", "ratarmount",
                lambda p, a, m, c: [p, "--index-folders", c, a, m]),
        Mounter("archivemount", "archivemount",
                lambda p, a, m, c: [p, "-o", "readonly", a, m]),
        Mounter("fuse-archive", "fuse-archive", lambda p, a, m, c: [p, a, m]),
    ]
    for t in items:
        found = shutil.which(t.program)
        if found:
            t.program = found
        elif t.id == "fuse-archive":
            t.why_not = "not available on Debian 12 (no Debian package, not on PyPI)"
        elif t.id == "ratarmount":
            t.why_not = "not installed (pip install ratarmount)"
        else:
            t.why_not = f"{t.program} not found"
    return items


def make_archives(tree: str, work: str) -> dict:
    """A .tar.gz (GNU tar, gzip -6) and a .zip (zip -6) of `tree`'s top
    entries, so that a mount's root is the tree's root."""
    names = sorted(os.listdir(tree))
    out = {kind: os.path.join(work, f"versions.{kind}") for kind in ARCHIVES}
    subprocess.run(["tar", "-C", tree, "-czf", out["tar.gz"], "--", *names], check=True)
    subprocess.run(["zip", "-q", "-r", "-X", out["zip"], "--", *names], cwd=tree, check=True)
    return out


def tree_digest(root: str, progress=None) -> tuple:
    """Reads every file under `root` in path order: (files, bytes, sha256
    of every path, type, link target and content). Calls `progress(files,
    bytes)` after every 100 files."""
    h, files, total = hashlib.sha256(), 0, 0
    for top, dirs, names in os.walk(root):
        dirs.sort()
        for name in sorted(dirs + names):
            path = os.path.join(top, name)
            st = os.lstat(path)
            h.update(os.fsencode(os.path.relpath(path, root)) + b"\0")
            if stat.S_ISLNK(st.st_mode):
                h.update(b"l" + os.fsencode(os.readlink(path)) + b"\0")
            elif stat.S_ISDIR(st.st_mode):
                h.update(b"d\0")
            elif stat.S_ISREG(st.st_mode):
                h.update(b"f\0")
                with open(path, "rb") as f:
                    while chunk := f.read(MiB):
                        h.update(chunk)
                        total += len(chunk)
                files += 1
                if progress and files % 100 == 0:
                    progress(files, total)
    return files, total, h.hexdigest()


def fuse_pid(mnt: str) -> int | None:
    """The FUSE process serving `mnt`: one whose command line names the
    mount point and which holds /dev/fuse open."""
    want = os.fsencode(mnt)
    for pid in mounts._pids():
        if want not in mounts._cmdline(pid):
            continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == "/dev/fuse":
                    return pid
            except OSError:
                pass
    return None


class Mounted:
    """A mount for one phase: drops the page cache, mounts and waits until
    a stat of the root answers (`wall`), and unmounts on exit."""

    def __init__(self, tool: Mounter, archive: str, mnt: str, cache: str, log, timeout: int):
        self.tool, self.archive, self.mnt, self.cache = tool, archive, mnt, cache
        self.log, self.timeout = log, timeout
        self.pid, self.wall, self.command_rss_kib = None, None, 0

    def __enter__(self):
        measure.drop_caches()
        start = time.perf_counter()
        try:
            s = measure.run([self.tool.argv(self.tool.program, self.archive, self.mnt,
                                            self.cache)], log=self.log, timeout=self.timeout)
            if not s.ok:
                raise mounts.MountError("timed out" if s.timed_out else f"exit {s.rc}")
            mounts._wait_mounted(self.mnt, time.perf_counter() + 60)
            os.stat(self.mnt)
            self.wall = time.perf_counter() - start
            self.command_rss_kib = s.rss_kib
            self.pid = fuse_pid(self.mnt)
        except BaseException:
            mounts.unmount(self.mnt, False, fuse_pid(self.mnt), self.log)
            raise
        return self

    def peak_rss_kib(self) -> int:
        """The most of the mount command's and the FUSE process's peak RSS."""
        return max(self.command_rss_kib, (measure.proc_peak_rss_kib(self.pid) or 0)
                   if self.pid else 0)

    def __exit__(self, *exc):
        mounts.unmount(self.mnt, False, self.pid, self.log)


def measure_tool(tool: Mounter, archive: str, work: str, source: tuple, fio_files: list,
                 settings: dict, log) -> dict:
    """Every phase of one tool on one archive; figures, or the error."""
    mnt, cache = os.path.join(work, "mnt"), os.path.join(work, f"cache-{tool.id}")
    shutil.rmtree(cache, ignore_errors=True)
    os.makedirs(cache)
    os.makedirs(mnt, exist_ok=True)
    out = {}
    args = (tool, archive, mnt, cache, log, settings["timeout"])
    try:
        with Mounted(*args) as m:
            out["first_s"] = m.wall
        out["first_rss_kib"] = m.peak_rss_kib()
        with Mounted(*args) as m:
            out["second_s"] = m.wall
        reads_rss = m.peak_rss_kib()
        with Mounted(*args) as m:
            r = measure.run([sys.executable, os.path.abspath(__file__), "--digest", mnt],
                            capture=True, log=log, timeout=settings["read_timeout"])
            last = (r.stdout.decode().splitlines() or ["0 0"])[-1].split()
            if r.ok:
                out["read_s"] = r.wall
                out["read_ok"] = (int(last[0]), int(last[1]), last[2]) == source
                out["read_counts_ok"] = (int(last[0]), int(last[1])) == source[:2]
            else:
                out["read_error"] = (
                    f"{'timed out' if r.timed_out else f'exit {r.rc}'} after {r.wall:.0f} s, "
                    f"{int(last[0]):,} of {source[0]:,} files "
                    f"({int(last[1]) / MiB:.1f} of {source[1] / MiB:.1f} MiB) read")
            reads_rss = max(reads_rss, m.peak_rss_kib())
        if fio_files:
            with Mounted(*args) as m:
                res = mounts.run_fio(mnt, fio_files, "4k", settings, log)
                out["iops_4k"] = res["iops"] if res else None
                reads_rss = max(reads_rss, m.peak_rss_kib())
        out["reads_rss_kib"] = reads_rss
    except mounts.MountError as e:
        out["error"] = str(e)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return out


COLUMNS = [  # (key, heading, format)
    ("first_s", "first mount, s", num),
    ("second_s", "second mount, s", num),
    ("read_s", "full read (cold), s", num),
    ("iops_4k", "random 4k reads, IOPS", lambda v: f"{v:,.0f}"),
    ("first_rss_kib", "peak RSS first mount, MiB", lambda v: num(v / 1024)),
    ("reads_rss_kib", "peak RSS reading, MiB", lambda v: num(v / 1024)),
]


def table(results: dict, tools: list) -> list:
    """Markdown lines: one row per tool and archive, ×ratio against hoard's
    figure on that archive."""
    lines = ["| tool | archive | " + " | ".join(h for _, h, _ in COLUMNS) + " | tree read back |",
             "|---|---|" + "---|" * len(COLUMNS) + "---|"]
    for kind in ARCHIVES:
        ref = results.get(("hoard", kind), {})
        for t in tools:
            if t.why_not:
                if kind == ARCHIVES[0]:
                    lines.append(f"| {t.id} | – | {t.why_not} |" + " |" * len(COLUMNS))
                continue
            r = results[(t.id, kind)]
            cells = []
            for key, _, fmt in COLUMNS:
                v = r.get(key)
                text = (fmt(v) if v is not None else "failed" if r.get("error") else
                        "did not finish" if key == "read_s" and r.get("read_error") else "–")
                if v is not None and t.id != "hoard" and ref.get(key):
                    text += f" ×{num(v / ref[key])}"
                cells.append(text)
            check = ("failed: " + r["error"] if r.get("error") else
                     "not read: " + r["read_error"] if r.get("read_error") else
                     "same bytes" if r.get("read_ok") else
                     "DIFFERENT (as many files and bytes: names or contents differ)"
                     if r.get("read_counts_ok") else "DIFFERENT")
            lines.append(f"| {t.id} | .{kind} | " + " | ".join(cells) + f" | {check} |")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="the full versions corpus")
    ap.add_argument("--timeout", type=int, default=1200, help="seconds a mount may take")
    ap.add_argument("--read-timeout", type=int, default=180,
                    help="seconds the full read may take (then how far it got is given)")
    ap.add_argument("--fio-mib", type=int, default=16,
                    help="MiB each fio job reads (at most --fio-seconds)")
    ap.add_argument("--fio-seconds", type=int, default=30)
    ap.add_argument("--hoard", default=os.path.join(
        os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target")), "release", "hoard"))
    ap.add_argument("--digest", metavar="DIR", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.digest:  # the full read, in a process of its own so that it can be timed out
        print(*tree_digest(a.digest, lambda n, b: print(n, b, flush=True)))
        return 0
    if not measure.can_drop_caches():
        print("run as root: FUSE mounts and dropping the page cache", file=sys.stderr)
        return 2
    cache = corpora.cache_dir()
    corpus = corpora.prepare("versions", not a.full, cache)
    tools = mounters(os.path.abspath(a.hoard))
    settings = {"threads": os.cpu_count(), "timeout": a.timeout, "read_timeout": a.read_timeout,
                "fio_io_size": {"4k": a.fio_mib * MiB}, "fio_runtime": a.fio_seconds}
    fio_files = mounts.pick_fio_files(corpus.tree, 64 * MiB) if shutil.which("fio") else []
    if not fio_files:
        print("fio not found: no random reads (apt-get install fio)", file=sys.stderr)
    source = tree_digest(corpus.tree)
    results, sizes = {}, {}
    scratch = os.path.join(cache, "scratch")
    os.makedirs(scratch, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"archive-mounts-{os.getpid()}-",
                                     dir=scratch) as work:
        try:
            archives = make_archives(corpus.tree, work)
            sizes = {k: os.path.getsize(p) for k, p in archives.items()}
            with open(os.path.join(work, "commands.log"), "ab") as log:
                for kind, path in archives.items():
                    for t in (t for t in tools if not t.why_not):
                        r = results[(t.id, kind)] = measure_tool(
                            t, path, work, source, fio_files, settings, log)
                        print(f"{t.id:13} .{kind:7} {r}", file=sys.stderr, flush=True)
        finally:
            for point in mounts.mounted_under(work):
                mounts.unmount(point, False, None, None)
    m = machine.describe(cache, REPO)
    print(f"corpus: {corpus.label}, {source[0]} files, {source[1] / MiB:.0f} MiB; "
          + ", ".join(f".{k} {v / MiB:.1f} MiB" for k, v in sizes.items()))
    print(f"hoard {m['hoard_commit']}{' (dirty)' if m['hoard_tree_dirty'] else ''}; "
          f"{m['cpu']}, {m['cores']} cores, {m['ram_gib']} GiB, {m['kernel']}, {m['os']}; "
          f"fio {len(fio_files)} files, {os.cpu_count()} jobs of {a.fio_mib} MiB or "
          f"{a.fio_seconds} s\n")
    print("\n".join(table(results, tools)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
