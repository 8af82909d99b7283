#!/usr/bin/env python3
"""Two hoard binaries side by side, for a change that must not slow
anything down: `create -l7` of a tree, and a cold full read of the image
each made (the page cache dropped, mounted afresh, every file read, then
unmounted); for create also its CPU time, which a busy machine moves
less than the wall time. Runs alternate, A B A B ..., after one warm-up each, so that
a machine's drift hits both; prints each figure's median and the median
of the pairwise ratios A/B. Run as root (it drops the page cache).

    bench/ab.py --a target/release/hoard --b /tmp/hoard-before --tree /usr/lib/python3.11
    bench/ab.py --a NEW --b OLD --tree DIR --runs 9

Python 3 standard library only.
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time


def create(hoard: str, tree: str, image: str) -> tuple:
    """Wall and CPU (user + system) seconds `hoard create -l7` takes to
    pack `tree` into `image`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    subprocess.run([hoard, "create", "-i", tree, "-o", image, "-l7", "-f", "--no-progress"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def cold_read(hoard: str, image: str, mnt: str) -> float:
    """Seconds from a mount with the page cache dropped to every file of
    it read, the unmount included."""
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")
    start = time.monotonic()
    subprocess.run([hoard, "mount", image, mnt], check=True)
    try:
        for top, _, files in os.walk(mnt):
            for name in files:
                path = os.path.join(top, name)
                if os.path.isfile(path) and not os.path.islink(path):
                    with open(path, "rb", buffering=0) as f:
                        while f.read(1 << 20):
                            pass
    finally:
        subprocess.run([hoard, "umount", mnt], check=True)
    return time.monotonic() - start


def compare(name: str, a: list, b: list) -> str:
    """A table row: medians of A and B, and the median of A/B pair by pair."""
    ratios = [x / y for x, y in zip(a, b)]
    return (f"| {name} | {statistics.median(a):.3f} s | {statistics.median(b):.3f} s "
            f"| {statistics.median(ratios):.3f} ({min(ratios):.2f}-{max(ratios):.2f}) |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", required=True, help="the hoard binary under test")
    ap.add_argument("--b", required=True, help="the hoard binary it is compared with")
    ap.add_argument("--tree", required=True, help="the tree packed")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="hoard-ab-") as work:
        mnt = os.path.join(work, "mnt")
        os.mkdir(mnt)
        images = {k: os.path.join(work, f"{k}.dwarfs") for k in ("a", "b")}
        binaries = {"a": args.a, "b": args.b}
        times = {(k, what): [] for k in "ab" for what in ("create", "cpu", "read")}
        for run in range(args.runs + 1):
            for k in "ab":
                made, cpu = create(binaries[k], args.tree, images[k])
                read = cold_read(binaries[k], images[k], mnt)
                if run > 0:  # the first round warms up
                    times[(k, "create")].append(made)
                    times[(k, "cpu")].append(cpu)
                    times[(k, "read")].append(read)
        sizes = {k: os.path.getsize(images[k]) for k in "ab"}
    print(f"tree: {args.tree}; {args.runs} runs each, alternating; "
          f"image bytes A {sizes['a']:,}, B {sizes['b']:,}\n")
    print("| figure | A | B | A/B median (range) |")
    print("|---|---:|---:|---:|")
    print(compare("create -l7", times[("a", "create")], times[("b", "create")]))
    print(compare("create -l7, CPU", times[("a", "cpu")], times[("b", "cpu")]))
    print(compare("cold full read (mount included)", times[("a", "read")], times[("b", "read")]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
