"""hoard.merge, and hoard.distributed.create on a real dask.distributed
LocalCluster of two worker processes: a 200,000-file tree built in 8
shards, one worker killed while it builds one, equals its source through
a FUSE mount and passes DwarFS's ``dwarfsck --check-integrity``; a shard
that fails for good fails the build with its error and leaves nothing;
releases of a tree sharded by similarity keep each file's versions in
one shard, for an image a fraction of the one sharded by path."""

import os
import random
import signal
import subprocess
import threading
import time

import pytest
from dask.distributed import Client, LocalCluster

import hoard
import hoard.distributed
from conftest import dwarfs_tool, hoard_bin, skipped
from test_create import image_contents, tree_contents


@pytest.fixture(scope="module")
def client():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as cluster, Client(cluster) as c:
        yield c


def many_files(root, dirs=200, per_dir=1000):
    """``dirs * per_dir`` tiny files, some duplicates across the tree, a
    few larger ones, a hard link, a symlink and an empty directory."""
    for d in range(dirs):
        sub = root / f"d{d:03}"
        sub.mkdir(parents=True)
        for i in range(per_dir):
            (sub / f"f{i:04}").write_bytes(b"%d\n" % (i if d % 2 else d * per_dir + i))
    (root / "big").mkdir()
    for n in range(4):
        (root / "big" / f"noise{n}").write_bytes(os.urandom(300_000))
    os.link(root / "big" / "noise0", root / "big" / "noise0.link")
    os.symlink("big/noise1", root / "noise1.sym")
    (root / "empty").mkdir()


def kill_a_busy_worker(client, killed):
    """SIGKILLs the first worker seen building a shard (its nanny starts
    another); records its address in ``killed``."""
    pids = client.run(os.getpid)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        for worker, keys in client.processing().items():
            if any(str(k).startswith("hoard-shard") for k in keys):
                os.kill(pids[worker], signal.SIGKILL)
                killed.append(worker)
                return
        time.sleep(0.02)


def test_plan_balances_bytes_and_keeps_hard_links_together(tmp_path):
    root = tmp_path / "t"
    root.mkdir()
    for i in range(40):
        (root / f"f{i:02}").write_bytes(b"x" * 10_000)
    os.link(root / "f00", root / "z-link")
    lists = hoard.distributed.plan(root, 4)
    assert len(lists) == 4
    names = sorted(p for paths in lists for p in paths)
    assert names == sorted(os.fsencode(n) for n in os.listdir(root))
    assert any(b"f00" in paths and b"z-link" in paths for paths in lists)
    sizes = [len(paths) for paths in lists]
    assert max(sizes) - min(sizes) <= 2, sizes


def releases(root, count=4, files=12):
    """``count`` releases of a tree below ``root/project`` (a trunk the
    plan looks below): ``files`` files of 20,000 incompressible bytes, each
    a little changed from one release to the next, in ``src/`` and
    ``doc/``."""
    rng = random.Random(47)
    contents = [bytearray(rng.randbytes(20_000)) for _ in range(files)]
    for r in range(count):
        for i, data in enumerate(contents):
            data[rng.randrange(len(data))] = rng.randrange(256)
            path = root / "project" / f"v1.{r}" / ("src" if i % 2 else "doc") / f"f{i:02}.c"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)


def test_plan_by_similarity_keeps_the_versions_of_a_file_together(tmp_path):
    releases(tmp_path / "t")
    lists = hoard.distributed.plan(tmp_path / "t", 3)
    assert lists == hoard.distributed.plan(tmp_path / "t", 3)
    assert len(lists) == 3
    shard_of = {}
    for shard, paths in enumerate(lists):
        for path in paths:
            parts = path.split(b"/")
            if len(parts) == 4:  # project/v1.R/src/fNN.c
                shard_of.setdefault(parts[2] + b"/" + parts[3], set()).add(shard)
    assert len(shard_of) == 12
    assert all(len(shards) == 1 for shards in shard_of.values()), shard_of
    by_path = hoard.distributed.plan(tmp_path / "t", 3, by="path")
    assert sorted(p for ps in by_path for p in ps) == sorted(p for ps in lists for p in ps)
    with pytest.raises(ValueError, match="by must be one of"):
        hoard.distributed.plan(tmp_path / "t", 3, by="size")


def test_shards_by_similarity_make_a_smaller_image_equal_to_the_tree(tmp_path, client):
    src = tmp_path / "src"
    releases(src)
    sizes = {}
    for by in ("similarity", "path"):
        out = tmp_path / f"{by}.dwarfs"
        summary = hoard.distributed.create(src, out, client, shards=4, level=3, by=by)
        assert len(summary["shards"]) == 4
        with hoard.Image(out) as img:
            assert image_contents(img) == tree_contents(src)
        sizes[by] = os.path.getsize(out)
    # By path, each release is a shard of its own and no shard finds what
    # the releases share; by similarity, each file's versions are in one.
    assert sizes["similarity"] * 2 < sizes["path"], sizes


def test_merge_joins_images(tmp_path, tree):
    a, b = tmp_path / "a.dwarfs", tmp_path / "b.dwarfs"
    hoard.create(tree, a)
    hoard.create(tree, b)
    out = tmp_path / "ab.dwarfs"
    summary = hoard.merge([a, b], out)
    assert summary["duplicate_files"] > 0
    with hoard.Image(out) as img:
        got = image_contents(img)
    want = tree_contents(tree)
    for part in ("a", "b"):
        assert {k[len(part) + 1:]: v for k, v in got.items() if k.startswith(part + "/")} == want
    with pytest.raises(hoard.ImageError, match="is in more than one of the trees"):
        hoard.merge([a, b], tmp_path / "u.dwarfs", union=True)
    assert not (tmp_path / "u.dwarfs").exists()


def test_200000_files_in_8_shards_with_a_worker_killed(tmp_path, client):
    src = tmp_path / "src"
    many_files(src)
    out = tmp_path / "out" / "tree.dwarfs"
    out.parent.mkdir()
    killed = []
    killer = threading.Thread(target=kill_a_busy_worker, args=(client, killed))
    killer.start()
    done = []
    summary = hoard.distributed.create(src, out, client, shards=8, level=3,
                                       progress=lambda n, total: done.append((n, total)))
    killer.join()
    assert killed, "no worker was seen building a shard"
    assert len(summary["shards"]) == 8
    assert done[-1] == (9, 9)
    assert summary["files"] == 200_000 + 4
    assert sorted(os.listdir(out.parent)) == ["tree.dwarfs"]

    tool = dwarfs_tool("dwarfsck")
    if tool:
        check = subprocess.run([tool, "--check-integrity", "-i", str(out)],
                               capture_output=True, text=True)
        assert check.returncode == 0, check.stderr
    else:
        skipped("test_200000_files_in_8_shards_with_a_worker_killed",
                "DwarFS 0.15.3 tools in ../shared missing: no dwarfsck")
    binary = hoard_bin()
    if not binary or not os.path.exists("/dev/fuse"):
        skipped("test_200000_files_in_8_shards_with_a_worker_killed",
                "no hoard binary ($HOARD_BIN) or /dev/fuse: compared through hoard.Image")
        with hoard.Image(out) as img:
            assert image_contents(img) == tree_contents(src)
        return
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    subprocess.run([binary, "mount", str(out), str(mnt)], check=True)
    try:
        diff = subprocess.run([binary, "diff", str(src), str(mnt), "--ignore", "mtime_ns"],
                              capture_output=True, text=True)
        assert diff.returncode == 0, diff.stdout[-2000:] + diff.stderr
    finally:
        subprocess.run(["fusermount3", "-u", str(mnt)], check=False)


def test_a_shard_failing_for_good_fails_the_build(tmp_path, client, tree):
    out = tmp_path / "out" / "x.dwarfs"
    out.parent.mkdir()
    with pytest.raises(hoard.ImageError, match="bogus"):
        hoard.distributed.create(tree, out, client, shards=3, retries=1,
                                 compression="bogus")
    assert os.listdir(out.parent) == []
    with pytest.raises(TypeError, match="a layer on base images"):
        hoard.distributed.create(tree, out, client, base=[out])


def test_a_signed_encrypted_output_is_signed_and_encrypted_by_the_merge(
        tmp_path, client, tree):
    key = tmp_path / "signer"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "t",
                    "-f", str(key)], check=True)
    identity = tmp_path / "id"
    made = subprocess.run(["age-keygen", "-o", str(identity)], check=True,
                          capture_output=True, text=True)
    recipient = made.stderr.strip().removeprefix("Public key: ")
    out = tmp_path / "out" / "x.dwarfs"
    out.parent.mkdir()
    public = f"{key}.pub"
    # Parts checked by the merge are signed parts: trust needs sign.
    with pytest.raises(TypeError, match="give sign too"):
        hoard.distributed.create(tree, out, client, trust=[public])
    hoard.distributed.create(tree, out, client, shards=2, level=1, sign=key,
                             trust=[public], encrypt_to=[recipient], recovery=5)
    assert os.listdir(out.parent) == ["x.dwarfs"]
    with pytest.raises(hoard.ImageError, match="encrypted"):
        hoard.Image(out)
    with hoard.Image(out, identity=[identity], trust=[public]) as img:
        assert image_contents(img) == tree_contents(tree)
        assert img.info()["has_recovery_data"]


def test_a_prefix_of_objects_builds_on_the_cluster_as_those_objects(client, tmp_path, moto_env):
    """``s3://bucket/prefix/`` as the source: the keys are planned into
    shards on this machine, each worker fetches only its shard's objects
    (``hoard.create`` from S3 with an input list), and the merged image
    holds every object, byte for byte, at its key; the same merge also
    goes straight to S3."""
    import boto3

    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="data")
    objects = {}
    for d in range(6):
        for i in range(50):
            key = f"d{d}/sub{i % 3}/f{i:03}"
            objects[key] = b"%d %d\n" % (d, i) * (1 + i * 7) if i % 5 else b"same\n"
            s3.put_object(Bucket="data", Key=f"tree/{key}", Body=objects[key])
    client.run(os.environ.update, moto_env)
    out = tmp_path / "objects.dwarfs"
    summary = hoard.distributed.create("s3://data/tree/", out, client, shards=4, level=1)
    assert len(summary["shards"]) == 4
    assert sum(s["files"] for s in summary["shards"]) == len(objects)
    with hoard.Image(out) as img:
        files = {path: c[2] for path, c in image_contents(img).items() if c[0] == "f"}
    assert files == objects
    hoard.distributed.create("s3://data/tree/", "s3://data/objects.dwarfs", client,
                             shards=3, level=1, parts_dir=tmp_path)
    s3.download_file("data", "objects.dwarfs", str(tmp_path / "fetched.dwarfs"))
    with hoard.Image(tmp_path / "fetched.dwarfs") as img:
        files = {path: c[2] for path, c in image_contents(img).items() if c[0] == "f"}
    assert files == objects
    assert "Uploads" not in s3.list_multipart_uploads(Bucket="data")
