#!/usr/bin/env python3
"""hoard's benchmark suite, in one command.

    bench/run.py [--quick] [--corpus NAME...] [--tools ID|FAMILY,...] [--runs N]

Builds (once, cached) the corpora, packs each with hoard and the tools users
would use instead, mounts the images and reads them, extracts them, and
writes a Markdown report, the raw JSON and SVG charts to doc/bench/
(doc/bench/quick/ for --quick). Every figure is the median of --runs runs;
the runs of competing tools alternate. See bench/README.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shlex
import shutil
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import corpora  # noqa: E402
import deps  # noqa: E402
import machine  # noqa: E402
import measure  # noqa: E402
import mounts  # noqa: E402
import report  # noqa: E402
import tools  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PHASES = ("build", "mount", "extract")
T0 = time.monotonic()
EPILOG = """tool ids (or a family: hoard, dwarfs, squashfs, erofs or tar, for all of its kind):
  builders:   hoard-l1 hoard-l7 hoard-l9 hoard-l7-recovery5
              mkdwarfs-l1 mkdwarfs-l7 mkdwarfs-l9
              squashfs-zstd22 squashfs-xz erofs-lz4hc erofs-lzma tar-zstd19
  mounts:     hoard-mount dwarfs squashfuse squashfuse_ll erofsfuse
              squashfs-kernel erofs-kernel
  extractors: hoard-extract dwarfsextract unsquashfs fsck.erofs tar-x"""


def log(msg: str) -> None:
    t = time.monotonic() - T0
    print(f"[{int(t // 60):3d}:{int(t % 60):02d}] {msg}", flush=True)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=EPILOG)
    p.add_argument("--quick", action="store_true",
                   help="small corpora, one run (minutes, not hours)")
    p.add_argument("--corpus", nargs="+", choices=corpora.NAMES, default=list(corpora.NAMES),
                   help="corpora to run (default: all)")
    p.add_argument("--rootfs-size", default=None, metavar="SIZE",
                   help="bytes of /usr the rootfs corpus takes, e.g. 64M or 2G (default 1536M; "
                   "quick 100M); the report goes to doc/bench/quick unless --out")
    p.add_argument("--many-files", type=int, default=None, metavar="N",
                   help="files in the manyfiles corpus (default 500000; quick 50000); "
                   "the report goes to doc/bench/quick unless --out")
    p.add_argument("--tools", default=None,
                   help="comma-separated ids or families to run (default: all found)")
    p.add_argument("--phases", default=",".join(PHASES),
                   help="comma-separated subset of build,mount,extract; without build, the "
                   "images mount and extract need are built once, unmeasured, and the "
                   "report keeps the earlier run's figures of the phases not run")
    p.add_argument("--runs", type=int, default=None, help="runs per figure (default 3; quick 1)")
    p.add_argument("--threads", type=int, default=os.cpu_count(),
                   help="threads for the tools that take a count (default: all cores)")
    p.add_argument("--out", default=None,
                   help="report directory (default doc/bench, or doc/bench/quick with --quick)")
    p.add_argument("--hoard", default=None, help="use this hoard binary (no cargo build)")
    p.add_argument("--no-build", action="store_true",
                   help="use target/release/hoard as it is (no cargo build)")
    p.add_argument("--dwarfs-bin", default=None, metavar="DIR",
                   help="directory of DwarFS's mkdwarfs, dwarfs and dwarfsextract (default "
                   "$DWARFS_BIN, else ../shared/anchors/dwarfs-0.15.3/bin beside the checkout)")
    p.add_argument("--no-install", action="store_true",
                   help="do not apt-get install anything (nor run DwarFS's setup.sh)")
    p.add_argument("--timeout", type=int, default=None,
                   help="seconds before one command is killed (default 3600; quick 600)")
    p.add_argument("--keep", action="store_true", help="keep the scratch directory (images)")
    p.add_argument("--repo", default=REPO, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    a.runs = a.runs or (1 if a.quick else 3)
    a.timeout = a.timeout or (600 if a.quick else 3600)
    a.tools = [t for t in (a.tools or "").split(",") if t] or None
    a.phases = [x for x in a.phases.split(",") if x]
    bad = set(a.phases) - set(PHASES)
    if bad:
        p.error(f"unknown phase: {', '.join(sorted(bad))}")
    try:
        a.sizes = {"rootfs": corpora.parse_size(a.rootfs_size) if a.rootfs_size else None,
                   "manyfiles": a.many_files}
    except ValueError as e:
        p.error(str(e))
    if a.many_files is not None and a.many_files < 1:
        p.error("--many-files must be at least 1")
    sized = any(v is not None for v in a.sizes.values())
    if a.out is None:
        a.out = os.path.join(a.repo, "doc", "bench", "quick" if a.quick or sized else "")
    a.dwarfs_bin = os.path.abspath(a.dwarfs_bin) if a.dwarfs_bin else tools.dwarfs_dir(a.repo)
    return a


class Suite:
    """One run of the suite: the settings, the tools found, the results."""

    def __init__(self, args, hoard: str | None, scratch: str, logs: str):
        self.args = args
        self.scratch = scratch
        self.logs = logs  # each command's stderr, kept after the run
        self.programs = tools.Programs(hoard, args.dwarfs_bin)
        self.extractors = tools.select(tools.extractors(self.programs), args.tools)
        self.drivers = tools.select(mounts.drivers(hoard), args.tools)
        self.builders = tools.builders(self.programs)
        if "build" in args.phases:
            self.builders = tools.select(self.builders, args.tools)
        else:  # only what the measured phases read
            consumers = ((self.drivers if "mount" in args.phases else [])
                         + (self.extractors if "extract" in args.phases else []))
            needed = {i for c in consumers for i in c.image_of}
            self.builders = [b for b in self.builders if b.id in needed]
        tools.probe(self.builders + self.extractors, self.programs)
        mounts.probe(self.drivers, self.programs)
        cold = "drop_caches" if measure.can_drop_caches() else "fresh mount only"
        q = args.quick
        self.settings = {
            "runs": args.runs, "threads": args.threads, "timeout": args.timeout,
            "cold": cold, "fio": bool(self.programs.find("fio")),
            # Bytes each fio job reads. Quick 4k runs of 16 MiB
            # lasted 40-100 ms and moved by a third between runs; 64 MiB
            # last about a quarter second.
            "fio_io_size": {"4k": (64 if q else 128) << 20, "64k": (256 if q else 1024) << 20},
            "fio_direct": True,
            "builds_start": "corpus in the page cache (read once before the builds)",
            "dwarfs_bin": args.dwarfs_bin,
        }
        os.makedirs(self.logs, exist_ok=True)

    def unavailable(self) -> dict:
        return {t.id: t.why_not for t in self.builders + self.extractors + self.drivers
                if t.why_not}

    def _logfile(self, *parts):
        return open(os.path.join(self.logs, "-".join(parts) + ".log"), "ab")

    # ------------------------------------------------------------ build

    def build_phase(self, corpus, runs: int) -> tuple[dict, dict]:
        """Packs the corpus with every builder, round-robin over `runs` runs.
        Returns the results and {builder id: image path} of those that worked."""
        res = {b.id: {"label": b.label, "family": b.family, "samples": [], "error": None,
                      "skipped": b.why_not,
                      "command": " | ".join(shlex.join(c) for c in
                                            b.argv("SRC", "IMAGE", self.args.threads))}
               for b in self.builders}
        active = [b for b in self.builders if not b.why_not]
        images = {}
        if not active:
            return res, images
        img_dir = os.path.join(self.scratch, "images", corpus.name)
        os.makedirs(img_dir, exist_ok=True)
        warm = measure.run([["tar", "cf", "-", "-C", corpus.tree, "."], ["wc", "-c"]])
        log(f"  corpus read into the page cache in {warm.wall:.1f} s")
        for run in range(runs):
            for b in measure.round_robin(active, run):
                if res[b.id]["error"]:
                    continue
                out = os.path.join(img_dir, b.id + ".img")
                tmp = out + ".new"
                if os.path.exists(tmp):
                    os.remove(tmp)
                os.sync()  # the previous tool's writes are not this one's cost
                with self._logfile(corpus.name, "build", b.id, str(run)) as lf:
                    s = measure.run(b.argv(corpus.tree, tmp, self.args.threads), log=lf,
                                    timeout=self.args.timeout)
                if not s.ok or not os.path.exists(tmp):
                    why = "timed out" if s.timed_out else f"exit {s.rc}"
                    res[b.id]["error"] = f"{why}; see {lf.name}: {_tail(lf.name)}"
                    log(f"  {b.id}: FAILED ({why})")
                    continue
                size = os.path.getsize(tmp)
                os.replace(tmp, out)
                images[b.id] = out
                res[b.id]["samples"].append({**s.as_dict(), "size": size})
                log(f"  run {run + 1}/{runs} {b.id:16} {size / 2**20:9.2f} MiB "
                    f"{s.wall:8.2f} s wall {s.cpu:8.2f} s cpu {s.rss_kib / 1024:7.0f} MiB rss")
        return res, images

    # ------------------------------------------------------------ mount

    def mount_phase(self, corpus, images: dict) -> dict:
        """Mounts the images with every driver, round-robin over the runs."""
        res, active = {}, []
        for d in self.drivers:
            image = next((i for i in d.image_of if i in images), None)
            why = d.why_not or (None if image else f"no image ({' or '.join(d.image_of)})")
            res[d.id] = {"label": d.label, "family": d.family, "image": image,
                         "samples": [], "error": None, "skipped": why, "notes": []}
            if not why:
                active.append((d, image))
        if not active:
            return res
        mnt = os.path.join(self.scratch, "mnt")
        os.makedirs(mnt, exist_ok=True)
        fio_files = mounts.pick_fio_files(corpus.tree, max(self.settings["fio_io_size"].values()))
        for run in range(self.args.runs):
            for d, image in measure.round_robin(active, run):
                r = res[d.id]
                if r["error"]:
                    continue
                program = self.programs.find("hoard" if d.family == "hoard" else d.program)
                with self._logfile(corpus.name, "mount", d.id, str(run)) as lf:
                    try:
                        m = mounts.measure_round(d, program, images[image], mnt, corpus,
                                                 fio_files, self.settings, lf)
                    except mounts.MountError as e:
                        r["error"] = f"{e}; see {lf.name}: {_tail(lf.name)}"
                        log(f"  {d.id}: FAILED ({e})")
                        continue
                for n in m.pop("notes"):
                    if n not in r["notes"]:
                        r["notes"].append(n)
                r["samples"].append(m)
                log(f"  run {run + 1}/{self.args.runs} {d.id:16} "
                    f"mount {m['mount_s'] * 1000:6.0f} ms"
                    f"  find {m['find_s']:6.2f} s  cold {m['cold_read_s']:6.2f} s"
                    f"  warm {m['warm_read_s']:6.2f} s"
                    + (f"  4k {m['fio_4k_iops']:8.0f} IOPS" if "fio_4k_iops" in m else "")
                    + (f"  64k {m['fio_64k_mibs']:7.1f} MiB/s" if "fio_64k_mibs" in m else ""))
        return res

    # ------------------------------------------------------------ extract

    def extract_phase(self, corpus, images: dict) -> dict:
        """Unpacks the images with every extractor, round-robin over the runs."""
        res, active = {}, []
        for e in self.extractors:
            image = next((i for i in e.image_of if i in images), None)
            why = e.why_not or (None if image else f"no image ({' or '.join(e.image_of)})")
            res[e.id] = {"label": e.label, "family": e.family, "image": image, "samples": [],
                         "error": None, "skipped": why, "notes": [],
                         "command": " | ".join(shlex.join(c) for c in
                                               e.argv("IMAGE", "DIR", self.args.threads))}
            if not why:
                active.append((e, image))
        dest = os.path.join(self.scratch, "extract")
        for run in range(self.args.runs):
            for e, image in measure.round_robin(active, run):
                r = res[e.id]
                if r["error"]:
                    continue
                shutil.rmtree(dest, ignore_errors=True)
                if not e.makes_dest:
                    os.makedirs(dest)
                if self.settings["cold"] == "drop_caches":
                    measure.drop_caches()
                else:
                    os.sync()
                with self._logfile(corpus.name, "extract", e.id, str(run)) as lf:
                    s = measure.run(e.argv(images[image], dest, self.args.threads), log=lf,
                                    timeout=self.args.timeout)
                if not s.ok:
                    why = "timed out" if s.timed_out else f"exit {s.rc}"
                    r["error"] = f"{why}; see {lf.name}: {_tail(lf.name)}"
                    log(f"  {e.id}: FAILED ({why})")
                    continue
                got = corpora.tree_stats(dest)
                for key in ("files", "dirs", "symlinks", "bytes_all_names", "hardlinks"):
                    if got[key] != corpus.stats[key]:
                        note = f"{key}: {got[key]} extracted, {corpus.stats[key]} in the corpus"
                        if note not in r["notes"]:
                            r["notes"].append(note)
                r["samples"].append(s.as_dict())
                log(f"  run {run + 1}/{self.args.runs} {e.id:16} {s.wall:8.2f} s wall "
                    f"{s.cpu:8.2f} s cpu {s.rss_kib / 1024:7.0f} MiB rss")
        shutil.rmtree(dest, ignore_errors=True)
        return res


def _tail(path: str, n: int = 300) -> str:
    """What a failed command's log says: its error and warning lines if it
    has any, else its last `n` characters."""
    try:
        with open(path, "rb") as f:
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    lines = [line.strip() for line in text.splitlines()
             if any(w in line.lower() for w in ("error", "warning", "fail", "cannot", "panic"))]
    if lines:
        return " / ".join(lines[:3])[:n]
    return text.strip()[-n:].replace("\n", " / ")


def _hoard_binary(args, scratch: str) -> str | None:
    """hoard's binary, copied into the scratch directory so that a rebuild
    during the run does not change what is measured."""
    if args.hoard:
        src = args.hoard
    elif args.no_build:
        src = os.path.join(args.repo, "target", "release", "hoard")
    else:
        src = deps.build_hoard(args.repo, log)
    if not src or not os.access(src, os.X_OK):
        log(f"no hoard binary ({src or 'build failed'}): hoard's runs are skipped")
        return None
    dst = os.path.join(scratch, "bin", "hoard")
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    shutil.copy2(src, dst)
    return dst


def main(argv=None) -> int:
    args = parse_args(argv)
    cache = corpora.cache_dir()
    scratch_root = os.path.join(cache, "scratch")
    os.makedirs(scratch_root, exist_ok=True)
    mounts.cleanup_stale(scratch_root, log)
    scratch = os.path.join(scratch_root, f"run-{os.getpid()}")
    os.makedirs(scratch, exist_ok=True)
    # SIGTERM and SIGHUP unwind like Ctrl-C, through the finally below.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.default_int_handler)
    started = datetime.datetime.now(datetime.timezone.utc)
    results = {"suite": "hoard-bench", "format": 1, "quick": args.quick,
               "command": "bench/run.py " + shlex.join(sys.argv[1:] if argv is None else argv),
               "started": started.isoformat(timespec="seconds"), "corpora": {}}
    try:
        if not args.no_install:
            deps.install(log)
            deps.setup_dwarfs(args.dwarfs_bin, log)
        hoard = _hoard_binary(args, scratch)
        logs = os.path.join(cache, "logs", started.strftime("%Y%m%d-%H%M%S"))
        suite = Suite(args, hoard, scratch, logs)
        suite.settings["hoard_binary"] = (
            f"given: {args.hoard}" if args.hoard else
            f"{os.path.join(args.repo, 'target', 'release', 'hoard')} as found (--no-build)"
            if args.no_build else "built by this run from the work tree")
        results["logs"] = logs
        results["machine"] = machine.describe(cache, args.repo)
        results["settings"] = suite.settings
        results["unavailable"] = suite.unavailable()
        results["versions"] = {n: tools.version(suite.programs, n) for n in
                               ("hoard", "mkdwarfs", "dwarfs", "dwarfsextract", "mksquashfs",
                                "mkfs.erofs", "squashfuse", "erofsfuse", "zstd", "tar", "fio")}
        for tid, why in results["unavailable"].items():
            log(f"skipping {tid}: {why}")
        for name in args.corpus:
            corpus = corpora.prepare(name, args.quick, cache, log, size=args.sizes.get(name))
            log(f"== {corpus.label}: {corpus.stats['bytes'] / 2**20:.0f} MiB, "
                f"{corpus.stats['entries']} entries")
            made = {"command": results["command"],
                    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
                        timespec="seconds"),
                    "hoard_commit": results["machine"]["hoard_commit"]}
            c = results["corpora"][name] = {
                "label": corpus.label, "stats": corpus.stats, "recipe": corpus.recipe,
                **made, "phases": {p: made for p in args.phases}}
            if "build" in args.phases:
                c["build"], images = suite.build_phase(corpus, args.runs)
            else:
                log(f"== {corpus.label}: images for {', '.join(args.phases)} (built once, "
                    "not measured)")
                _, images = suite.build_phase(corpus, 1)
            if "mount" in args.phases:
                log(f"== {corpus.label}: mounts")
                c["mount"] = suite.mount_phase(corpus, images)
            if "extract" in args.phases:
                log(f"== {corpus.label}: extraction")
                c["extract"] = suite.extract_phase(corpus, images)
            if not args.keep:
                shutil.rmtree(os.path.join(scratch, "images", name), ignore_errors=True)
            _save_partial(results, cache)
    except KeyboardInterrupt:
        log("interrupted: cleaning up, writing what was measured")
        results["interrupted"] = True
    finally:
        for point in mounts.mounted_under(scratch):  # only if something went wrong
            log(f"unmounting {point}")
            mounts.unmount(point, False, None, None)
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
        else:
            log(f"scratch kept in {scratch}")
    results["finished"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    if results.get("interrupted"):
        _save_partial(results, cache)
        log(f"no report written; what was measured is in {cache}/results.partial.json")
        return 1
    if results["corpora"]:
        kept = report.merge_previous(results, args.out)
        if kept:
            log(f"kept the earlier results of {'; '.join(kept)} from {args.out}")
        log(f"report: {report.write(results, args.out)}")
    return 0


def _save_partial(results: dict, cache: str) -> None:
    """The results so far, in case the run is cut short."""
    with open(os.path.join(cache, "results.partial.json"), "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
