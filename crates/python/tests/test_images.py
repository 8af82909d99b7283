"""Every DwarFS-made test image read through hoard.Image equals its
manifest: stat fields, symlink targets, and the SHA-256 of every file read
with .read and with .open in random-size chunks."""

import hashlib
import os
import random
import stat

import pytest

import hoard
from conftest import images, manifest

KINDS = {stat.S_IFDIR: "d", stat.S_IFREG: "f", stat.S_IFLNK: "l", stat.S_IFCHR: "c",
         stat.S_IFBLK: "b", stat.S_IFIFO: "p", stat.S_IFSOCK: "s"}

ALL = images("upstream") + images("compat") + images("misc")


def mixed_groups(entries):
    """Hard-link groups whose links the manifest shows with different
    mtimes (format 2.2 and older store each link's own inode data)."""
    times = {}
    for e in entries:
        if e.get("link"):
            times.setdefault(e["link"], set()).add(e["mtime"])
    return {link for link, t in times.items() if len(t) > 1}


def add_stat_fields(got, want, st, e, mixed):
    """Adds to ``got`` what ``st`` says of the fields every reader of the
    manifest entry ``e`` checks, and to ``want`` what ``e`` says: the mtime
    (unless of a hard-link group in ``mixed``), the size of a file or
    symlink, a file's link count and a device's numbers."""
    kind = got["type"]
    if e.get("link") not in mixed:
        got["mtime"] = divmod(st.st_mtime_ns, 10**9)
        want["mtime"] = (e["mtime"], e["mtime_ns"])
    if kind in "fl":
        got["size"], want["size"] = st.st_size, e["size"]
    if kind == "f":
        got["nlink"], want["nlink"] = st.st_nlink, e["nlink"]
    if kind in "cb":
        got["rdev"] = [os.major(st.st_rdev), os.minor(st.st_rdev)]
        want["rdev"] = e["rdev"]


def sha256_chunked(img, path, rng):
    h = hashlib.sha256()
    with img.open(path) as f:
        while True:
            chunk = f.read(rng.randint(1, 1 << 20))
            if not chunk:
                break
            h.update(chunk)
        assert f.tell() == img.lstat(path).st_size
        f.seek(0)
        assert f.read(10) == img.read(path, 0, 10)
    return h.hexdigest()


@pytest.mark.parametrize("image", ALL, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_image_matches_manifest(image):
    entries = manifest(image)
    mixed = mixed_groups(entries)
    rng = random.Random(image.name)
    with hoard.Image(image) as img:
        walked = set()
        for dirpath, dirnames, filenames in img.walk("/"):
            for name in dirnames + filenames:
                walked.add(f"{dirpath}/{name}".lstrip("/"))
        assert walked == {e["path"] for e in entries if e["path"] != "."}
        for e in entries:
            path = e["path"]
            st = img.lstat(path)
            kind = KINDS[stat.S_IFMT(st.st_mode)]
            got = {"type": kind, "mode": "%04o" % stat.S_IMODE(st.st_mode), "uid": st.st_uid, "gid": st.st_gid}
            want = {k: e[k] for k in got}
            add_stat_fields(got, want, st, e, mixed)
            if kind == "f":
                want["sha256"] = want["sha256_chunked"] = e["sha256"]
                got["sha256"] = hashlib.sha256(img.read(path)).hexdigest()
                got["sha256_chunked"] = sha256_chunked(img, path, rng)
            if kind == "l":
                got["target"], want["target"] = img.readlink(path), e["target"]
            assert got == want, path


def test_symlinks_are_followed_inside_the_image():
    image = next((p for p in ALL if p.name == "default.dwarfs"), None)
    if image is None:
        pytest.skip("upstream/default.dwarfs not found")
    with hoard.Image(image) as img:
        assert img.stat("links/rel") == img.stat("links/h1")
        assert stat.S_ISLNK(img.lstat("links/rel").st_mode)
        assert img.read("links/rel") == img.read("links/h1")
        assert img.isdir("links/dirlink") and img.listdir("links/dirlink") == img.listdir("links/sub")
        assert not img.exists("links/dangling")
        assert img.exists("links/sub/h3") and not img.exists("links/nope")
        with pytest.raises(FileNotFoundError):
            img.stat("links/dangling")
        assert img.listdir(b"links")[0] == b"abs"
