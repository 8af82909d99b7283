"""Image.extract writes a tree equal to the image's manifest (kinds,
modes, owners as root, times, sizes, contents, hard links, symlink
targets, devices as root); patterns select only the matching entries and
the directories leading to them; errors are the right exceptions."""

import hashlib
import os
import shutil
import stat

import pytest

import hoard
from conftest import images, manifest
from test_images import KINDS, add_stat_fields, mixed_groups

ROOT = os.geteuid() == 0

# Every small image, and a few of the large upstream ones (70 MB each,
# all of the same tree): plain, with subsecond times, without a hard-link
# table, with owners and times set.
UPSTREAM = {"default", "subsecond", "no-hardlink-table", "owner-time"}
CHOSEN = ([p for p in images("upstream") if p.stem in UPSTREAM]
          + images("compat") + images("misc"))


# An image with every kind of entry, hard links and nested directories.
SAMPLE = next(p for p in images("compat") if p.stem == "compat-v0.9.10")


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def extracted_paths(dest):
    found = {"."}
    for dirpath, dirnames, filenames in os.walk(dest):
        for name in dirnames + filenames:
            found.add(os.path.relpath(os.path.join(dirpath, name), dest))
    return found


@pytest.fixture
def dest(tmp_path):
    out = tmp_path / "out"
    yield out
    shutil.rmtree(out, ignore_errors=True)


@pytest.mark.parametrize("image", CHOSEN, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_extracted_tree_matches_manifest(image, dest):
    entries = manifest(image)
    if not ROOT:
        entries = [e for e in entries if e["type"] not in "cb"]
    mixed = mixed_groups(entries)
    with hoard.Image(image) as img:
        img.extract(dest)
    assert extracted_paths(dest) == {e["path"] for e in entries}
    for e in entries:
        path = e["path"]
        full = os.path.join(dest, path)
        st = os.lstat(full)
        kind = KINDS[stat.S_IFMT(st.st_mode)]
        got = {"type": kind, "mode": "%04o" % stat.S_IMODE(st.st_mode)}
        want = {k: e[k] for k in got}
        if kind == "l":
            del got["mode"], want["mode"]  # a symlink's own mode is not settable
        if ROOT:
            got["owner"], want["owner"] = (st.st_uid, st.st_gid), (e["uid"], e["gid"])
        add_stat_fields(got, want, st, e, mixed)
        if kind == "f":
            got["sha256"], want["sha256"] = sha256(full), e["sha256"]
        if kind == "l":
            got["target"], want["target"] = os.readlink(full), e["target"]
        assert got == want, path


def test_patterns_select_matching_entries(dest):
    image = SAMPLE
    entries = {e["path"]: e for e in manifest(image)}
    with hoard.Image(image) as img:
        img.extract(dest, ["foo/**/*.sh", "/test.py"])
    matching = {p for p in entries if p.endswith(".sh") and p.startswith("foo/")} | {"test.py"}
    parents = {os.path.dirname(p) or "." for p in matching}
    parents |= {os.path.dirname(p) or "." for p in parents}
    while True:
        more = parents | {os.path.dirname(p) or "." for p in parents}
        if more == parents:
            break
        parents = more
    assert len(matching) > 3
    assert extracted_paths(dest) == matching | parents
    for p in matching:
        assert sha256(os.path.join(dest, p)) == entries[p]["sha256"]


def test_one_pattern_as_a_string_and_case_insensitive(dest):
    image = SAMPLE
    with hoard.Image(image) as img:
        img.extract(dest, "i:TEST.PY")
    assert extracted_paths(dest) == {".", "test.py"}


def test_extract_errors(tree, tmp_path, dest):
    image = tmp_path / "tree.dwarfs"
    hoard.create(tree, image, level=1)
    with hoard.Image(image) as img:
        with pytest.raises(ValueError, match="invalid pattern 'a/\\[x'"):
            img.extract(dest, ["a/[x"])
        # An existing file where a directory belongs.
        dest.mkdir()
        (dest / "data").write_text("in the way")
        with pytest.raises(NotADirectoryError, match="cannot create directory .*data"):
            img.extract(dest)
        # A symlink in the way is replaced, never written through.
        (dest / "data").unlink()
        outside = tmp_path / "outside.txt"
        outside.write_text("keep")
        os.symlink(outside, dest / "readme.txt")
        img.extract(dest, xattrs=False)
        assert outside.read_text() == "keep"
        assert (dest / "readme.txt").read_bytes() == (tree / "readme.txt").read_bytes()
        img.close()
        with pytest.raises(ValueError, match="closed"):
            img.extract(dest)
