"""Where the tests find DwarFS-made images: ../shared/dwarfs-images beside
the checkout when present, else the repository's own set
(crates/testdata/images), as the Rust tests do."""

import json
import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
SHARED = ROOT.parent / "shared" / "dwarfs-images"
REPO = ROOT / "crates" / "testdata" / "images"
IMAGES = SHARED if SHARED.is_dir() else REPO


def images(group):
    """The images of ``group`` (with a manifest beside them), sorted."""
    return sorted(p for p in (IMAGES / group).glob("*.dwarfs")
                  if p.with_suffix(".manifest").exists())


def all_images(group):
    """Every image of ``group``."""
    return sorted((IMAGES / group).glob("*.dwarfs"))


def manifest(image):
    """The manifest entries of ``image``, as dicts."""
    with open(image.with_suffix(".manifest"), encoding="utf-8") as f:
        return [json.loads(line) for line in f]


@pytest.fixture
def tree(tmp_path):
    """A small source tree: nested directories, text and binary files, a
    repeated file, an empty one, a symlink and a hard link."""
    root = tmp_path / "tree"
    (root / "data" / "deep").mkdir(parents=True)
    (root / "data" / "x.csv").write_text("name,value\n" + "".join(f"row{i},{i * i}\n" for i in range(500)))
    (root / "data" / "deep" / "noise.bin").write_bytes(os.urandom(300_000))
    (root / "data" / "copy.bin").write_bytes((root / "data" / "deep" / "noise.bin").read_bytes())
    (root / "empty").write_bytes(b"")
    (root / "readme.txt").write_text("hello from hoard\n" * 100)
    os.symlink("data/x.csv", root / "link.csv")
    os.link(root / "readme.txt", root / "hardlink.txt")
    return root


def skipped(test, why):
    """Records that ``test`` left something out because ``why`` (in
    $HOARD_SKIP_LOG, as the Rust tests do)."""
    print(f"note: {test}: skipped: {why}")
    log = os.environ.get("HOARD_SKIP_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"{test}: {why}\n")


def hoard_bin():
    """The ``hoard`` binary scripts/test.sh built ($HOARD_BIN), or None."""
    path = os.environ.get("HOARD_BIN")
    return path if path and os.access(path, os.X_OK) else None


def dwarfs_tool(name):
    """The path of DwarFS 0.15.3's tool ``name`` in ../shared, or None."""
    path = ROOT.parent / "shared" / "anchors" / "dwarfs-0.15.3" / "bin" / name
    return str(path) if os.access(path, os.X_OK) else None
