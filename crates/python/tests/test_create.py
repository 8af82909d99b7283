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


def wav(seconds=1, rate=44100):
    """A small 16-bit stereo PCM WAVE file of noise."""
    import struct
    data = os.urandom(rate * 4 * seconds)
    fmt = struct.pack("<HHIIHH", 1, 2, rate, rate * 4, 4, 16)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


def test_history_records_the_call(tree, tmp_path):
    image = tmp_path / "h.dwarfs"
    hoard.create(tree, image, level=2, order="path")
    with hoard.Image(image) as img:
        [entry] = img.history()
        assert entry["arguments"] == ["hoard.create", str(tree), str(image), "level=2", "order='path'"]
        assert entry["git_desc"].startswith("hoard v")
        assert entry["timestamp"] > 1_600_000_000 and entry["libraries"]
    out = tmp_path / "r.dwarfs"
    hoard.rewrite(image, out, level=1, no_history_timestamps=True)
    with hoard.Image(out) as img:
        first, second = img.history()
        assert second["arguments"][:2] == ["hoard.rewrite", str(image)]
        assert second["timestamp"] is None
    hoard.create(tree, image, force=True, no_history=True)
    with hoard.Image(image) as img:
        assert img.history() == []


def test_per_category_compression(tree, tmp_path):
    (tree / "sound.wav").write_bytes(wav())
    for compression in (["pcmaudio/waveform::flac:level=3", "zstd:level=5"],
                        {"pcmaudio/waveform": "flac:level=3", None: "zstd:level=5"}):
        image = tmp_path / "c.dwarfs"
        hoard.create(tree, image, level=3, force=True, categorize=True, compression=compression,
                     window_size={"pcmaudio/waveform": 0}, order=["path", "incompressible::none"])
        with hoard.Image(image) as img:
            assert "pcmaudio/waveform" in img.info()["categories"]
            assert img.read("sound.wav") == (tree / "sound.wav").read_bytes()
            assert img.check(full=True)["ok"]
            assert "flac" in img.history()[0]["arguments"][-3]
    with pytest.raises(ValueError, match="compression given twice without a category"):
        hoard.create(tree, tmp_path / "x.dwarfs", compression=["zstd", "lz4"])
    with pytest.raises(ValueError, match="window size bits 7 out of range"):
        hoard.create(tree, tmp_path / "x.dwarfs", window_size=7)
    # rewrite takes them too: the audio blocks come out as FLAC.
    out = tmp_path / "r.dwarfs"
    hoard.rewrite(image, out, compression={"pcmaudio/waveform": "flac:level=5", None: "lzma"})
    with hoard.Image(out) as img:
        assert img.read("sound.wav") == (tree / "sound.wav").read_bytes()


def test_incompressible_settings(tree, tmp_path):
    image = tmp_path / "i.dwarfs"
    # Every file at least 1 byte is checked, and data counts as
    # incompressible only when it does not shrink at all: the noise does.
    hoard.create(tree, image, categorize="incompressible", incompressible_min_input_size=1,
                 incompressible_block_size=4096, incompressible_fragments=True,
                 incompressible_ratio=1.0, incompressible_zstd_level=1)
    with hoard.Image(image) as img:
        assert "incompressible" in img.info()["categories"]
    # Files too small to be checked: nothing is incompressible.
    hoard.create(tree, image, force=True, categorize="incompressible",
                 incompressible_min_input_size=1 << 30)
    with hoard.Image(image) as img:
        assert "incompressible" not in img.info()["categories"]


def test_hotness_list(tree, tmp_path):
    hot = tmp_path / "hot.txt"
    hot.write_text("data/x.csv\nreadme.txt\n")
    image = tmp_path / "h.dwarfs"
    hoard.create(tree, image, categorize="hotness", hotness_list=hot)
    with hoard.Image(image) as img:
        assert "hotness" in img.info()["categories"]
        assert img.read("data/x.csv") == (tree / "data" / "x.csv").read_bytes()
    with pytest.raises(ValueError, match="categorize"):
        hoard.create(tree, image, force=True, hotness_list=hot)


def test_input_list(tree, tmp_path):
    image = tmp_path / "l.dwarfs"
    hoard.create(tree, image, input_list=["readme.txt", "data/x.csv"])
    with hoard.Image(image) as img:
        assert sorted(img.listdir("/")) == ["data", "readme.txt"]
        assert img.listdir("data") == ["x.csv"]
    listing = tmp_path / "list.txt"
    listing.write_text("empty\n")
    hoard.create(tree, image, force=True, input_list=listing)
    with hoard.Image(image) as img:
        assert img.listdir("/") == ["empty"]


def test_times(tree, tmp_path):
    os.utime(tree / "readme.txt", ns=(1_700_000_123_456_789_000,) * 2)
    image = tmp_path / "t.dwarfs"
    hoard.create(tree, image, keep_all_times=True, time_resolution="ms")
    with hoard.Image(image) as img:
        assert img.stat("readme.txt").st_mtime_ns == 1_700_000_123_456_000_000
    hoard.create(tree, image, force=True, time_resolution="min")
    with hoard.Image(image) as img:
        assert img.stat("readme.txt").st_mtime == 1_700_000_123 // 60 * 60
    hoard.create(tree, image, force=True, set_time="2023-11-14T22:13:20")
    with hoard.Image(image) as img:
        assert img.stat("readme.txt").st_mtime == 1_700_000_000
    with pytest.raises(ValueError, match="time-resolution"):
        hoard.create(tree, tmp_path / "x.dwarfs", time_resolution="7ns")


def test_xattr_filter(tree, tmp_path):
    try:
        os.setxattr(tree / "readme.txt", "user.keep", b"1")
        os.setxattr(tree / "readme.txt", "user.drop", b"2")
    except OSError:
        pytest.skip("this file system takes no user extended attributes")
    image = tmp_path / "x.dwarfs"
    hoard.create(tree, image, xattr_filter=r"^user\.keep$")
    with hoard.Image(image) as img:
        assert img.listxattr("readme.txt") == ["user.keep"]
    with pytest.raises(ValueError):
        hoard.create(tree, tmp_path / "y.dwarfs", xattr_filter="(")
