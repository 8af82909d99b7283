#!/usr/bin/env python3
"""What encryption and signing cost: the size they add to an image, and a
cold full read of a signed and encrypted mount against a plain one.
Prints a Markdown table.

    bench/encryption.py                        # the repository's crates/
    bench/encryption.py --corpus DIR --runs 5  # another tree, median of 5

Both images are packed from CORPUS at the default level; the second with
`--encrypt-to` (a key made by `age-keygen`) and `--sign` (a `hoard keygen`
key). A cold read: the image's pages are dropped from the page cache
(posix_fadvise DONTNEED on the image file alone, so nothing else on the
machine is disturbed), it is mounted afresh (hoard's block cache empty)
and every regular file is read whole, then it is unmounted. Also the
CPU time of the mount's process (user + system), which a machine busy
with other work changes less than the wall time. Needs FUSE and
`age-keygen`; Python 3 standard library only.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def drop_cache(path: str) -> None:
    """Drops the pages of file `path` from the page cache."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds process `pid` has used so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cold_read(hoard: str, image: str, mnt: str, extra: list) -> tuple:
    """Seconds to mount `image` cold and read all of it, and the CPU
    seconds the mount's process took (in the foreground, so it is the
    child here)."""
    drop_cache(image)
    start = time.monotonic()
    server = subprocess.Popen([hoard, "mount", "-f", image, mnt] + extra)
    try:
        while not os.path.ismount(mnt):
            if server.poll() is not None or time.monotonic() - start > 60:
                raise RuntimeError(f"{image} did not mount")
            time.sleep(0.01)
        measure.read_tree(mnt)
        cpu = cpu_seconds(server.pid)
    finally:
        subprocess.run([hoard, "umount", mnt], check=True)
        server.wait()
    return time.monotonic() - start, cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default=os.path.join(REPO, "crates"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--hoard", default=os.path.join(
        os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target")), "release", "hoard"))
    a = ap.parse_args()
    hoard = a.hoard
    with tempfile.TemporaryDirectory(prefix="hoard-encryption-") as work:
        identity = os.path.join(work, "id.txt")
        made = subprocess.run(["age-keygen", "-o", identity], check=True,
                              capture_output=True, text=True)
        recipient = made.stderr.strip().removeprefix("Public key: ")
        signer = os.path.join(work, "signer")
        subprocess.run([hoard, "keygen", "-o", signer], check=True, stdout=subprocess.DEVNULL)
        plain = os.path.join(work, "plain.dwarfs")
        both = os.path.join(work, "both.dwarfs")
        base = [hoard, "create", "-i", a.corpus, "--no-progress", "--no-history"]
        subprocess.run(base + ["-o", plain], check=True, stdout=subprocess.DEVNULL)
        subprocess.run(base + ["-o", both, "--encrypt-to", recipient, "--sign", signer + ".key"],
                       check=True, stdout=subprocess.DEVNULL)
        mnt = os.path.join(work, "mnt")
        os.mkdir(mnt)
        keys = ["-o", f"identity={identity},trust={signer}.pub"]
        times = {"plain": [], "both": []}
        for _ in range(a.runs):
            times["plain"].append(cold_read(hoard, plain, mnt, []))
            times["both"].append(cold_read(hoard, both, mnt, keys))
        size = {"plain": os.path.getsize(plain), "both": os.path.getsize(both)}
        # The run with the median wall time, and the median CPU time.
        med = {k: sorted(t for t, _ in v)[len(v) // 2] for k, v in times.items()}
        cpu = {k: sorted(c for _, c in v)[len(v) // 2] for k, v in times.items()}
        print(f"corpus: {a.corpus}; median of {a.runs} cold full reads of a mount; "
              f"load average {os.getloadavg()[0]:.1f}\n")
        print("| image | size | cold full read | CPU of the mount |")
        print("|---|---:|---:|---:|")
        print(f"| plain | {size['plain']:,} B | {med['plain']:.2f} s | {cpu['plain']:.2f} s |")
        print(f"| signed + encrypted | {size['both']:,} B "
              f"(+{100 * (size['both'] - size['plain']) / size['plain']:.3f}%) "
              f"| {med['both']:.2f} s ({med['both'] / med['plain']:.2f}x) "
              f"| {cpu['both']:.2f} s ({cpu['both'] / cpu['plain']:.2f}x) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
