"""An fsspec file system over a DwarFS image, registered as protocol
``hoard`` (through the ``fsspec.specs`` entry point), so that::

    import fsspec, pandas
    with fsspec.open("hoard://data/x.csv::file:///path/img.dwarfs") as f:
        df = pandas.read_csv(f)
    fs = fsspec.filesystem("hoard", fo="/path/img.dwarfs")
    fs.ls("data")

Read-only. Paths are relative to the image root. The image must be a
local file (for a remote one, chain it through ``simplecache::``).
"""

import stat as _stat

from fsspec.spec import AbstractFileSystem

from . import Image

_LOCAL = (None, "file", "local")


class HoardFileSystem(AbstractFileSystem):
    """The files of the DwarFS image ``fo`` (a local path) as an fsspec
    file system; ``offset`` and ``cache_size`` are passed to
    ``hoard.Image``."""

    protocol = "hoard"
    root_marker = ""

    def __init__(self, fo="", target_protocol=None, target_options=None,
                 offset="auto", cache_size=None, **kwargs):
        super().__init__(**kwargs)
        if target_protocol not in _LOCAL:
            raise ValueError(
                f"hoard:// reads local image files, not {target_protocol}:// "
                "(chain it through simplecache:: to get a local copy)")
        if isinstance(fo, str) and fo.startswith(("file://", "local://")):
            fo = fo.split("://", 1)[1]
        self.image = Image(fo, offset=offset, cache_size=cache_size)

    @classmethod
    def _strip_protocol(cls, path):
        path = super()._strip_protocol(path)
        return path.strip("/")

    def _entry(self, path, st):
        kind = ("directory" if _stat.S_ISDIR(st.st_mode)
                else "file" if _stat.S_ISREG(st.st_mode)
                else "link" if _stat.S_ISLNK(st.st_mode) else "other")
        return {
            "name": path,
            "size": st.st_size if kind == "file" else 0,
            "type": kind,
            "mode": st.st_mode,
            "ino": st.st_ino,
            "nlink": st.st_nlink,
            "uid": st.st_uid,
            "gid": st.st_gid,
            "mtime": st.st_mtime,
            "islink": _stat.S_ISLNK(st.st_mode),
        }

    def info(self, path, **kwargs):
        path = self._strip_protocol(path)
        return self._entry(path, self.image.stat(path))

    def ls(self, path, detail=True, **kwargs):
        path = self._strip_protocol(path)
        if not self.image.isdir(path):
            info = self.info(path)
            return [info] if detail else [info["name"]]
        names = [f"{path}/{n}" if path else n for n in self.image.listdir(path)]
        if not detail:
            return names
        return [self._entry(n, self.image.lstat(n)) for n in names]

    def _open(self, path, mode="rb", block_size=None, autocommit=True,
              cache_options=None, **kwargs):
        if "w" in mode or "a" in mode or "+" in mode:
            raise PermissionError("DwarFS images are read-only")
        return self.image.open(self._strip_protocol(path), buffering=block_size or (1 << 20))

    def cat_file(self, path, start=None, end=None, **kwargs):
        path = self._strip_protocol(path)
        size = self.image.stat(path).st_size
        start = 0 if start is None else (start if start >= 0 else max(0, size + start))
        end = size if end is None else (end if end >= 0 else max(0, size + end))
        return self.image.read(path, start, max(0, end - start))

    def ukey(self, path):
        return f"{self.image.path}:{self.info(path)['ino']}"
