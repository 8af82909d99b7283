"""The image builders compared: hoard at three levels, mksquashfs,
mkfs.erofs, tar+zstd and (when on PATH) DwarFS's mkdwarfs."""
import os
import shutil
import subprocess

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOARD = os.path.join(REPO, "target", "release", "hoard")


def have(tool):
    """Whether `tool` is on PATH (or is our hoard binary)."""
    return os.path.exists(tool) if os.path.isabs(tool) else shutil.which(tool) is not None


def erofs_supports(algo):
    """Whether this mkfs.erofs was built with compressor `algo`."""
    if not have("mkfs.erofs"):
        return False
    out = subprocess.run(["mkfs.erofs", "--help"], capture_output=True, text=True)
    return algo in (out.stdout + out.stderr)


class Build:
    """One way of packing a tree: a label, the program it needs, and the
    command for (source dir, output file)."""

    def __init__(self, label, needs, command, kind, shell=False):
        self.label = label
        self.needs = needs
        self.command = command
        self.kind = kind  # hoard, dwarfs, squashfs, erofs, tar
        self.shell = shell

    def available(self):
        return have(self.needs)


def builds():
    """Every build the suite knows, available or not."""
    hoard = lambda level: Build(  # noqa: E731
        f"hoard -l{level}", HOARD,
        lambda s, o: [HOARD, "create", "-i", s, "-o", o, "-l", str(level),
                      "--no-progress", "-f"],
        "hoard")
    out = [hoard(1), hoard(7), hoard(9)]
    out.append(Build("mkdwarfs -l7", "mkdwarfs",
                     lambda s, o: ["mkdwarfs", "-i", s, "-o", o, "-l", "7",
                                   "--progress=none", "-f"], "dwarfs"))
    for label, comp in [("squashfs zstd-22", ["-comp", "zstd", "-Xcompression-level", "22"]),
                        ("squashfs xz", ["-comp", "xz"])]:
        out.append(Build(label, "mksquashfs",
                         lambda s, o, c=comp: ["mksquashfs", s, o, *c, "-b", "1M",
                                               "-noappend", "-quiet", "-no-progress"],
                         "squashfs"))
    out.append(Build("erofs lz4hc", "mkfs.erofs",
                     lambda s, o: ["mkfs.erofs", "-zlz4hc,12", "--quiet", o, s], "erofs"))
    if erofs_supports("lzma"):
        out.append(Build("erofs lzma", "mkfs.erofs",
                         lambda s, o: ["mkfs.erofs", "-zlzma,6", "--quiet", o, s], "erofs"))
    out.append(Build("tar+zstd -19 --long=27", "zstd",
                     lambda s, o: f"tar -C '{s}' -cf - . | zstd -19 --long=27 -T0 -q -f -o '{o}'",
                     "tar", shell=True))
    return out


def extract_command(kind, image, dest):
    """How to unpack an image of `kind` into `dest` (None if not possible)."""
    if kind == "hoard":
        return [HOARD, "extract", image, "-o", dest]
    if kind == "squashfs":
        return ["unsquashfs", "-q", "-no-progress", "-d", dest, image]
    if kind == "tar":
        return f"mkdir -p '{dest}' && zstd -dc --long=27 '{image}' | tar -C '{dest}' -xf -"
    if kind == "dwarfs" and have("dwarfsextract"):
        return ["dwarfsextract", "-i", image, "-o", dest]
    return None


def mount_command(kind, image, mnt):
    """How to mount an image of `kind` (None if no driver is installed)."""
    if kind == "hoard":
        return [HOARD, "mount", image, mnt]
    if kind == "squashfs" and have("squashfuse"):
        return ["squashfuse", image, mnt]
    if kind == "erofs" and have("erofsfuse"):
        return ["erofsfuse", image, mnt]
    if kind == "dwarfs" and have("dwarfs"):
        return ["dwarfs", image, mnt]
    return None


def unmount(mnt):
    """Unmounts a FUSE mount point, whichever tool made it."""
    for cmd in (["fusermount3", "-u", mnt], ["fusermount", "-u", mnt], ["umount", mnt]):
        if have(cmd[0]) and subprocess.run(cmd, stderr=subprocess.DEVNULL).returncode == 0:
            return
