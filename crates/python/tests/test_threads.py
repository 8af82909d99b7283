"""One Image read by 8 threads at once gives every thread the right data,
and a read releases the GIL: a thread doing pure-Python work runs while
another decompresses (checked by what ran, not by how fast)."""

import hashlib
import os
import random
import threading
import time

import hoard


def test_eight_threads_read_correct_data(tree, tmp_path):
    image = tmp_path / "tree.dwarfs"
    hoard.create(tree, image, block_size_bits=16)
    files = [p for p in tree.rglob("*") if p.is_file() and not p.is_symlink()]
    want = {str(p.relative_to(tree)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}
    errors = []
    with hoard.Image(image, cache_size=1 << 16) as img:
        def reader(seed):
            try:
                for i in range(20):
                    for path in sorted(want)[seed % len(want):] + sorted(want)[:seed % len(want)]:
                        with img.open(path) as f:
                            got = hashlib.sha256(f.read()).hexdigest()
                        if got != want[path]:
                            errors.append(f"thread {seed}: {path}")
            except Exception as e:  # reported below
                errors.append(repr(e))

        threads = [threading.Thread(target=reader, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []


def test_reads_release_the_gil(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    # Compressible but not trivially: lzma takes a while to decompress it.
    words = [os.urandom(4).hex() for _ in range(2000)]
    (src / "big.txt").write_text(" ".join(random.Random(1).choices(words, k=1_000_000)))
    image = tmp_path / "big.dwarfs"
    hoard.create(src, image, level=1, compression="lzma:level=1", block_size_bits=24)
    calls = []  # (start, end) of each read, measured in the reading thread
    samples = []  # times at which the main thread ran Python code
    with hoard.Image(image, cache_size=0) as img:
        def reader():
            for _ in range(3):
                start = time.perf_counter()
                img.read("big.txt")
                calls.append((start, time.perf_counter()))

        t = threading.Thread(target=reader)
        t.start()
        n = 0
        while t.is_alive():
            n += 1
            if n % 50 == 0:
                samples.append(time.perf_counter())
        t.join()
    start, end = max(calls, key=lambda c: c[1] - c[0])
    quarter = (end - start) / 4
    # Holding the GIL, a read would let no Python code run in between.
    assert any(start + quarter < s < end - quarter for s in samples), (end - start, len(samples))
