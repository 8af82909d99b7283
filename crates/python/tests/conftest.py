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


@pytest.fixture
def moto_env():
    """A moto S3 server on 127.0.0.1 (stopped after the test), and the
    environment that points hoard's S3 client at it with test
    credentials; the test is skipped when moto is not installed."""
    import socket
    import subprocess
    import sys
    import time

    try:
        import boto3  # noqa: F401
        import moto.server  # noqa: F401
    except ImportError:
        skipped("moto_env", "moto missing (scripts/install-deps.sh installs it)")
        pytest.skip("moto missing")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    env = {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield env
    finally:
        server.kill()
        server.wait()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
