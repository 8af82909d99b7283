"""One image of a tree built three ways: `hoard create` on one machine,
`hoard.distributed.create` on a dask.distributed LocalCluster of two
worker processes, and shards built one by one with `hoard create
--input-list` then joined with `hoard merge --union`. Prints wall times,
peak memory (the single build's, each Dask worker's, the largest shard's
and the merge's), merge time and image sizes against the single build.

    python3 bench/dask_build.py --hoard target/release/hoard \\
        --tree ~/.cache/hoard-bench/corpora/versions-quick --shards 8
    python3 bench/dask_build.py --hoard target/release/hoard --files 2000000

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
    """Runs `cmd`; returns (seconds, peak RSS in MiB of the child)."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    if status != 0:
        raise SystemExit(f"{cmd[:2]} failed")
    return time.monotonic() - start, usage.ru_maxrss / 1024


def tiny_files(root, count, per_dir=1000):
    """`count` files of 2 to 8 bytes below `root`, `per_dir` a directory;
    odd directories hold the same contents."""
    for d in range((count + per_dir - 1) // per_dir):
        sub = os.path.join(root, f"d{d:05}")
        os.makedirs(sub)
        for i in range(min(per_dir, count - d * per_dir)):
            with open(os.path.join(sub, f"f{i:04}"), "wb") as f:
                f.write(b"%d\n" % (i if d % 2 else d * per_dir + i))


def peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hoard", required=True, help="the hoard binary")
    ap.add_argument("--tree", help="the tree to build")
    ap.add_argument("--files", type=int, help="or a generated tree of this many tiny files")
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--level", type=int, default=7)
    a = ap.parse_args()
    if (a.tree is None) == (a.files is None):
        ap.error("give --tree or --files")
    work = tempfile.mkdtemp(prefix="hoard-dist-bench-")
    try:
        if a.files is not None:
            a.tree = os.path.join(work, "tree")
            start = time.monotonic()
            tiny_files(a.tree, a.files)
            print(f"made {a.files} files in {time.monotonic() - start:.0f} s")
        single = os.path.join(work, "single.dwarfs")
        t_single, m_single = run([a.hoard, "create", "-i", a.tree, "-o", single,
                                  "-l", str(a.level), "--no-progress"])

        with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0",
                          silence_logs=40) as cluster, Client(cluster) as client:
            out = os.path.join(work, "dask.dwarfs")
            start = time.monotonic()
            hoard.distributed.create(a.tree, out, client, shards=a.shards, level=a.level)
            t_dask = time.monotonic() - start
            m_workers = sorted(client.run(peak_rss_mib).values())

        lists = hoard.distributed.plan(a.tree, a.shards)
        parts, t_parts, m_parts = [], 0.0, 0.0
        for i, paths in enumerate(lists):
            listing = os.path.join(work, f"{i}.list")
            with open(listing, "wb") as f:
                f.write(b"".join(p + b"\n" for p in paths))
            part = os.path.join(work, f"part{i}.dwarfs")
            t, m = run([a.hoard, "create", "-i", a.tree, "-o", part, "-l", str(a.level),
                        "--input-list", listing, "--no-progress"])
            parts.append(part)
            t_parts += t
            m_parts = max(m_parts, m)
        merged = os.path.join(work, "merged.dwarfs")
        t_merge, m_merge = run([a.hoard, "merge", "--union", *parts, "-o", merged,
                                "--no-progress"])

        size = os.path.getsize
        print(f"tree: {a.tree}, {a.shards} shards, level {a.level}")
        print("| build | wall time | peak memory | image | vs single |")
        print("|---|---|---|---|---|")
        print(f"| one machine (`hoard create`) | {t_single:.1f} s | {m_single:.0f} MiB "
              f"| {size(single) / 2**20:.2f} MiB | 1.000x |")
        print(f"| `hoard.distributed.create`, 2 workers | {t_dask:.1f} s | "
              f"{' / '.join(f'{m:.0f}' for m in m_workers)} MiB (per worker) "
              f"| {size(out) / 2**20:.2f} MiB | {size(out) / size(single):.3f}x |")
        print(f"| shards one by one + `hoard merge` | {t_parts:.1f} s + {t_merge:.2f} s merge "
              f"| {m_parts:.0f} MiB (largest shard), {m_merge:.0f} MiB (merge) "
              f"| {size(merged) / 2**20:.2f} MiB | {size(merged) / size(single):.3f}x |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
