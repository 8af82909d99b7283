"""Read and build DwarFS images.

>>> import hoard
>>> with hoard.Image("data.dwarfs") as img:
...     for dirpath, dirnames, filenames in img.walk():
...         print(dirpath, filenames)
...     data = img.read("docs/readme.txt")
...     with img.open("big.bin") as f:
...         f.seek(1 << 20)
...         chunk = f.read(4096)
>>> hoard.create("tree/", "tree.dwarfs", level=7)

Paths inside an image are relative to its root ("a/b" and "/a/b" are the
same); they may be str, bytes or os.PathLike. An ``Image`` may be used by
many threads at once: every read releases the GIL while it decompresses.
Errors are ``FileNotFoundError``, ``NotADirectoryError``,
``IsADirectoryError``, ``OSError`` as for files on disk, and
``hoard.ImageError`` (an ``OSError``) for damaged or unreadable images.
"""

import io
import os
import stat as _stat

from . import _hoard
from ._hoard import ImageError

__all__ = ["Image", "ImageFile", "ImageError", "create", "merge", "rewrite"]


def _stat_result(t):
    mode, ino, nlink, uid, gid, size, atime, mtime, ctime, rdev, blocks, blksize = t
    ns = [sec * 1_000_000_000 + nsec for sec, nsec in (atime, mtime, ctime)]
    return os.stat_result(
        (mode, ino, 0, nlink, uid, gid, size, atime[0], mtime[0], ctime[0])
        + tuple(n / 1e9 for n in ns)
        + tuple(ns)
        + (blksize, blocks, rdev)
    )


def _p(path):
    """A path as the str the core takes (bytes decoded as os.fsdecode does,
    so any name round-trips)."""
    return os.fsdecode(os.fspath(path))


def _join(top, name):
    sep = b"/" if isinstance(top, bytes) else "/"
    return top.rstrip(sep) + sep + name


class Image:
    """An open DwarFS image, or a stack of images read as one tree.

    ``Image(path, offset="auto", cache_size=None, trust=None,
    identity=None, passphrase_file=None, force_stack=False,
    expect_name=None, min_version=None)`` opens the
    image file ``path``. ``path`` may also be a list of image files, bottom
    layer first, read as one tree as ``hoard mount LOWER... UPPER`` shows
    it (overlayfs rules; a ``--delta`` layer reads only on exactly the
    bases it was made on, and a layer made on other images is refused
    unless ``force_stack``); the options apply to every layer and the
    layers share one block cache. ``offset`` is ``"auto"`` (find the image after
    any header, such as a shell script) or the byte offset where it
    starts; ``cache_size`` the bytes of decompressed blocks kept in memory
    (default 512 MiB); ``trust`` a list of public key files (``hoard
    keygen``'s or OpenSSH's): the image must be signed by one of their
    keys, and every block is checked against the signature before use,
    an expired signature is refused, and ``expect_name`` and
    ``min_version`` are the name and least version it must claim;
    ``identity`` a list of identity files (``age-keygen``'s or OpenSSH
    private keys) and ``passphrase_file`` a file holding a passphrase, one
    of which opens an encrypted image. Use it as a context manager, or call ``close()``. Raises
    ``FileNotFoundError`` for a missing file and ``ImageError`` when it is
    not a readable image (or not signed by a trusted key, or encrypted
    and not opened by the identities given), or the layers do not stack.
    """

    def __init__(self, path, offset="auto", cache_size=None, trust=None,
                 identity=None, passphrase_file=None, force_stack=False,
                 expect_name=None, min_version=None):
        if trust is not None:
            trust = [os.fspath(t) for t in trust]
        if identity is not None:
            identity = [os.fspath(i) for i in identity]
        if passphrase_file is not None:
            passphrase_file = os.fspath(passphrase_file)
        paths = list(path) if isinstance(path, (list, tuple)) else [path]
        self._core = _hoard.Image([os.fspath(p) for p in paths], offset, cache_size, trust,
                                  identity, passphrase_file, force_stack, expect_name,
                                  min_version)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        state = "closed" if self.closed else "open"
        names = ", ".join(repr(os.fspath(p)) for p in self.paths)
        return f"<hoard.Image {names} ({state})>"

    @property
    def path(self):
        """The image file's path (in a stack, the top layer's)."""
        return self._core.paths[-1]

    @property
    def paths(self):
        """The image files, bottom layer first (one for a single image)."""
        return self._core.paths

    @property
    def closed(self):
        """Whether the image was closed."""
        return self._core.closed

    def close(self):
        """Closes the image; reads under way in other threads finish first."""
        self._core.close()

    def stat(self, path):
        """The attributes of ``path``, following symlinks inside the image,
        as an ``os.stat_result`` (st_mode, st_ino, st_nlink, st_uid, st_gid,
        st_size, st_atime/st_mtime/st_ctime and their ``_ns`` forms,
        st_rdev, st_blocks, st_blksize; st_dev is 0)."""
        return _stat_result(self._core.stat(_p(path), True))

    def lstat(self, path):
        """Like ``stat``, but a symlink is described itself, not followed."""
        return _stat_result(self._core.stat(_p(path), False))

    def exists(self, path):
        """Whether ``path`` exists (following symlinks: a dangling one does not)."""
        try:
            self._core.lookup(_p(path), True)
            return True
        except (FileNotFoundError, NotADirectoryError):
            return False

    def isdir(self, path):
        """Whether ``path`` is a directory (following symlinks)."""
        try:
            return _stat.S_ISDIR(self.stat(path).st_mode)
        except (FileNotFoundError, NotADirectoryError):
            return False

    def isfile(self, path):
        """Whether ``path`` is a regular file (following symlinks)."""
        try:
            return _stat.S_ISREG(self.stat(path).st_mode)
        except (FileNotFoundError, NotADirectoryError):
            return False

    def listdir(self, path="/"):
        """The names in directory ``path``, in stored (sorted) order, without
        ``.`` and ``..``; bytes names for a bytes path, as ``os.listdir``."""
        names = [os.fspath(name) for name, _, _ in self._core.scandir(_p(path))]
        if isinstance(path, bytes):
            return [os.fsencode(n) for n in names]
        return names

    def walk(self, top="/"):
        """Yields ``(dirpath, dirnames, filenames)`` for each directory from
        ``top`` down, like ``os.walk`` (top-down; prune by editing
        ``dirnames``). Symlinks are listed in ``filenames`` and not followed."""
        try:
            entries = self._core.scandir(_p(top))
        except OSError:
            return
        dirs, files = [], []
        for name, _, mode in entries:
            name = os.fsencode(name) if isinstance(top, bytes) else os.fspath(name)
            (dirs if _stat.S_ISDIR(mode) else files).append(name)
        yield top, dirs, files
        for d in dirs:
            yield from self.walk(_join(top, d))

    def readlink(self, path):
        """The target of symlink ``path`` (``OSError`` EINVAL if not one)."""
        target = os.fspath(self._core.readlink(_p(path)))
        return os.fsencode(target) if isinstance(path, bytes) else target

    def read(self, path, offset=0, size=None):
        """The contents of file ``path`` (symlinks followed) as bytes: all
        of it, or ``size`` bytes from ``offset``."""
        return self._core.pread(self._file_inode(path), offset, size)

    def open(self, path, mode="rb", buffering=-1):
        """Opens file ``path`` for reading: a seekable binary file
        (``io.RawIOBase``: read, readinto, seek, tell), or with
        ``buffering`` > 0 an ``io.BufferedReader`` over it. Only mode
        ``"rb"`` (or ``"r"``, also binary) is supported."""
        if mode not in ("r", "rb"):
            raise ValueError(f"invalid mode {mode!r}: images are read-only and binary")
        raw = ImageFile(self, path)
        return io.BufferedReader(raw, buffering) if buffering > 0 else raw

    def getxattr(self, path, name, follow_symlinks=True):
        """The value (bytes) of extended attribute ``name`` of ``path``
        (``OSError`` ENODATA when it has none of that name)."""
        return self._core.getxattr(_p(path), name, follow_symlinks)

    def listxattr(self, path, follow_symlinks=True):
        """The names of the extended attributes stored for ``path``."""
        return self._core.listxattr(_p(path), follow_symlinks)

    def extract(self, dest, patterns=None, *, owners=None, xattrs=True, devices=True,
                specials=True):
        """Writes the image's tree, or the entries matching ``patterns``
        (with the directories leading to them), into directory ``dest``
        (created if missing), as ``hoard extract`` does: contents, hard
        links, symlinks, modes, times, extended attributes (as root all of
        them, otherwise ``user.*`` ones; none if not ``xattrs``), owners
        (``owners``: by default only as root), devices (only as root; none
        if not ``devices``), fifos and sockets (none if not ``specials``).

        ``patterns`` is a glob or a list of globs matched against paths
        relative to the image's root: ``*`` stays within one path
        component, ``**`` crosses them, ``i:`` in front matches case
        insensitively. Nothing is written outside ``dest``: an existing
        symlink in the way is replaced, never followed. Raises
        ``ValueError`` for an invalid pattern, ``OSError`` (with the
        system's error number) when an entry cannot be written, and
        ``ImageError`` when the image cannot be read. The GIL is released
        while it works; files are written in parallel.
        """
        if isinstance(patterns, (str, bytes)):
            patterns = [patterns]
        patterns = [os.fsdecode(p) for p in patterns or []]
        self._core.extract(os.fsdecode(os.fspath(dest)), patterns, owners, xattrs, devices, specials)

    def check(self, full=False):
        """Verifies the image as ``hoard check`` does (``full`` also reads
        every block and file). Returns a dict: ``ok``, ``problems`` (one
        line each), ``sections``, ``blocks``, ``inodes``. On a stack each
        layer is checked alone (a delta layer's files read only on its
        bases, which the open already checked): problems start with the
        layer's path, and the counts are summed."""
        return self._core.check(full)

    def info(self):
        """Facts about the image as a dict: path, layers (every path,
        bottom first), format_version, image_offset, file_size, block_size,
        blocks, inodes, total_fs_size, sections, categories, has_xattrs,
        has_recovery_data. On a stack they are the top layer's."""
        return self._core.info()

    def history(self):
        """Every write and rewrite of the image (on a stack, the top
        layer), oldest first, as dicts:
        version, git_desc, system, compiler, arguments (the command line,
        or the ``hoard.create``/``hoard.rewrite`` call), timestamp
        (seconds, or None), libraries. Empty when none was recorded."""
        return self._core.history()

    def _file_inode(self, path):
        ino = self._core.lookup(_p(path), True)
        mode = self._core.stat(_p(path), True)[0]
        if _stat.S_ISDIR(mode):
            raise IsADirectoryError(21, "Is a directory", os.fsdecode(path))
        if not _stat.S_ISREG(mode):
            raise OSError(22, "Not a regular file", os.fsdecode(path))
        return ino


class ImageFile(io.RawIOBase):
    """A file inside an image, open for reading (from ``Image.open``):
    seekable, binary, unbuffered. Each read releases the GIL."""

    def __init__(self, image, path):
        super().__init__()
        self._image = image
        self.name = path
        self._ino = image._file_inode(path)
        self._size = image._core.stat(_p(path), True)[5]
        self._pos = 0

    def readable(self):
        return True

    def seekable(self):
        return True

    def readinto(self, b):
        """Reads up to ``len(b)`` bytes into ``b``; returns how many."""
        self._checkClosed()
        with memoryview(b) as view, view.cast("B") as out:
            data = self._image._core.pread(self._ino, self._pos, len(out))
            out[: len(data)] = data
        self._pos += len(data)
        return len(data)

    def readall(self):
        """The rest of the file, in one read."""
        self._checkClosed()
        data = self._image._core.pread(self._ino, self._pos, None)
        self._pos += len(data)
        return data

    def seek(self, offset, whence=io.SEEK_SET):
        """Moves to ``offset`` from the start, the current position or the
        end (``whence``); returns the new position."""
        self._checkClosed()
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        if base + offset < 0:
            raise OSError(22, "Invalid argument: negative seek position")
        self._pos = base + offset
        return self._pos

    def tell(self):
        """The current position."""
        self._checkClosed()
        return self._pos

    @property
    def size(self):
        """The file's size in bytes."""
        return self._size


def _input_list(value):
    """The ``input_list`` option as the bytes of a list file: the list's
    paths one a line, or the contents of the file it names."""
    if isinstance(value, (str, os.PathLike)):
        with open(value, "rb") as f:
            return f.read()
    return b"\n".join(os.fsencode(p) for p in value) + b"\n"


def create(source_dir, image_path, level=7, progress=None, **options):
    """Builds the image ``image_path`` from the directory (or tar/cpio
    archive) ``source_dir`` at compression ``level`` 0 to 9; returns a dict
    summary (files, original_bytes, image_bytes, warnings, ...). As for
    ``hoard create``, the source may be ``s3://bucket/prefix/`` (its
    objects) or a remote archive's URL, and ``image_path`` an
    ``s3://bucket/key`` (uploaded as it is written, completed only when
    the build succeeds).

    ``options`` are those of ``hoard create``, named as its long options
    with ``_`` for ``-``: force, fsync, block_size_bits, metadata_compression,
    schema_compression, categorize (True, False or a list string),
    hotness_list (a file of paths, for ``categorize="hotness"``: those
    files first, in its order, in blocks of their own),
    incompressible_min_input_size, incompressible_block_size,
    incompressible_fragments, incompressible_ratio,
    incompressible_zstd_level, no_category_names, no_category_metadata,
    num_workers, memory_limit (bytes), with_devices, with_specials,
    remove_empty_dirs, no_xattrs, xattr_filter (a regular expression),
    no_sparse_files, input_list (paths to pack, relative to
    ``source_dir``: a list, or the path of a file listing them one a line),
    filter (list of rules), set_owner, set_group, set_time (seconds,
    ``"now"`` or an ISO 8601 date), keep_all_times, time_resolution
    (``"ms"``, ``"15min"``, ...), chmod, pack_metadata, no_history,
    no_history_timestamps, no_create_timestamp, no_section_index, recovery
    (percent), header (bytes or a file path), sign (a secret key file:
    the image is signed with it) with sign_name, sign_version and
    sign_expires (what the signature also signs: a name, an unsigned
    version, an RFC 3339 date or time after which readers refuse it, as
    ``hoard create --sign-name`` etc.), encrypt_to (a list of age or SSH public
    keys, or files of them: the image is encrypted to them) or
    passphrase_file (a file whose first line is the passphrase the image
    is encrypted with), base (an image path or a list, lowest first: write
    a layer of what changed on them, as ``hoard create --base``) with
    delta (new data may refer to the bases' bytes; the layer then reads
    only on them), trust_mtime, opaque_dirs, metacopy, force_stack, and
    for encrypted bases identity (a list of age or OpenSSH identity files)
    or input_passphrase_file, with decrypt to write a plain layer on them;
    trust (a list of public key files): read the bases only if signed by
    one of their keys, every block checked against the signature.

    The per-stream options compression, window_size, window_step,
    max_lookback_blocks and order take a value for every category, a list
    of values and ``"CATEGORY::VALUE"`` strings (``["zstd:level=19",
    "pcmaudio/waveform::flac:level=8"]``), or a dict from category to value
    (``None`` for every category).

    The image records this call in its history (function, paths, level,
    options), as ``hoard create`` records its command line.

    ``progress``, if given, is called a few times a second with a dict
    (phase, entries_scanned, bytes_scanned, bytes_hashed, bytes_segmented,
    blocks_written, bytes_compressed, ...); an exception it raises, or
    Ctrl-C, stops the build. The image is written to a temporary file and
    renamed into place when complete.
    """
    if options.get("input_list") is not None:
        options["input_list"] = _input_list(options["input_list"])
    if isinstance(options.get("base"), (str, bytes, os.PathLike)):
        options["base"] = [options["base"]]
    return _hoard.create(source_dir, image_path, level, progress, options)


def rewrite(source, image_path, level=7, **options):
    """Rewrites image ``source`` as ``image_path``, recompressing with the
    codecs of ``level``; returns ``(blocks, input_bytes, output_bytes)``.

    ``options`` are those of ``hoard rewrite``: force, fsync, recompress ("all",
    "block", "metadata", "none"), compression (per category as for
    ``create``), metadata_compression, schema_compression, image_offset,
    pack_metadata, num_workers, memory_limit, no_history,
    no_history_timestamps, no_section_index, recovery, header, sign (a
    secret key file: the new image is signed with it; with sign_name,
    sign_version, sign_expires as for ``create``), encrypt_to or
    passphrase_file (as for ``create``: the new image is encrypted), for
    an encrypted source identity or input_passphrase_file (and decrypt to
    write it as a plain image), trust (public key files: read the source
    only if signed by one of their keys, every block checked against the
    signature), and with ``rebuild_metadata=True``:
    set_owner, set_group, set_time, chmod. The image records this call in
    its history.
    """
    return _hoard.rewrite(source, image_path, level, options)


def merge(parts, image_path, names=None, union=False, dedupe=True,
          recompress=False, level=7, force=False, **options):
    """Joins the images ``parts`` into one image ``image_path``, as ``hoard
    merge`` does; returns a dict summary (files, original_bytes,
    duplicate_files, blocks, image_bytes, warnings, ...). Parts may be
    URLs, and ``image_path`` an ``s3://bucket/key`` (uploaded as written).

    Each part's tree goes under a directory: ``names`` (one each), by
    default its file name without extension; with ``union=True`` the
    trees join at the root instead (a path in two parts is an error unless
    both are directories). The parts' compressed blocks are copied as they
    are; with ``dedupe`` a file an earlier part holds is stored once. Parts
    must share a block size unless ``recompress``, which compresses the
    data again at ``level``. The image is written to a temporary file and
    renamed into place when complete.

    ``options`` are those of ``create`` for the image written (fsync,
    header, recovery, sign, sign_name, sign_version, sign_expires,
    encrypt_to or passphrase_file), for encrypted parts (identity or
    input_passphrase_file, decrypt), and trust (public key files: read
    the parts only if signed by one of their keys, every block checked
    against the signature).
    """
    return _hoard.merge([_p(p) for p in parts], _p(image_path), names, union,
                        dedupe, recompress, level, force, options)

