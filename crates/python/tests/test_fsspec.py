"""The fsspec protocol hoard:// (found through the package's entry point)
lets fsspec and pandas read files inside an image."""

import fsspec
import pandas

import hoard


def test_pandas_reads_a_csv_in_an_image(tree, tmp_path):
    image = tmp_path / "tree.dwarfs"
    hoard.create(tree, image)
    df = pandas.read_csv(f"hoard://data/x.csv::file://{image}")
    assert list(df.columns) == ["name", "value"]
    assert len(df) == 500 and df["value"].iloc[-1] == 499 * 499
    with fsspec.open(f"hoard://readme.txt::file://{image}", "rt") as f:
        assert f.readline() == "hello from hoard\n"


def test_filesystem_lists_and_reads(tree, tmp_path):
    image = tmp_path / "tree.dwarfs"
    hoard.create(tree, image)
    fs = fsspec.filesystem("hoard", fo=str(image))
    assert sorted(fs.ls("data", detail=False)) == ["data/copy.bin", "data/deep", "data/x.csv"]
    assert fs.info("data/deep")["type"] == "directory"
    assert fs.info("data/x.csv")["size"] == (tree / "data" / "x.csv").stat().st_size
    assert fs.cat_file("readme.txt", start=6, end=10) == b"from"
    assert sorted(fs.find("data")) == ["data/copy.bin", "data/deep/noise.bin", "data/x.csv"]
    assert fs.glob("**/*.csv") == ["data/x.csv", "link.csv"]
    with fs.open("data/deep/noise.bin") as f:
        f.seek(1000)
        assert f.read(100) == (tree / "data" / "deep" / "noise.bin").read_bytes()[1000:1100]
