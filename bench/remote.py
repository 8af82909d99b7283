#!/usr/bin/env python3
"""A remote mount against a local one: the image served over HTTP by the
tests' range server on 127.0.0.1 with a delay per answer (a far server),
mounted with hoard; the same image mounted from its file. Measures mount
time (until the mount answers), a cold full read (every file read once),
`find` over the tree on a fresh mount, and the requests and bytes the
remote mounts asked for. Prints a Markdown table.

    bench/remote.py                          # rootfs corpus, quick size
    bench/remote.py --size 200M --delay-ms 20 --runs 3

Python 3 standard library only; uses the corpora of the rest of the suite.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpora  # noqa: E402
import measure  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVER = os.path.join(REPO, "crates/cli/tests/remote/range_server.py")


def hoard() -> str:
    """$HOARD, or the release build (made when missing)."""
    if os.environ.get("HOARD"):
        return os.environ["HOARD"]
    path = os.path.join(REPO, "target/release/hoard")
    if not os.path.exists(path):
        subprocess.run(["cargo", "build", "--release", "-p", "hoard-cli"], cwd=REPO, check=True)
    return path


def mounted(image: str, mnt: str, options: str, action) -> tuple:
    """Mounts, runs `action(mnt)`; returns (mount seconds, action seconds)."""
    os.makedirs(mnt, exist_ok=True)
    started = time.perf_counter()
    args = [hoard(), "mount", image, mnt] + (["-o", options] if options else [])
    subprocess.run(args, check=True)
    mount_s = time.perf_counter() - started
    try:
        started = time.perf_counter()
        action(mnt)
        return mount_s, time.perf_counter() - started
    finally:
        subprocess.run(["fusermount3", "-u", mnt], check=True)


def control(port: int, path: str) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
        return json.loads(r.read())


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--corpus", default="rootfs")
    p.add_argument("--size", default="100M", help="corpus size (rootfs)")
    p.add_argument("--delay-ms", type=int, default=20)
    p.add_argument("--runs", type=int, default=1)
    args = p.parse_args()
    corpus = corpora.prepare(args.corpus, True, corpora.cache_dir(), size=corpora.parse_size(args.size))
    with tempfile.TemporaryDirectory() as work:
        image = os.path.join(work, "image.dwarfs")
        subprocess.run([hoard(), "create", "-i", corpus.tree, "-o", image, "--no-progress"], check=True)
        server = subprocess.Popen(
            [sys.executable, SERVER, image, "--delay-ms", str(args.delay_ms), "--lifetime", "3600"],
            stdout=subprocess.PIPE, text=True)
        try:
            port = int(server.stdout.readline())
            url = f"http://127.0.0.1:{port}/image.dwarfs"
            rows = []
            for label, src in [("local", image), (f"remote (+{args.delay_ms} ms)", url)]:
                results = {"mount": [], "full read": [], "find": []}
                requests = {}
                for _ in range(args.runs):
                    control(port, "/__reset")
                    m, r = mounted(src, os.path.join(work, "mnt"), "", measure.read_tree)
                    results["mount"].append(m)
                    results["full read"].append(r)
                    requests["full read"] = control(port, "/__stats")
                    control(port, "/__reset")
                    _, f = mounted(src, os.path.join(work, "mnt"), "",
                                   lambda d: subprocess.run(["find", d], stdout=subprocess.DEVNULL, check=True))
                    results["find"].append(f)
                    requests["find"] = control(port, "/__stats")
                row = [label] + [f"{statistics.median(v):.2f} s" for v in results.values()]
                if src == url:
                    full = requests["full read"]
                    row.append(f"{full['requests']} ({full['bytes'] / os.path.getsize(image):.2f}x the image)")
                    row.append(str(requests["find"]["requests"]))
                else:
                    row += ["-", "-"]
                rows.append(row)
        finally:
            server.kill()
            server.wait()
        size = os.path.getsize(image)
        print(f"{corpus.label}: image {size / 2**20:.1f} MiB, {args.runs} run(s), median\n")
        print("| mount | mount time | cold full read | find | requests (full read) | requests (mount + find) |")
        print("|---|---|---|---|---|---|")
        for row in rows:
            print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
