#!/usr/bin/env python3
"""What signing costs: the size a signature adds to an image, and the time
`hoard sign` (into a new file, and in place) and `hoard verify --trust`
take on it. Prints a Markdown table.

    bench/signing.py                      # a 1 GiB image of random bytes
    bench/signing.py --size 256 --runs 3  # 256 MiB, median of 3

The image holds SIZE MiB of random bytes in 64 MiB files, packed at -l1
(1 MiB blocks, stored as they are), so its size is SIZE MiB and every
byte is hashed. The page cache is warm (the image was just written):
what is measured is hashing and copying, not the disk; each run writes
a new file after the last run's writes have reached the disk. Signing
in place (`hoard sign IMAGE`, no `-o`) signs a fresh copy of the image
each run; an unsigned image gets its signature appended, so that one
reads and hashes the image without writing it again. CPU time is given beside wall time,
and the load average before the runs: on a machine shared with other
work the wall time grows, the CPU time much less.
Python 3 standard library only.
"""

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILE = 64 << 20


def timed(cmd: list) -> tuple:
    """Runs `cmd` (it must succeed); returns its wall and CPU (user +
    system) times in seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def median(samples: list) -> str:
    """`wall s (CPU s)` of the run with the median wall time."""
    wall, cpu = sorted(samples)[len(samples) // 2]
    return f"{wall:.2f} s ({cpu:.2f} s CPU)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=1024, help="MiB of data in the image")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--hoard", default=os.path.join(
        os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target")), "release", "hoard"))
    a = ap.parse_args()
    hoard = a.hoard
    with tempfile.TemporaryDirectory(prefix="hoard-signing-") as work:
        tree = os.path.join(work, "tree")
        os.mkdir(tree)
        left = a.size << 20
        n = 0
        while left > 0:
            with open(os.path.join(tree, f"f{n:03}"), "wb") as f:
                f.write(os.urandom(min(FILE, left)))
            left -= FILE
            n += 1
        key = os.path.join(work, "k")
        subprocess.run([hoard, "keygen", "-o", key], check=True, stdout=subprocess.DEVNULL)
        plain = os.path.join(work, "plain.dwarfs")
        signed = os.path.join(work, "signed.dwarfs")
        subprocess.run([hoard, "create", "-i", tree, "-o", plain, "-l1", "--no-progress"],
                       check=True, stderr=subprocess.DEVNULL)
        load = os.getloadavg()[0]
        sign = []
        for _ in range(a.runs):
            # Each run writes a new file, with the last run's writes on
            # disk: replacing a 1 GiB file frees its pages in the process
            # that replaces it, and pages waiting to be written slow the
            # next writer down, neither of which is the signing's cost.
            if os.path.exists(signed):
                os.remove(signed)
            os.sync()
            sign.append(timed([hoard, "sign", plain, "-o", signed, "--key", key + ".key"]))
        os.sync()
        in_place = []
        copy = os.path.join(work, "copy.dwarfs")
        for _ in range(a.runs):
            shutil.copyfile(plain, copy)
            os.sync()
            in_place.append(timed([hoard, "sign", copy, "--key", key + ".key"]))
            os.remove(copy)
        os.sync()
        verify = [timed([hoard, "verify", signed, "--trust", key + ".pub"]) for _ in range(a.runs)]
        plain_size, signed_size = os.path.getsize(plain), os.path.getsize(signed)
        print(f"{a.size} MiB of random bytes, hoard create -l1; {os.cpu_count()} cores; "
              f"median of {a.runs}; wall time (CPU time); load average {load:.1f}\n")
        print("| image bytes | signed | overhead | hoard sign -o NEW | hoard sign (in place) "
              "| hoard verify |")
        print("|---|---|---|---|---|---|")
        print(f"| {plain_size:,} | {signed_size:,} | {signed_size - plain_size:,} B "
              f"({100 * (signed_size / plain_size - 1):.4f}%) | {median(sign)} "
              f"| {median(in_place)} | {median(verify)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
