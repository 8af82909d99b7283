#!/usr/bin/env python3
"""App cold start from a mounted image, hoard against the alternatives.

hoard plain, hot-ordered with preload, and as a self-running bundle.
The alternatives: DwarFS
(plain, and with its hotness options), SquashFS
(kernel and squashfuse) and the kernel's EROFS. Prints one Markdown table
per workload (bench/README.md; figures in doc/bench/cold-start.md).

    bench/cold_start.py                  # every workload, median of 5 runs
    bench/cold_start.py --runs 3 --workloads python
    bench/cold_start.py --workloads gcc --variants hoard-hot hoard-hot-zstd erofs floor

Run it as root on Debian 12 (the workloads take its Python 3.11 and Perl
5.36; it installs the bench suite's packages when they are missing, see
bench/deps.py, and runs DwarFS's `setup.sh`). Each command's output goes
to WORK/hoard-cold-start.log.
Python 3 standard library only. DwarFS's tools come from where the bench
suite takes them (`$DWARFS_BIN`, else ../shared/anchors/dwarfs-0.15.3/bin).

Workloads, each a tree copied from this machine and packed by every variant:
- `python`: the Python 3.11 interpreter and its standard library
  (`bin/python3`, `lib/python3.11/...` with its `__pycache__`); the
  interpreter is started from the mount (`MNT/bin/python3 -I`, so it
  finds its library beside itself) and imports 42 standard modules.
- `pip`: the same interpreter and library with Debian's
  `/usr/lib/python3/dist-packages` (pip, setuptools, pygments,
  cryptography, ...); `python3 -I -m pip list` from the mount imports
  about 630 modules, 557 of them from files in 65 directories: a start made
  of many small files.
- `perl`: Perl's modules (`/usr/share/perl`, `/usr/lib/x86_64-linux-gnu/
  perl` and `perl-base`); the system's `perl` loads 38 of them with
  `@INC` set to the mount alone.
- `gcc`: a C toolchain: gcc 12's driver, `cc1` (33 MB), `as`, their own
  libraries (isl, mpc, mpfr, gmp, bfd) and the headers of Debian's C
  library and kernel headers packages; the mount's `gcc --sysroot=MNT`
  compiles a small C file with -O2 to an object file, with
  `LD_LIBRARY_PATH` pointing at the mount's libraries.
Before the timed runs, one warm run per variant checks that every module
was loaded from the mount.

Cold means: the page cache dropped (`sync; echo 3 > /proc/sys/vm/
drop_caches`) before each run, and the time includes the mount. One run:
drop the cache, start the clock, mount (FUSE drivers daemonize; the mount
counts from the command's start until the mount point answers), run the
workload to its end, stop the clock, read the FUSE driver's peak memory
(VmHWM), unmount. Each figure is the median of --runs runs; within a run
every variant goes once, the order rotated by one each run, so that
drift of the machine hits all alike. Ratios are against kernel EROFS.

hoard's images are mounted with `hoard-mount IMAGE MNT` (the FUSE driver
alone, built beside `hoard`), as DwarFS's are with `dwarfs`; with
`hoard mount` where it is missing.

Hot-ordered images: a warm run on the plain image (hoard's, or
DwarFS's) mounted by its own driver with `-o analysis_file=FILE` records
the files the workload opens; that list builds a second image, mounted
with `-o preload_category=hotness`: `hoard create -l9 --categorize=hotness
--hotness-list=FILE` (hot files first, in the list's order, LZ4 HC; the
rest, which the app does not read, with level 9's LZMA), and
`mkdwarfs --categorize=hotness --hotness-list=FILE
--order=hotness::explicit:file=FILE`.

The bundle (`hoard bundle`, hot-ordered as above; its runtime preloads
the `hotness` blocks by itself): the tree gets an entry script,
`bundle-entry`, that runs the workload (`bundle-entry run`) or its
check (`bundle-entry strays`) on `$HOARD_BUNDLE_DIR` through `/bin/sh`;
its time is the bundle run from a dropped page cache to its exit: the
runtime's start, the mount, the workload and the unmount; no mount time
or driver memory of its own is shown.

One variant runs only when `--variants` names it (which also takes the
variants whose images it needs): `hoard-hot-zstd`, hot blocks
compressed with zstd (`$HOARD_HOT_ZSTD`, `zstd:level=19` by default)
instead of LZ4 HC.

The floor (`floor` row): the workload run on a copy of the tree in
memory (tmpfs, which dropping the page cache leaves alone), so no file
system reads or decodes anything and nothing is mounted; what lies
outside the tree (the C library, the system's perl, ...) is as cold as
in every other run. No file system can start the app faster, so a
workload whose floor is above 0.8x of EROFS's total cannot meet #46's
goal.

Everything is unmounted on the way out, Ctrl-C and SIGTERM included.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import deps  # noqa: E402
import measure  # noqa: E402
import mounts  # noqa: E402
import tools  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REFERENCE = "erofs"  # every ratio is against kernel EROFS
PYTHON_MODULES = (
    "argparse asyncio base64 bz2 collections concurrent.futures contextlib copy csv "
    "dataclasses datetime decimal email.message enum fractions functools gzip hashlib "
    "http.client inspect itertools json logging lzma pathlib pickle random re shutil "
    "socket sqlite3 ssl statistics subprocess tarfile tempfile textwrap typing "
    "urllib.request uuid xml.etree.ElementTree zipfile").split()
# pip's own start (`python3 -m pip list`), run so that a failure shows in
# the exit status and the strays check can follow it in the same process.
PIP_LIST = ("import runpy, sys\n"
            "sys.argv = ['pip', '--disable-pip-version-check', 'list']\n"
            "try:\n"
            "    runpy.run_module('pip', run_name='__main__', alter_sys=True)\n"
            "except SystemExit as e:\n"
            "    assert not e.code, e.code\n")
PERL_MODULES = (
    "strict warnings Archive::Tar Benchmark Carp Compress::Zlib Cwd Data::Dumper "
    "Digest::MD5 Digest::SHA Encode Errno Exporter Fcntl File::Find File::Path File::Spec "
    "File::Temp Getopt::Long HTTP::Tiny IO::Compress::Gzip IO::File IO::Socket JSON::PP "
    "List::Util MIME::Base64 Math::BigInt POSIX Pod::Usage Scalar::Util Socket Storable "
    "Term::ANSIColor Test::More Text::ParseWords Text::Wrap Time::HiRes Time::Local").split()
PERL_INC = ("lib/perl/5.36", "share/perl/5.36", "lib/perl-base")
GCC = "/usr/lib/gcc/x86_64-linux-gnu/12"
GCC_LIBS = ("libisl.so.23", "libmpc.so.3", "libmpfr.so.6", "libgmp.so.10",
            "libbfd-2.40-system.so", "libsframe.so.0")  # cc1's and as's own
GCC_SOURCE = """#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    double sum = 0;
    for (int i = 1; i < argc; i++)
        sum += sqrt(atof(argv[i]));
    printf("%g %zu %ld\\n", sum, strlen(argv[0]), (long)getpid());
    return 0;
}
"""


@dataclasses.dataclass
class Workload:
    """An app start: a tree to pack and a command to run on its mount."""

    id: str
    title: str
    sources: tuple  # (path on this machine, path in the tree)
    command: object  # (mnt) -> argv that starts the app
    strays: object  # (mnt) -> argv printing what the app loaded from elsewhere
    files: object = None  # () -> more files to copy, each to its own path in the tree
    texts: tuple = ()  # (path in the tree, text) written into it


def python_argv(mnt: str, code: str) -> list:
    """The interpreter on the mount, isolated, running `code`."""
    return [os.path.join(mnt, "bin", "python3"), "-I", "-c", code]


def modules_outside(mnt: str) -> str:
    """Python code printing the files of the loaded modules that are not
    on the mount `mnt` (needs `sys`)."""
    return ("for f in sorted({getattr(v, '__file__', None) or '' "
            "for v in list(sys.modules.values())}):\n"
            f"    f and not f.startswith('{mnt}/') and print(f)")


def perl_argv(mnt: str, code: str) -> list:
    """The system's perl, with the mount as its only @INC, running `code`."""
    inc = ", ".join(f"'{os.path.join(mnt, d)}'" for d in PERL_INC)
    uses = " ".join(f"use {m};" for m in PERL_MODULES)
    return ["perl", "-e", f"BEGIN {{ @INC = ({inc}) }} {uses} {code}"]


def gcc_argv(mnt: str, *more: str) -> list:
    """The toolchain on the mount (gcc, cc1, as, their libraries, the C
    library's headers, as `--sysroot`) compiling the tree's `src/hello.c`
    with -O2 to an object file."""
    return ["env", f"LD_LIBRARY_PATH={mnt}/usr/lib/x86_64-linux-gnu",
            f"{mnt}/usr/bin/gcc", f"--sysroot={mnt}", "-O2", *more, "-c",
            f"{mnt}/src/hello.c", "-o", "/tmp/hoard-cold-start-hello.o"]


def gcc_strays(mnt: str) -> list:
    """Prints the programs, headers and libraries the compile took from
    outside the mount (`-v` names the programs, `-H` the headers, ld.so's
    trace the libraries of cc1 and as)."""
    libs = "|".join(re.escape(n) for n in GCC_LIBS)
    trace = " ".join(f"'{mnt}/usr/{p}'" for p in
                     ("lib/gcc/x86_64-linux-gnu/12/cc1", "x86_64-linux-gnu/bin/as"))
    compile_ = " ".join(f"'{a}'" for a in gcc_argv(mnt, "-v", "-H"))
    return ["bash", "-c", f"set -o pipefail; {{ {compile_} 2>&1 && "
            f"for p in {trace}; do LD_LIBRARY_PATH='{mnt}/usr/lib/x86_64-linux-gnu' "
            f"LD_TRACE_LOADED_OBJECTS=1 $p; done; }} | awk '/^\\.+ / {{ print $2 }} "
            f"/^ [^ ]*\\/(cc1|as) / {{ print $1 }} /^\\t({libs}) => / {{ print $3 }}' "
            f"| {{ grep -v '^{mnt}/' || true; }}"]


def c_library_headers() -> list:
    """The headers of Debian's C library and kernel headers packages."""
    out = subprocess.run(["dpkg", "-L", "libc6-dev", "linux-libc-dev"], check=True,
                         capture_output=True, text=True).stdout.split()
    return sorted(f for f in set(out) if f.startswith("/usr/include/")
                  and (os.path.islink(f) or os.path.isfile(f)))


WORKLOADS = [
    Workload("python", f"Python 3.11 starts from the mount and imports {len(PYTHON_MODULES)} "
             "standard modules",
             (("/usr/bin/python3.11", "bin/python3"), ("/usr/lib/python3.11", "lib/python3.11")),
             lambda m: python_argv(m, "import " + ", ".join(PYTHON_MODULES)),
             lambda m: python_argv(m, "import sys, " + ", ".join(PYTHON_MODULES) + "\n"
                                   + modules_outside(m))),
    Workload("pip", "pip lists the installed packages (about 630 modules imported)",
             (("/usr/bin/python3.11", "bin/python3"), ("/usr/lib/python3.11", "lib/python3.11"),
              ("/usr/lib/python3/dist-packages", "lib/python3/dist-packages")),
             lambda m: python_argv(m, PIP_LIST),
             lambda m: python_argv(m, "import contextlib, io\n"
                                   "with contextlib.redirect_stdout(io.StringIO()):\n"
                                   + "".join("    " + line + "\n"
                                             for line in PIP_LIST.splitlines()) +
                                   modules_outside(m))),
    Workload("perl", f"perl loads {len(PERL_MODULES)} modules from the mount",
             (("/usr/share/perl", "share/perl"),
              ("/usr/lib/x86_64-linux-gnu/perl", "lib/perl"),
              ("/usr/lib/x86_64-linux-gnu/perl-base", "lib/perl-base")),
             lambda m: perl_argv(m, ""),
             lambda m: perl_argv(m, f"print qq($_\\n) for grep {{ index($_, '{m}/') }} "
                                 "values %INC;")),
    Workload("gcc", "gcc 12 compiles a small C file from the mount",
             (("/usr/bin/x86_64-linux-gnu-gcc-12", "usr/bin/gcc"), (f"{GCC}/cc1", f"{GCC[1:]}/cc1"),
              (f"{GCC}/include", f"{GCC[1:]}/include"),
              ("/usr/bin/x86_64-linux-gnu-as", "usr/x86_64-linux-gnu/bin/as"),
              *((os.path.realpath(f"/usr/lib/x86_64-linux-gnu/{n}"),
                 f"usr/lib/x86_64-linux-gnu/{n}") for n in GCC_LIBS)),
             lambda m: gcc_argv(m), gcc_strays, c_library_headers,
             (("src/hello.c", GCC_SOURCE),)),
]


@dataclasses.dataclass
class Variant:
    """One way to pack a tree and mount the image."""

    id: str
    label: str
    needs: tuple  # programs that must exist ("hoard", DwarFS's tools, others on PATH)
    build: object = None  # (find, tree, image, hot_list) -> argv
    mount: object = None  # (find, image, mnt) -> argv
    kernel: bool = False  # a loop mount of the kernel's own driver
    image_of: str | None = None  # mounts that variant's image instead of building one
    hot_list: str | None = None  # its build needs the files a run opened, recorded by
    # the driver of this variant on its image
    why_not: str | None = None  # set when it cannot run here
    bundle: bool = False  # the image is a bundle, run rather than mounted
    floor: bool = False  # no image: the tree copied to memory (tmpfs), run there
    extra: bool = False  # run only when --variants names it


# The hot blocks' compression of the `hoard-hot-zstd` variant.
HOT_ZSTD = os.environ.get("HOARD_HOT_ZSTD", "zstd:level=19")


def selected(vs: list, ids: list | None) -> list:
    """The variants `ids` names (every one not `extra` when None), with
    those whose images they need, in table order."""
    want = {v.id for v in vs if (v.id in ids if ids else not v.extra)}
    for v in reversed(vs):
        if v.id in want:
            want |= {d for d in (v.image_of, v.hot_list) if d}
    return [v for v in vs if v.id in want]


def hoard_mount(find) -> list:
    """How hoard images are mounted: `hoard-mount` (the driver alone, a
    quarter of `hoard`'s size, so a cold mount pages in less) when it lies
    beside `hoard`, else `hoard mount`."""
    small = os.path.join(os.path.dirname(find("hoard")), "hoard-mount")
    return [small] if os.access(small, os.X_OK) else [find("hoard"), "mount"]


def variants() -> list:
    """Every variant, in table order."""
    loop = lambda fs: lambda f, i, m: ["mount", "-t", fs, "-o", "loop,ro", i, m]  # noqa: E731
    return [
        Variant("hoard", "hoard", ("hoard",),
                lambda f, t, i, h: [f("hoard"), "create", "-i", t, "-o", i, "--no-progress"],
                lambda f, i, m: hoard_mount(f) + [i, m]),
        Variant("hoard-hot", "hoard, hot-ordered + preload", ("hoard",),
                lambda f, t, i, h: [f("hoard"), "create", "-i", t, "-o", i, "--no-progress",
                                    "-l9", "--categorize=hotness", f"--hotness-list={h}"],
                lambda f, i, m: hoard_mount(f) + [i, m, "-o", "preload_category=hotness"],
                hot_list="hoard"),
        Variant("hoard-hot-zstd", "hoard, hot-ordered (zstd) + preload", ("hoard",),
                lambda f, t, i, h: [f("hoard"), "create", "-i", t, "-o", i, "--no-progress",
                                    "-l9", "--categorize=hotness", f"--hotness-list={h}",
                                    "-C", f"hotness::{HOT_ZSTD}"],
                lambda f, i, m: hoard_mount(f) + [i, m, "-o", "preload_category=hotness"],
                hot_list="hoard", extra=True),
        Variant("bundle", "hoard bundle, hot-ordered", ("hoard",),
                lambda f, t, i, h: [f("hoard"), "bundle", "-i", t, "-o", i, "--entry",
                                    BUNDLE_ENTRY, "--no-progress", "-l9",
                                    "--categorize=hotness", f"--hotness-list={h}"],
                hot_list="hoard", bundle=True),
        Variant("dwarfs", "DwarFS", ("mkdwarfs", "dwarfs"),
                lambda f, t, i, h: [f("mkdwarfs"), "-i", t, "-o", i, "--no-progress"],
                lambda f, i, m: [f("dwarfs"), i, m]),
        Variant("dwarfs-hot", "DwarFS, hotness + preload", ("mkdwarfs", "dwarfs"),
                lambda f, t, i, h: [f("mkdwarfs"), "-i", t, "-o", i, "--no-progress",
                                    "--categorize=hotness", f"--hotness-list={h}",
                                    f"--order=hotness::explicit:file={h}"],
                lambda f, i, m: [f("dwarfs"), i, m, "-o", "preload_category=hotness"],
                hot_list="dwarfs"),
        Variant("erofs", "kernel EROFS (lz4hc)", ("mkfs.erofs", "mount"),
                lambda f, t, i, h: ["mkfs.erofs", "-zlz4hc", i, t], loop("erofs"), kernel=True),
        Variant("squashfs", "kernel SquashFS (zstd)", ("mksquashfs", "mount"),
                lambda f, t, i, h: ["mksquashfs", t, i, "-comp", "zstd", "-noappend",
                                    "-quiet", "-no-progress"],
                loop("squashfs"), kernel=True),
        Variant("squashfuse", "squashfuse (same image)", ("squashfuse",),
                mount=lambda f, i, m: ["squashfuse", i, m], image_of="squashfs"),
        Variant("floor", "floor: the tree in tmpfs, no image", (), floor=True),
    ]


class Bench:
    """The scratch directory, the programs and the command log of one
    invocation."""

    def __init__(self, work: str, programs: tools.Programs, log, shm: str):
        self.work = work
        self.shm = shm  # in memory (tmpfs): the floor's copies of the trees
        self.programs = programs
        self.mnt = os.path.join(work, "mnt")
        os.mkdir(self.mnt)
        self.log = log

    def find(self, name: str) -> str:
        """The path of program `name` (looked up by `tools.Programs`)."""
        return self.programs.find(name)

    def run(self, argv: list, timeout: float = 600) -> float:
        """Runs `argv` to its end, output to the log; its wall seconds.
        Raises RuntimeError when it fails."""
        s = measure.run([argv], log=self.log, timeout=timeout)
        if not s.ok:
            raise RuntimeError(f"{os.path.basename(argv[0])} failed (exit {s.rc}); "
                               f"see {self.log.name}")
        return s.wall

    @contextlib.contextmanager
    def mounted(self, v: Variant, image: str, extra: tuple = ()):
        """`image` mounted by `v` at self.mnt, until the `with` block ends;
        yields the FUSE driver's pid (None for the kernel)."""
        argv = v.mount(self.find, image, self.mnt) + list(extra)
        pid = None
        try:
            self.run(argv, timeout=60)
            mounts._wait_mounted(self.mnt, time.perf_counter() + 60)
            if not v.kernel:
                pid = mounts.daemon_pid(self.mnt, os.path.basename(argv[0]))
            yield pid
        finally:
            mounts.unmount(self.mnt, v.kernel, pid, self.log)


def copy_tree(w: Workload, tree: str) -> None:
    """Copies the workload's sources into `tree` (modes and times kept, so
    the interpreters' byte-code caches stay valid), and the bundle's entry."""
    for src, dest in w.sources:
        dest = os.path.join(tree, dest)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        subprocess.run(["cp", "-a", src, dest], check=True)
    for src in w.files() if w.files else ():
        dest = os.path.join(tree, src.lstrip("/"))
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copy2(src, dest, follow_symlinks=False)
    for path, text in w.texts:
        path = os.path.join(tree, path)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    entry = os.path.join(tree, BUNDLE_ENTRY)
    with open(entry, "w") as f:
        f.write(bundle_entry(w))
    os.chmod(entry, 0o755)


BUNDLE_ENTRY = "bundle-entry"
_DIR = "@BUNDLE_DIR@"  # stands for the bundle's mount in the commands


def bundle_entry(w: Workload) -> str:
    """The bundle's entry: `run` starts the workload, `strays` its check,
    on the bundle's own mount."""
    def sh(argv: list) -> str:
        quoted = ("'" + a.replace("'", "'\"'\"'") + "'" for a in argv)
        return " ".join(q.replace(_DIR, "'\"$HOARD_BUNDLE_DIR\"'") for q in quoted)
    return (f"#!/bin/sh\ncase $1 in\n  run) exec {sh(w.command(_DIR))} ;;\n"
            f"  strays) exec {sh(w.strays(_DIR))} ;;\nesac\nexit 2\n")


def probe(vs: list, programs: tools.Programs) -> None:
    """Sets `why_not` on the variants whose programs are missing."""
    for v in vs:
        missing = [n for n in v.needs if not programs.find(n)]
        if missing and not v.why_not:
            v.why_not = "; ".join(f"{n}: {programs.why.get(n, 'not found')}" for n in missing)


def record_hot_list(b: Bench, w: Workload, recorder: Variant, image: str, out: str) -> None:
    """Writes to `out` the files `w` opens, recorded by `recorder`'s driver
    (`-o analysis_file`) during a warm run on `image`."""
    with b.mounted(recorder, image, ("-o", f"analysis_file={out}")):
        b.run(w.command(b.mnt))
    if not os.path.getsize(out):
        raise RuntimeError(f"{recorder.label} recorded no file")


def with_entry(hot_list: str) -> str:
    """A copy of `hot_list` with the bundle's entry first: a bundle opens
    it before the app (a run through the bundle's own mount records it so
    too); left out, it would be read from the cold blocks."""
    path = hot_list + ".bundle"
    with open(hot_list) as f, open(path, "w") as out:
        out.write(BUNDLE_ENTRY + "\n" + f.read())
    return path


def build_images(b: Bench, w: Workload, vs: list) -> dict:
    """Packs the workload's tree with every variant that can run; returns
    variant id -> image path. A variant that fails gets its `why_not`."""
    tree = os.path.join(b.work, w.id, "tree")
    copy_tree(w, tree)
    images = {}
    for v in vs:
        if v.why_not:
            continue
        if v.image_of or v.hot_list:
            base = v.image_of or v.hot_list
            if base not in images:
                v.why_not = f"needs the {base} image, which is missing"
                continue
        if v.image_of:
            images[v.id] = images[v.image_of]
            continue
        if v.floor:
            images[v.id] = os.path.join(b.shm, w.id)
            shutil.copytree(tree, images[v.id], symlinks=True)
            continue
        image = os.path.join(b.work, w.id, v.id + ".img")
        hot_list = None
        try:
            if v.hot_list:
                recorder = next(d for d in vs if d.id == v.hot_list)
                hot_list = os.path.join(b.work, w.id, f"hot-files-{recorder.id}.txt")
                record_hot_list(b, w, recorder, images[recorder.id], hot_list)
                if v.bundle:
                    hot_list = with_entry(hot_list)
            b.run(v.build(b.find, tree, image, hot_list))
            images[v.id] = image
        except RuntimeError as e:
            v.why_not = f"failed: {e}"
    shutil.rmtree(tree)
    return images


def check_strays(b: Bench, w: Workload, v: Variant, image: str) -> None:
    """A warm run that fails when the app loaded anything from outside the mount."""
    if v.bundle:
        r = subprocess.run([image, "strays"], capture_output=True, text=True, timeout=120)
    elif v.floor:
        r = subprocess.run(w.strays(image), capture_output=True, text=True, timeout=120)
    else:
        with b.mounted(v, image):
            r = subprocess.run(w.strays(b.mnt), capture_output=True, text=True, timeout=120)
    if r.returncode != 0 or r.stdout.strip():
        raise RuntimeError(f"{w.id} on {v.id}: exit {r.returncode}, loaded from elsewhere: "
                           f"{(r.stdout + r.stderr).split()[:3]}")


def cold_run(b: Bench, w: Workload, v: Variant, image: str) -> dict:
    """One cold start: mount and workload timed from a dropped page cache."""
    measure.drop_caches()
    start = time.perf_counter()
    if v.bundle or v.floor:
        b.run([image, "run"] if v.bundle else w.command(image), timeout=120)
        end = time.perf_counter()
        return {"mount": None, "app": end - start, "total": end - start, "rss": None}
    with b.mounted(v, image) as pid:
        mounted = time.perf_counter()
        b.run(w.command(b.mnt), timeout=120)
        end = time.perf_counter()
        rss = measure.proc_peak_rss_kib(pid) if pid else None
    return {"mount": mounted - start, "app": end - mounted, "total": end - start, "rss": rss}


def bench_workload(b: Bench, w: Workload, vs: list, runs: int) -> tuple:
    """Builds, checks and times one workload; (images, samples per variant id)."""
    images = build_images(b, w, vs)
    for v in vs:
        if v.id in images:
            try:
                check_strays(b, w, v, images[v.id])
            except RuntimeError as e:
                v.why_not = str(e)
                del images[v.id]
    live = [v for v in vs if v.id in images]
    samples = {v.id: [] for v in live}
    for r in range(runs):
        for v in measure.round_robin(live, r):
            samples[v.id].append(cold_run(b, w, v, images[v.id]))
    return images, samples


def table(w: Workload, vs: list, images: dict, samples: dict, runs: int) -> str:
    """The Markdown table of one workload, skipped variants named below it."""
    med = {k: {f: statistics.median([s[f] for s in got if s[f] is not None] or [0])
               for f in ("mount", "app", "total")} for k, got in samples.items()}
    ref = med.get(REFERENCE, {}).get("total")
    lines = [f"### {w.title}", "",
             f"Median of {runs} cold runs (page cache dropped, mount included).", "",
             "| variant | image | mount | workload | total | vs kernel EROFS | driver peak memory |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for v in vs:
        if v.id not in samples:
            continue
        m = med[v.id]
        ratio = f"{m['total'] / ref:.2f}x" if ref else "–"
        rss = [s["rss"] for s in samples[v.id] if s["rss"]]
        memory = (f"{statistics.median(rss) / 1024:.0f} MiB" if rss
                  else "– (kernel)" if v.kernel else "–")
        mount = ("in the run" if v.bundle else "none" if v.floor
                 else f"{m['mount'] * 1e3:.0f} ms")
        size = "–" if v.floor else f"{os.path.getsize(images[v.id]) / 1e6:.1f} MB"
        lines.append(f"| {v.label} | {size} "
                     f"| {mount} | {m['app']:.3f} s | {m['total']:.3f} s "
                     f"| {ratio} | {memory} |")
    skipped = [f"- {v.label}: {v.why_not}" for v in vs if v.why_not]
    if skipped:
        lines += ["", "Not run:", *skipped]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--workloads", nargs="+", choices=[w.id for w in WORKLOADS],
                    default=[w.id for w in WORKLOADS])
    ap.add_argument("--variants", nargs="+", choices=[v.id for v in variants()],
                    help="the variants to run (and those whose images they need); "
                    "default: all but the extra one (hoard-hot-zstd)")
    ap.add_argument("--hoard", default=os.path.join(
        os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target")), "release", "hoard"))
    ap.add_argument("--work", default="/var/tmp",
                    help="where images are built, in a temporary directory, and where "
                    "hoard-cold-start.log (every command's output) goes; a disk, not tmpfs")
    a = ap.parse_args()
    if not measure.can_drop_caches():
        sys.exit("cold_start.py: run it as root (it drops the page cache and loop-mounts)")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # unwinds through the unmounts
    deps.install(lambda msg: print(msg, file=sys.stderr))
    dwarfs_bin = tools.dwarfs_dir(REPO)
    deps.setup_dwarfs(dwarfs_bin, lambda msg: print(msg, file=sys.stderr))
    programs = tools.Programs(os.path.abspath(a.hoard), dwarfs_bin)
    log_path = os.path.join(a.work, "hoard-cold-start.log")
    with (tempfile.TemporaryDirectory(prefix="hoard-cold-start-", dir=a.work) as work,
          tempfile.TemporaryDirectory(prefix="hoard-cold-start-", dir="/dev/shm") as shm,
          open(log_path, "wb") as log):
        b = Bench(work, programs, log, shm)
        for w in WORKLOADS:
            if w.id not in a.workloads:
                continue
            vs = selected(variants(), a.variants)
            probe(vs, programs)
            images, samples = bench_workload(b, w, vs, a.runs)
            print(table(w, vs, images, samples, a.runs) + "\n", flush=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # the mounts are gone by now (every one in a `with`)
        sys.exit(130)
