"""hoard.create and hoard.rewrite build images that read back as their
source; options are checked; the progress callback is called."""

import os

import pytest

import hoard


def tree_contents(root):
    """Every entry below ``root``: kind, permissions and contents or target."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            st = os.lstat(path)
            if os.path.islink(path):
                found[rel] = ("l", os.readlink(path))
            elif os.path.isdir(path):
                found[rel] = ("d", st.st_mode & 0o7777)
            else:
                with open(path, "rb") as f:
                    found[rel] = ("f", st.st_mode & 0o7777, f.read())
    return found


def image_contents(img):
    found = {}
    for dirpath, dirnames, filenames in img.walk("/"):
        for name in dirnames + filenames:
            path = f"{dirpath}/{name}".lstrip("/")
            st = img.lstat(path)
            if img.lstat(path).st_mode & 0o170000 == 0o120000:
                found[path] = ("l", img.readlink(path))
            elif name in dirnames:
                found[path] = ("d", st.st_mode & 0o7777)
            else:
                found[path] = ("f", st.st_mode & 0o7777, img.read(path))
    return found


def test_create_reads_back(tree, tmp_path):
    image = tmp_path / "tree.dwarfs"
    calls = []
    summary = hoard.create(tree, image, level=3, progress=calls.append,
                           block_size_bits=16, order="path")
    assert summary["files"] >= 5 and summary["image_bytes"] == image.stat().st_size
    assert summary["warnings"] == []
    assert all("phase" in c for c in calls)
    with hoard.Image(image) as img:
        assert image_contents(img) == tree_contents(tree)
        assert img.stat("hardlink.txt").st_ino == img.stat("readme.txt").st_ino
        assert img.stat("readme.txt").st_nlink == 2
        assert img.check(full=True) == {"ok": True, "problems": [], "sections": img.check()["sections"],
                                        "blocks": img.info()["blocks"], "inodes": img.info()["inodes"]}
        assert img.info()["block_size"] == 1 << 16


def test_create_options(tree, tmp_path):
    image = tmp_path / "tree.dwarfs"
    hoard.create(str(tree), str(image), level=1, set_owner=123, set_group=456, set_time=1_000_000,
                 chmod="a-w", filter=["- *.bin"], compression="zstd:level=3")
    with hoard.Image(image) as img:
        st = img.stat("readme.txt")
        assert (st.st_uid, st.st_gid, st.st_mtime) == (123, 456, 1_000_000)
        assert st.st_mode & 0o222 == 0
        assert not img.exists("data/copy.bin") and img.exists("data/x.csv")
    with pytest.raises(hoard.ImageError):
        hoard.create(tree, image)  # exists, no force
    hoard.create(tree, image, force=True)
    with pytest.raises(TypeError, match="no_such_option"):
        hoard.create(tree, tmp_path / "other.dwarfs", no_such_option=1)
    with pytest.raises(ValueError):
        hoard.create(tree, tmp_path / "other.dwarfs", level=12)


def test_progress_callback_can_stop_the_build(tree, tmp_path):
    big = tree / "big"
    big.mkdir()
    for i in range(40):
        (big / f"f{i}").write_bytes(os.urandom(1 << 20))

    def stop(progress):
        raise KeyError("stop here")

    with pytest.raises(KeyError, match="stop here"):
        hoard.create(tree, tmp_path / "stopped.dwarfs", level=9, progress=stop)
    assert not (tmp_path / "stopped.dwarfs").exists()


def test_rewrite_keeps_contents(tree, tmp_path):
    image = tmp_path / "tree.dwarfs"
    hoard.create(tree, image, level=1)
    out = tmp_path / "rewritten.dwarfs"
    blocks, before, after = hoard.rewrite(image, out, level=9)
    assert blocks >= 1 and before > 0 and after > 0
    with hoard.Image(image) as a, hoard.Image(out) as b:
        assert image_contents(a) == image_contents(b)
    hoard.rewrite(image, out, force=True, rebuild_metadata=True, set_owner=7)
    with hoard.Image(out) as b:
        assert b.stat("readme.txt").st_uid == 7


def test_xattrs_when_stored(tree, tmp_path):
    try:
        os.setxattr(tree / "readme.txt", "user.hoard", b"value")
    except OSError:
        pytest.skip("this file system takes no user extended attributes")
    image = tmp_path / "x.dwarfs"
    hoard.create(tree, image)
    with hoard.Image(image) as img:
        assert "user.hoard" in img.listxattr("readme.txt")
        assert img.getxattr("readme.txt", "user.hoard") == b"value"
        with pytest.raises(OSError):
            img.getxattr("readme.txt", "user.none")
