#!/usr/bin/env python3
"""What recovery data costs: for each percentage, the image's size against
the same image without it, and the time to create, check (clean and
damaged) and repair it. Prints a Markdown table.

    bench/recovery.py                        # rootfs corpus, quick size (100 MiB)
    bench/recovery.py --corpus versions --runs 3 --percent 1 5 10

The damage is a 256 KiB run of zeros in the middle of the image, inside
the budget of every percentage measured; each repair is checked to give
back the original bytes. Python 3 standard library only; uses the corpora
and the measuring of the rest of the suite.
"""

import argparse
import filecmp
import os
import shutil
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpora  # noqa: E402
import measure  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DAMAGE = 256 << 10


def damage(image: str, out: str) -> None:
    """Copies `image` to `out` with DAMAGE zero bytes in its middle."""
    shutil.copyfile(image, out)
    size = os.path.getsize(out)
    with open(out, "r+b") as f:
        f.seek(max(0, size // 2 - DAMAGE // 2))
        f.write(bytes(min(DAMAGE, size)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default="rootfs", choices=["rootfs", "versions", "manyfiles", "small"])
    ap.add_argument("--full", action="store_true", help="the corpus's full size, not the quick one")
    ap.add_argument("--percent", type=int, nargs="+", default=[1, 5, 10])
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--level", type=int, default=7)
    ap.add_argument("--hoard", default=os.path.join(
        os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target")), "release", "hoard"))
    a = ap.parse_args()
    corpus = corpora.prepare(a.corpus, not a.full, corpora.cache_dir(), log=lambda *x: None)
    hoard = a.hoard
    with tempfile.TemporaryDirectory(prefix="hoard-recovery-") as work:
        def create(pct, out):
            extra = ["--recovery", str(pct)] if pct else []
            return measure.run([[hoard, "create", "-i", corpus.tree, "-o", out, "-l", str(a.level),
                                 "--no-progress", "-f", *extra]])

        base = os.path.join(work, "base.dwarfs")
        base_create = statistics.median(create(0, base).wall for _ in range(a.runs))
        base_size = os.path.getsize(base)
        print(f"corpus {corpus.label}, hoard create -l{a.level}: {base_size:,} bytes in "
              f"{base_create:.1f} s without recovery data\n")
        print("| recovery | image bytes | overhead | create | check, clean | check, damaged | repair |")
        print("|---|---|---|---|---|---|---|")
        for pct in a.percent:
            image = os.path.join(work, f"r{pct}.dwarfs")
            bad = os.path.join(work, f"r{pct}-bad.dwarfs")
            fixed = os.path.join(work, f"r{pct}-fixed.dwarfs")
            rows = {"create": [], "clean": [], "damaged": [], "repair": []}
            for _ in range(a.runs):
                rows["create"].append(create(pct, image).wall)
                clean = measure.run([[hoard, "check", image]])
                if not clean.ok:
                    raise SystemExit(f"check failed on the undamaged {pct}% image")
                rows["clean"].append(clean.wall)
                damage(image, bad)
                rows["damaged"].append(measure.run([[hoard, "check", bad]]).wall)
                repaired = measure.run([[hoard, "repair", bad, "-o", fixed]])
                if not repaired.ok or not filecmp.cmp(image, fixed, shallow=False):
                    raise SystemExit(f"repair of the {pct}% image did not give back its bytes")
                rows["repair"].append(repaired.wall)
            size = os.path.getsize(image)
            med = {k: statistics.median(v) for k, v in rows.items()}
            print(f"| {pct}% | {size:,} | {100 * (size / base_size - 1):+.2f}% | {med['create']:.1f} s "
                  f"| {med['clean']:.2f} s | {med['damaged']:.2f} s | {med['repair']:.2f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
