#!/usr/bin/env python3
"""Memory of `hoard create -i -` on a tar stream far larger than what it
keeps: a generated stream (default 5 GiB) is piped in, and the table
gives the stream's size, hoard's wall time, peak RSS and image size.

    bench/tar_stream.py                  # 5 GiB at -l1
    bench/tar_stream.py --gib 2 --level 7

The stream is made as it is sent, never stored: files of 1-32 MiB cut
from a 64 MiB pool of random bytes at varying offsets (so the image is
small and the segmenter has real matches to find), 16 to a directory,
plus a small file beside each. hoard spools file contents beside the
image (in the work directory): it needs as much free disk as the stream.
Python 3 standard library only.
"""

import argparse
import io
import os
import random
import subprocess
import sys
import tarfile
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIB = 1 << 20


def stream(out, total: int, seed: int) -> None:
    """Writes a tar stream of about `total` bytes of file data to `out`."""
    rng = random.Random(seed)
    pool = rng.randbytes(64 * MIB)
    sent, i = 0, 0
    with tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        while sent < total:
            size = min(rng.randint(1, 32) * MIB, total - sent)
            at = rng.randrange(len(pool) - size + 1)
            info = tarfile.TarInfo(f"d{i // 16:05}/f{i}.bin")
            info.size, info.mtime, info.mode = size, 1_700_000_000 + i, 0o644
            tar.addfile(info, io.BytesIO(pool[at:at + size]))
            note = f"file {i}: {size} bytes from {at}\n".encode()
            info = tarfile.TarInfo(f"d{i // 16:05}/f{i}.txt")
            info.size, info.mtime = len(note), 1_700_000_000
            tar.addfile(info, io.BytesIO(note))
            sent += size + len(note)
            i += 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=float, default=5.0, help="file data in the stream, GiB")
    ap.add_argument("--level", type=int, default=1)
    ap.add_argument("--work", default=None, help="directory for the image and hoard's spool")
    ap.add_argument("--hoard", default=os.path.join(
        os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target")), "release", "hoard"))
    a = ap.parse_args()
    total = int(a.gib * (1 << 30))
    with tempfile.TemporaryDirectory(prefix="hoard-tar-stream-", dir=a.work) as work:
        image = os.path.join(work, "stream.dwarfs")
        start = time.monotonic()
        proc = subprocess.Popen([a.hoard, "create", "-i", "-", "-o", image, "-l", str(a.level),
                                 "--no-progress"], stdin=subprocess.PIPE)
        feeder = threading.Thread(target=lambda: (stream(proc.stdin, total, 1), proc.stdin.close()))
        feeder.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - start
        feeder.join()
        if os.waitstatus_to_exitcode(status) != 0:
            print(f"hoard create failed with status {status}", file=sys.stderr)
            return 1
        print(f"| stream (file data) | level | wall | peak RSS | image |")
        print(f"|---|---|---|---|---|")
        print(f"| {total / (1 << 30):.1f} GiB | -l{a.level} | {wall:.1f} s "
              f"| {usage.ru_maxrss / 1024:.0f} MiB | {os.path.getsize(image) / MIB:.1f} MiB |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
