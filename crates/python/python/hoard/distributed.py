"""Build one image on a Dask cluster.

>>> from dask.distributed import Client
>>> import hoard.distributed
>>> with Client("scheduler:8786") as client:
...     hoard.distributed.create("/shared/tree", "/shared/tree.dwarfs", client, shards=64)
...     hoard.distributed.create("s3://bucket/prefix/", "/shared/objects.dwarfs", client)

:func:`create` walks the source tree once (on the calling machine), plans
``shards`` lists of paths of about equal size (bytes, plus a little for
each entry, so that a shard of many small files is not larger than one of
a few big ones; every name of a hard-linked file goes in one shard; the
versions of a file across releases of a tree in one shard: see
:func:`plan`), and has each built into a part image by a Dask task with :func:`hoard.create`
(``input_list`` names the shard's paths), so that a worker's memory is
bounded by its shard. A last task joins the parts with :func:`hoard.merge`
(``union``: shards are disjoint but for the directories above their
files), copying their compressed blocks as they are; files several shards
hold are stored once. The source, the parts' directory and the output
must be paths every worker sees the same (a shared file system).

A source ``s3://bucket/prefix/`` is listed once instead (through the
same S3 client as ``hoard create -i s3://…``, with the environment's
credentials), its keys planned into shards the same way (bytes of each
object, plus ``ENTRY_WEIGHT``), and each worker fetches only its
shard's objects. The output may be an ``s3://bucket/key`` URL too (the
merge uploads it as it writes it); ``parts_dir`` must then be given.

Progress shows on Dask's dashboard (tasks ``hoard-shard-*`` and
``hoard-merge-*``) and, with ``progress``, through a callback. Dask
retries a task whose worker died (``distributed.scheduler.allowed-failures``)
and one that raised (``retries``); a shard that fails for good fails the
build with its error, the other tasks are cancelled, the parts removed,
and no output is written (the merge writes it to a temporary file and
renames it into place when complete).
"""

import itertools
import os
import shutil
import stat
import tempfile
import uuid

__all__ = ["create", "plan"]

# What an entry costs in a shard besides its bytes (its metadata, the
# work of reading it): 200,000 empty files weigh as 100 MB of data.
ENTRY_WEIGHT = 512

# The options of hoard.create that concern the image written, not what
# goes in it: the merge applies them to the output, and no part gets
# them (a signature or recovery data of a part would be dropped by the
# merge, and an encrypted part would need the reader's key to merge).
OUTPUT_OPTIONS = ("sign", "sign_name", "sign_version", "sign_expires",
                  "recovery", "encrypt_to", "passphrase_file", "header",
                  "fsync")


def _walk(top):
    """(relative path, lstat) of every entry below ``top`` (bytes paths, in
    sorted order, directories before what they hold)."""
    stack = [b""]
    root = os.fsencode(top)
    while stack:
        rel = stack.pop()
        with os.scandir(os.path.join(root, rel) if rel else root) as it:
            entries = sorted(it, key=lambda e: e.name)
        below = []
        for e in entries:
            path = rel + b"/" + e.name if rel else e.name
            st = e.stat(follow_symlinks=False)
            yield path, st
            if stat.S_ISDIR(st.st_mode):
                below.append(path)
        stack.extend(reversed(below))


def _is_objects(source):
    """Whether ``source`` is an ``s3://`` URL."""
    return source.startswith("s3://")


def _entries(source):
    """(relative path, weight, hard link) of each entry of ``source``, in
    path order, and their total weight."""
    entries = []
    total = 0
    if _is_objects(source):
        from . import _hoard

        for path, size in _hoard.list_objects(source):
            entries.append((os.fsencode(path), ENTRY_WEIGHT + size, None))
            total += ENTRY_WEIGHT + size
        return entries, total
    if not os.path.isdir(source):
        raise NotADirectoryError(f"{source}: not a directory")
    links = set()
    for path, st in _walk(source):
        weight = ENTRY_WEIGHT
        link = None
        if stat.S_ISREG(st.st_mode):
            if st.st_nlink > 1:
                link = (st.st_dev, st.st_ino)
            # A hard-linked file's bytes count once, with its first name.
            if link is None or link not in links:
                weight += st.st_size
            links.add(link)
        entries.append((path, weight, link))
        total += weight
    return entries, total


def _trunk_len(paths):
    """The length of the directories every path of ``paths`` (those of
    the files with data) starts with, with the slash after them (``usr/``
    for ``usr/bin/...``, ``usr/lib/...``): 0 when the paths branch at the
    top."""
    trunk = None
    for path in paths:
        if trunk is None:
            trunk = path[:path.rfind(b"/") + 1]
        elif not path.startswith(trunk):
            common = os.path.commonprefix([trunk, path])
            trunk = common[:common.rfind(b"/") + 1]
        if not trunk:
            return 0
    return len(trunk or b"")


def _similarity_key(path, trunk):
    """Where ``path`` sorts when similar files are put side by side: by
    the extension of its name, then by its path below the top directory
    (below the trunk), then by that top directory, so that the same file
    of many releases or snapshots of a tree (``2.0/src/a.c``,
    ``2.1/src/a.c``) sort together. One bytes string: ``/`` becomes NUL
    so that paths compare component by component."""
    path = path[trunk:]
    name = path[path.rfind(b"/") + 1:]
    dot = name.rfind(b".")
    extension = name[dot + 1:] if dot > 0 else b""
    top, slash, below = path.partition(b"/")
    if not slash:
        top, below = b"", path
    return extension + b"\0" + below.replace(b"/", b"\0") + b"\0\0" + top


def _unit_of(key):
    """The part of a similarity key the versions of one file share (all
    but the top directory)."""
    return key[:key.index(b"\0\0")]


BY = ("similarity", "path")


def plan(source, shards, by="similarity"):
    """The paths (bytes, relative to ``source``) of each of at most
    ``shards`` shards of the tree at ``source`` (a directory, or an
    ``s3://bucket/prefix/`` whose keys are the paths), of about equal
    weight (bytes of regular files, plus ``ENTRY_WEIGHT`` an entry); all
    names of a hard-linked file are in the shard of its first. Empty
    shards are left out.

    ``by="similarity"`` (the default) cuts the tree in the order that puts
    similar files side by side: by extension, then by the path below the
    top directory, then by top directory, so that the versions of one
    file in many releases or snapshots of a tree (``2.0/src/a.c``,
    ``2.1/src/a.c``, ...; the directories every path starts with
    ignored) are in one shard, where its build's segmenter and compressor
    find what they share; a cut never falls between them. ``by="path"``
    cuts the tree in path order (each shard a stretch of the tree). The
    plan depends only on the paths and sizes, not on the cluster."""
    if shards < 1:
        raise ValueError(f"shards must be at least 1, not {shards}")
    if by not in BY:
        raise ValueError(f"by must be one of {', '.join(BY)}, not {by!r}")
    entries, total = _entries(os.fsdecode(os.fspath(source)))
    lists = [[] for _ in range(shards)]
    shard_of_link = {}
    done = 0
    for unit in _units(entries, by):
        weight = sum(w for _, w, _ in unit)
        # The shard its middle falls in.
        shard = min(shards - 1, (done + weight // 2) * shards // max(total, 1))
        for path, _, link in unit:
            lists[shard if link is None else shard_of_link.setdefault(link, shard)].append(path)
        done += weight
    return [paths for paths in lists if paths] or [[]]


def _units(entries, by):
    """The entries (path, weight, hard link) in the order ``by`` cuts
    them, in units no cut falls in: for ``similarity``, the versions of
    one file (paths of one similarity key but for the top directory)."""
    if by == "path":
        for entry in entries:
            yield [entry]
        return
    trunk = _trunk_len(path for path, weight, _ in entries if weight != ENTRY_WEIGHT)
    keyed = sorted((_similarity_key(entry[0], trunk), entry) for entry in entries)
    for _, unit in itertools.groupby(keyed, key=lambda k: _unit_of(k[0])):
        yield [entry for _, entry in unit]


def _build_shard(source, part, paths_file, level, options):
    """A Dask task: builds the part image ``part`` of the paths listed in
    ``paths_file``; returns the summary of :func:`hoard.create`."""
    import hoard

    return hoard.create(source, part, level, input_list=paths_file, force=True, **options)


def _merge_parts(parts, output, level, force, output_options, *_shard_summaries):
    """A Dask task, run once every shard is built (their summaries are
    passed to order it after them): joins the parts into ``output``,
    with ``output_options`` (see ``OUTPUT_OPTIONS``)."""
    import hoard

    return hoard.merge(parts, output, union=True, level=level, force=force,
                       **output_options)


def create(source, output, client, shards=None, level=7, retries=2,
           parts_dir=None, progress=None, force=False, by="similarity", **options):
    """Builds the image ``output`` (a path, or an ``s3://bucket/key`` URL)
    of the directory ``source`` (or the objects under an
    ``s3://bucket/prefix/``) on the Dask cluster of ``client`` (a ``dask.distributed.Client``), in ``shards``
    parts (default: twice the workers' threads); returns the summary of the
    merge (files, original_bytes, duplicate_files, image_bytes, ...) with
    ``shards`` (the summaries of the parts' builds) added.

    ``level`` and ``options`` (those of :func:`hoard.create`, less
    ``input_list`` and ``base``) apply to every part, but for those of the image
    written (sign and its sign_name, sign_version, sign_expires, recovery,
    encrypt_to, passphrase_file, header, fsync),
    which the merge applies to the output alone: the parts are plain
    images, readable like the source they are made of, and the key file
    ``sign`` names must be readable where the merge task runs. With
    ``trust`` (public key files), the parts are signed with ``sign`` too
    (readable then by every worker), and the merge reads each only if
    signed by a trusted key, every block checked against the signature:
    a part changed on the shared file system fails the build. ``retries`` is how many times
    Dask runs a failing task again. The parts are written to a new
    directory in ``parts_dir`` (default: beside ``output``), removed at
    the end. ``progress``, if given, is called on this machine with
    ``(tasks_done, tasks)`` as tasks finish. ``by`` is how the tree is cut
    into shards (see :func:`plan`): ``similarity`` puts the versions of a
    file together, which on many releases of a tree makes the image about
    the size of one machine's; ``path`` cuts it in path order.
    """
    if "input_list" in options:
        raise TypeError("create() plans the shards itself: input_list is not an option")
    if options.get("base"):
        # Each shard's layer would take what the other shards hold for
        # deleted.
        raise TypeError("create() builds whole images: a layer on base images "
                        "is built with hoard.create(..., base=...)")
    output_options = {k: options.pop(k) for k in OUTPUT_OPTIONS if k in options}
    trust = options.pop("trust", None)
    if trust is not None:
        # The merge reads the parts only if signed by a trusted key: each
        # part is signed with the output's key, which trust must name.
        if output_options.get("sign") is None:
            raise TypeError("trust checks the parts the merge reads: give sign too "
                            "(a key trust names), which signs them")
        options["sign"] = output_options["sign"]
        output_options["trust"] = trust
    source = os.fsdecode(os.fspath(source))
    output = os.fsdecode(os.fspath(output))
    if _is_objects(output):
        if parts_dir is None:
            raise ValueError("an s3:// output needs parts_dir (a directory every worker sees)")
    else:
        output = os.path.abspath(output)
        if os.path.exists(output) and not force:
            raise FileExistsError(f"{output}: exists (force=True overwrites it)")
    if shards is None:
        shards = 2 * max(1, sum(client.nthreads().values()))
    lists = plan(source, shards, by)
    where = parts_dir if parts_dir is not None else os.path.dirname(output)
    work = tempfile.mkdtemp(prefix=".hoard-parts-", dir=where)
    token = uuid.uuid4().hex[:12]
    futures = []
    try:
        parts = []
        for i, paths in enumerate(lists):
            listing = os.path.join(work, f"part-{i:05}.list")
            with open(listing, "wb") as f:
                f.write(b"".join(p + b"\n" for p in paths))
            part = os.path.join(work, f"part-{i:05}.dwarfs")
            parts.append(part)
            futures.append(client.submit(
                _build_shard, source, part, listing, level, options,
                key=f"hoard-shard-{i}-{token}", retries=retries, pure=False))
        merged = client.submit(
            _merge_parts, parts, output, level, force, output_options, *futures,
            key=f"hoard-merge-{token}", retries=retries, pure=False)
        futures.append(merged)
        _wait(futures, progress)
        summary = merged.result()
        summary["shards"] = [f.result() for f in futures[:-1]]
        return summary
    finally:
        client.cancel(futures)
        shutil.rmtree(work, ignore_errors=True)


def _wait(futures, progress):
    """Waits for every task, calling ``progress``; the first task that
    fails for good raises its error."""
    from dask.distributed import as_completed

    done = 0
    for future in as_completed(futures):
        if future.status != "finished":
            future.result()
        done += 1
        if progress is not None:
            progress(done, len(futures))
