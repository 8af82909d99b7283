"""Errors are the usual Python exceptions; bad images raise
hoard.ImageError with the reader's message, never crash."""

import errno

import pytest

import hoard
from conftest import IMAGES, all_images, images


@pytest.fixture
def img():
    with hoard.Image(IMAGES / "compat" / "compat-v0.9.10.dwarfs") as img:
        yield img


def test_missing_entries_and_wrong_kinds(img):
    a_file = next(f"{d}/{n}" for d, _, names in img.walk() for n in names if img.isfile(f"{d}/{n}"))
    with pytest.raises(FileNotFoundError) as e:
        img.stat("no/such/entry")
    assert e.value.filename == "no/such/entry"
    with pytest.raises(FileNotFoundError):
        img.read("nope")
    with pytest.raises(NotADirectoryError):
        img.listdir(a_file)
    with pytest.raises(IsADirectoryError):
        img.read("/")
    with pytest.raises(IsADirectoryError):
        img.open("/")
    with pytest.raises(OSError) as e:
        img.readlink(a_file)
    assert e.value.errno == errno.EINVAL
    with pytest.raises(ValueError):
        img.open(a_file, "wb")


def test_closed_image_refuses_reads():
    img = hoard.Image(images("compat")[0])
    img.close()
    assert img.closed
    with pytest.raises(ValueError):
        img.listdir("/")


def test_missing_and_non_image_files(tmp_path):
    with pytest.raises(FileNotFoundError):
        hoard.Image(tmp_path / "missing.dwarfs")
    junk = tmp_path / "junk.dwarfs"
    junk.write_bytes(b"this is not an image" * 100)
    with pytest.raises(hoard.ImageError) as e:
        hoard.Image(junk)
    assert "junk.dwarfs" in str(e.value) and str(e.value).count("\n") == 0
    assert issubclass(hoard.ImageError, OSError)


def test_unknown_feature_is_named():
    image = IMAGES / "misc" / "future-features.dwarfs"
    with pytest.raises(hoard.ImageError, match="this-feature-will-never-exist"):
        hoard.Image(image)


def read_everything(img):
    for dirpath, _, filenames in img.walk():
        for name in filenames:
            path = f"{dirpath}/{name}"
            img.lstat(path)
            if img.isfile(path):
                img.read(path)


@pytest.mark.parametrize("image", all_images("badfs")[:60], ids=lambda p: p.name)
def test_bad_images_raise_image_error(image):
    """Each fuzzed image fails to open, or its full check finds problems;
    reading it raises ImageError (or the OSError of a missing or
    wrong-kind entry it claims), nothing else."""
    try:
        img = hoard.Image(image)
    except hoard.ImageError as e:
        assert str(e)
        return
    with img:
        report = img.check(full=True)
        assert not report["ok"] and report["problems"], image
        try:
            read_everything(img)
        except OSError:
            pass
