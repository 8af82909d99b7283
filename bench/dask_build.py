"""One image of a tree built on one machine (`hoard create`) and with
`hoard.distributed.create` on a dask.distributed LocalCluster of two
worker processes, for each number of shards and way of cutting the tree
(`--by`: `similarity`, the versions of a file in one shard, or `path`);
with `--by-hand`, also the shards of the largest count built one by one
with `hoard create --input-list` then joined with `hoard merge --union`.
Prints wall times, peak memory (the single build's, each Dask worker's,
the largest shard's and the merge's) and image sizes against the single
build.

    python3 bench/dask_build.py --hoard target/release/hoard \\
        --tree ~/.cache/hoard-bench/corpora/versions --shards 1,2,4,8 --by similarity,path
    python3 bench/dask_build.py --hoard target/release/hoard --files 2000000 --by-hand

(`--files N`: a generated tree of N tiny files, 1,000 a directory, every
other directory the same contents, as test_distributed.py's, removed
after.)

Needs the `hoard` Python package and dask[distributed]."""

import argparse
import os
import resource
import shutil
import subprocess
import tempfile
import time

import hoard.distributed
from dask.distributed import Client, LocalCluster


def run(cmd):
    """Runs `cmd`; returns (seconds, CPU seconds, peak RSS in MiB of the
    child)."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    if status != 0:
        raise SystemExit(f"{cmd[:2]} failed")
    return (time.monotonic() - start, usage.ru_utime + usage.ru_stime,
            usage.ru_maxrss / 1024)


def tiny_files(root, count, per_dir=1000):
    """`count` files of 2 to 8 bytes below `root`, `per_dir` a directory;
    odd directories hold the same contents."""
    for d in range((count + per_dir - 1) // per_dir):
        sub = os.path.join(root, f"d{d:05}")
        os.makedirs(sub)
        for i in range(min(per_dir, count - d * per_dir)):
            with open(os.path.join(sub, f"f{i:04}"), "wb") as f:
                f.write(b"%d\n" % (i if d % 2 else d * per_dir + i))


def show(row):
    """Prints a row of the table as soon as it is measured."""
    print(row, flush=True)


def cpu_seconds():
    """The CPU time this process has used (user and system)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def by_hand(a, work, by, shards):
    """The shards built one after the other, then merged: (seconds of the
    shards, of the merge, largest shard's and merge's peak MiB, image)."""
    parts, t_parts, m_parts = [], 0.0, 0.0
    for i, paths in enumerate(hoard.distributed.plan(a.tree, shards, by)):
        listing = os.path.join(work, f"{i}.list")
        with open(listing, "wb") as f:
            f.write(b"".join(p + b"\n" for p in paths))
        part = os.path.join(work, f"part{i}.dwarfs")
        t, _, m = run([a.hoard, "create", "-i", a.tree, "-o", part, "-l", str(a.level),
                    "--input-list", listing, "--no-progress"])
        parts.append(part)
        t_parts += t
        m_parts = max(m_parts, m)
    merged = os.path.join(work, "merged.dwarfs")
    t_merge, _, m_merge = run([a.hoard, "merge", "--union", *parts, "-o", merged,
                            "--no-progress"])
    return t_parts, t_merge, m_parts, m_merge, merged


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hoard", required=True, help="the hoard binary")
    ap.add_argument("--tree", help="the tree to build")
    ap.add_argument("--files", type=int, help="or a generated tree of this many tiny files")
    ap.add_argument("--shards", default="8", help="numbers of shards, comma-separated")
    ap.add_argument("--by", default="similarity", help="ways to cut the tree, comma-separated")
    ap.add_argument("--by-hand", action="store_true",
                    help="also build the shards one by one and merge them by hand")
    ap.add_argument("--level", type=int, default=7)
    ap.add_argument("--keep", help="build in this directory and keep the images")
    a = ap.parse_args()
    if (a.tree is None) == (a.files is None):
        ap.error("give --tree or --files")
    counts = [int(n) for n in a.shards.split(",")]
    ways = a.by.split(",")
    work = a.keep or tempfile.mkdtemp(prefix="hoard-dist-bench-")
    try:
        if a.files is not None:
            a.tree = os.path.join(work, "tree")
            start = time.monotonic()
            tiny_files(a.tree, a.files)
            print(f"made {a.files} files in {time.monotonic() - start:.0f} s")
        single = os.path.join(work, "single.dwarfs")
        t_single, c_single, m_single = run([a.hoard, "create", "-i", a.tree, "-o", single,
                                            "-l", str(a.level), "--no-progress", "--force"])
        size = os.path.getsize
        print(f"tree: {a.tree}, level {a.level}")
        print("| build | shards | wall time | CPU time | peak memory | image | vs single |")
        print("|---|---|---|---|---|---|---|")
        show(f"| one machine (`hoard create`) | | {t_single:.1f} s | {c_single:.1f} s "
             f"| {m_single:.0f} MiB "
             f"| {size(single) / 2**20:.2f} MiB | 1.000x |")
        with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0",
                          silence_logs=40) as cluster, Client(cluster) as client:
            for by in ways:
                for shards in counts:
                    # Each build's own peak: fresh worker processes.
                    client.restart()
                    out = os.path.join(work, f"dask-{by}-{shards}.dwarfs")
                    before = client.run(cpu_seconds)
                    start, c_self = time.monotonic(), cpu_seconds()
                    hoard.distributed.create(a.tree, out, client, shards=shards,
                                             level=a.level, by=by, force=True)
                    t = time.monotonic() - start
                    # The workers' CPU time and this process's (the plan).
                    c = cpu_seconds() - c_self + sum(
                        v - before[w] for w, v in client.run(cpu_seconds).items())
                    m = sorted(client.run(peak_rss_mib).values())
                    show(f"| `hoard.distributed.create`, 2 workers | {shards}, by {by} "
                         f"| {t:.1f} s | {c:.1f} s | {' / '.join(f'{x:.0f}' for x in m)} MiB "
                         f"(per worker) | {size(out) / 2**20:.2f} MiB "
                         f"| {size(out) / size(single):.3f}x |")
        if a.by_hand:
            t_parts, t_merge, m_parts, m_merge, merged = by_hand(a, work, ways[0], counts[-1])
            show(f"| shards one by one + `hoard merge` | {counts[-1]}, by {ways[0]} "
                 f"| {t_parts:.1f} s + {t_merge:.2f} s merge | "
                 f"| {m_parts:.0f} MiB (largest shard), {m_merge:.0f} MiB (merge) "
                 f"| {size(merged) / 2**20:.2f} MiB | {size(merged) / size(single):.3f}x |")
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
