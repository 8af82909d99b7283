"""hoard.Image([base, layer]) reads a stack as one tree: a plain layer and
a delta layer made with hoard.create(..., base=...) read back as their
source, byte for byte; a delta layer without its base, or on another
image, is refused with a one-line ImageError."""

import os
import shutil

import pytest

import hoard
from test_create import image_contents, tree_contents


@pytest.fixture
def layers(tree, tmp_path):
    """A base image of ``tree``, the tree changed (a file grown, one
    edited, one added, one removed), and plain and delta layers of the
    change on the base."""
    base = tmp_path / "base.dwarfs"
    hoard.create(tree, base, level=3, block_size_bits=16)
    new = tmp_path / "new"
    shutil.copytree(tree, new, symlinks=True)
    with open(new / "data" / "x.csv", "a") as f:
        f.write("".join(f"row{i},{i * 3}\n" for i in range(500, 700)))
    noise = bytearray((new / "data" / "deep" / "noise.bin").read_bytes())
    noise[1000:1010] = b"0123456789"
    (new / "data" / "deep" / "noise.bin").write_bytes(bytes(noise))
    (new / "added.txt").write_text("a new file\n" * 50)
    os.remove(new / "empty")
    plain = tmp_path / "plain.dwarfs"
    delta = tmp_path / "delta.dwarfs"
    hoard.create(new, plain, level=3, block_size_bits=16, base=base)
    hoard.create(new, delta, level=3, block_size_bits=16, base=[base], delta=True)
    return base, new, plain, delta


@pytest.mark.parametrize("kind", ["plain", "delta"])
def test_stack_reads_as_the_tree(layers, tmp_path, kind):
    base, new, plain, delta = layers
    top = plain if kind == "plain" else delta
    with hoard.Image([base, top], cache_size=1 << 20) as img:
        assert [os.fspath(p) for p in img.paths] == [str(base), str(top)]
        assert image_contents(img) == tree_contents(new)
        with img.open("data/deep/noise.bin") as f:
            f.seek(995)
            assert f.read(20) == (new / "data" / "deep" / "noise.bin").read_bytes()[995:1015]
        assert img.info()["layers"] == img.paths
        assert img.check(full=True)["ok"]
        out = tmp_path / "out"
        img.extract(out)
    assert tree_contents(out) == tree_contents(new)


def test_delta_layer_needs_its_base(layers, tmp_path, tree):
    base, new, plain, delta = layers
    with pytest.raises(hoard.ImageError) as alone:
        hoard.Image(delta)
    assert "delta layer" in str(alone.value) and "\n" not in str(alone.value)
    other = tmp_path / "other.dwarfs"
    hoard.create(new, other, level=1)
    with pytest.raises(hoard.ImageError) as wrong:
        hoard.Image([other, delta])
    assert "another image" in str(wrong.value) and "\n" not in str(wrong.value)
