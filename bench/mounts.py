"""Read benchmarks on mounted images.

A `Driver` mounts one builder's image: hoard mount, DwarFS's dwarfs,
squashfuse and squashfuse_ll, erofsfuse, and (as references, root only) the
kernel's own squashfs and erofs through a loop device. `measure_round()`
mounts an image once and measures, in this order:

    mount_s        until the mount point answers
    find_s         `find MNT | wc -l` (the entry count is checked)
    cold_read_s    `tar cf - -C MNT . | wc -c` after dropping the page cache
                   (root), else on the fresh mount only
    warm_read_s    the same again
    fio_4k_iops, fio_64k_mibs   fio random reads over a fixed set of files
    driver_cpu_s   CPU the driver process used over the round (FUSE only),
    driver_cold_cpu_s  ... during the cold read alone,
    driver_rss_kib peak RSS of the driver process (VmHWM)

then unmounts, always, and makes sure the driver process is gone.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import stat
import subprocess
import tempfile
import time

import measure


@dataclasses.dataclass
class Driver:
    id: str
    family: str
    label: str
    image_of: tuple  # builder ids whose images it mounts, in preference order
    mount: object  # (program path or name, image, mnt) -> argv
    program: str  # what must be installed
    kernel: bool = False  # a kernel file system: root only, no daemon
    why_not: str | None = None


def drivers(hoard: str | None) -> list:
    """Every mount driver the suite knows, in table order."""
    return [
        Driver("hoard-mount", "hoard", "hoard mount", ("hoard-l7",),
               lambda p, i, m: [p, "mount", i, m], hoard or "hoard"),
        Driver("dwarfs", "dwarfs", "dwarfs (FUSE)", ("mkdwarfs-l7", "hoard-l7"),
               lambda p, i, m: [p, i, m], "dwarfs"),
        Driver("squashfuse", "squashfs", "squashfuse", ("squashfs-zstd22",),
               lambda p, i, m: [p, i, m], "squashfuse"),
        Driver("squashfuse_ll", "squashfs", "squashfuse_ll", ("squashfs-zstd22",),
               lambda p, i, m: [p, i, m], "squashfuse_ll"),
        Driver("erofsfuse", "erofs", "erofsfuse", ("erofs-lz4hc",),
               lambda p, i, m: [p, i, m], "erofsfuse"),
        Driver("squashfs-kernel", "squashfs", "squashfs (kernel)", ("squashfs-zstd22",),
               lambda p, i, m: [p, "-t", "squashfs", "-o", "loop,ro", i, m], "mount",
               kernel=True),
        Driver("erofs-kernel", "erofs", "erofs (kernel)", ("erofs-lz4hc",),
               lambda p, i, m: [p, "-t", "erofs", "-o", "loop,ro", i, m], "mount",
               kernel=True),
    ]


def probe(items: list, programs) -> None:
    """Sets `why_not` on every driver that cannot run here."""
    fs = _kernel_filesystems()
    for d in items:
        if not programs.find("hoard" if d.family == "hoard" else d.program):
            name = os.path.basename(d.program)
            d.why_not = (f"{name}: {programs.why[name]}" if name in programs.why
                         else f"{name} not found")
            if d.id == "erofsfuse":
                d.why_not += " (not packaged for Debian 12)"
        elif not d.kernel and not os.path.exists("/dev/fuse"):
            d.why_not = "no /dev/fuse"
        elif d.kernel and os.geteuid() != 0:
            d.why_not = "kernel mounts need root"
        elif d.kernel and d.family not in fs:
            d.why_not = f"the kernel has no {d.family}"


def _kernel_filesystems() -> set:
    try:
        with open("/proc/filesystems") as f:
            return {line.split()[-1] for line in f if line.strip()}
    except OSError:
        return set()


class MountError(RuntimeError):
    pass


def measure_round(driver: Driver, program: str, image: str, mnt: str, corpus, fio_files,
                  settings: dict, log) -> dict:
    """Mounts `image` with `driver` once and returns the round's figures."""
    out = {"notes": []}
    cold = settings["cold"] == "drop_caches"
    if cold:
        measure.drop_caches()
    start = time.perf_counter()
    s = measure.run([driver.mount(program, image, mnt)], log=log, timeout=120)
    if not s.ok:
        raise MountError(f"mount failed (exit {s.rc})")
    _wait_mounted(mnt, start + 60)
    out["mount_s"] = time.perf_counter() - start
    pid = None if driver.kernel else daemon_pid(mnt, os.path.basename(program))
    try:
        cpu0 = measure.proc_cpu(pid) if pid else None

        r = measure.run([["find", mnt], ["wc", "-l"]], capture=True, log=log)
        out["find_s"] = r.wall
        seen = int(r.stdout or 0)
        if seen != corpus.stats["entries"]:
            out["notes"].append(f"find saw {seen} entries, "
                                f"the corpus has {corpus.stats['entries']}")

        if cold:
            measure.drop_caches()
        c0 = measure.proc_cpu(pid) if pid else None
        r = _tar_read(mnt, log)
        out["cold_read_s"] = r.wall
        if pid:
            out["driver_cold_cpu_s"] = measure.proc_cpu(pid) - c0
        out["read_bytes"] = int(r.stdout or 0)
        out["warm_read_s"] = _tar_read(mnt, log).wall

        if fio_files and settings.get("fio"):
            for bs, key in (("4k", "fio_4k_iops"), ("64k", "fio_64k_mibs")):
                if cold:
                    measure.drop_caches()
                res = run_fio(mnt, fio_files, bs, settings, log)
                if res:
                    out[key] = res["iops"] if key.endswith("iops") else res["mibs"]
        if pid:
            out["driver_cpu_s"] = measure.proc_cpu(pid) - cpu0
            out["driver_rss_kib"] = measure.proc_peak_rss_kib(pid)
    finally:
        unmount(mnt, driver.kernel, pid, log)
    return out


def _tar_read(mnt: str, log) -> measure.Sample:
    r = measure.run([["tar", "cf", "-", "-C", mnt, "."], ["wc", "-c"]], capture=True, log=log)
    # tar exits 1 for "file changed as we read it" and the like; 2 is fatal.
    if r.rc not in (0, 1) or r.timed_out:
        raise MountError(f"tar over the mount failed (exit {r.rc})")
    return r


def _wait_mounted(mnt: str, deadline: float) -> None:
    while True:
        if os.path.ismount(mnt):
            try:
                os.listdir(mnt)
                return
            except OSError:
                pass
        if time.perf_counter() > deadline:
            raise MountError(f"{mnt} did not become a mount point")
        time.sleep(0.002)


def daemon_pid(mnt: str, program: str) -> int | None:
    """The pid of the FUSE process serving `mnt`: the one named `program`
    whose command line names the mount point."""
    want = os.fsencode(mnt)
    for pid in _pids():
        argv = _cmdline(pid)
        if argv and want in argv and os.path.basename(argv[0]) == os.fsencode(program):
            return pid
    return None


def _pids():
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid():
            yield int(name)


def _cmdline(pid: int) -> list:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def unmount(mnt: str, kernel: bool, pid: int | None, log) -> None:
    """Unmounts (lazily if it must) and waits for the driver to exit,
    killing it if it does not within 10 s."""
    cmds = ([["umount", mnt], ["umount", "-l", mnt]] if kernel else
            [["fusermount3", "-u", mnt], ["umount", mnt], ["fusermount3", "-uz", mnt],
             ["umount", "-l", mnt]])
    for argv in cmds:
        if not is_mounted(mnt):
            break
        subprocess.run(argv, stdout=log or subprocess.DEVNULL, stderr=log or subprocess.DEVNULL)
        for _ in range(50):
            if not is_mounted(mnt):
                break
            time.sleep(0.02)
    if pid:
        _reap(pid)


def _reap(pid: int) -> None:
    for sig, wait in ((None, 10.0), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        if sig:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                return
        end = time.monotonic() + wait
        while time.monotonic() < end:
            if not os.path.exists(f"/proc/{pid}") or _state(pid) == "Z":
                return
            time.sleep(0.05)


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def is_mounted(mnt: str) -> bool:
    """Whether `mnt` is a mount point, from the kernel's table (a FUSE mount
    whose driver died answers no stat, so os.path.ismount says no)."""
    return mnt in mounted_under(mnt)


def mounted_under(root: str) -> list:
    """Mount points at or under `root`, deepest first."""
    points = []
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split()[4])
                if point == root or point.startswith(root + "/"):
                    points.append(point)
    except OSError:
        pass
    return sorted(points, reverse=True)


def cleanup_stale(scratch_root: str, log) -> None:
    """Unmounts what a previous run that was killed left mounted: mount points
    in run-PID directories whose PID is gone. (A FUSE driver exits by itself
    once unmounted; nothing is killed here.)"""
    try:
        names = os.listdir(scratch_root)
    except OSError:
        return
    for name in names:
        if not name.startswith("run-") or not name[4:].isdigit():
            continue
        if os.path.exists(f"/proc/{name[4:]}"):
            continue  # that run is still going (or the pid was reused: leave it)
        for point in mounted_under(os.path.join(scratch_root, name)):
            log(f"unmounting a stale mount: {point}")
            unmount(point, False, None, None)


def pick_fio_files(tree: str, want: int, limit: int = 512) -> list:
    """Relative paths of regular files of the corpus for the random-read
    test, holding `want` bytes if the corpus has them: up to 64 files of
    256 KiB or more spread over the tree, then the largest of the others
    until they hold `want`, never more than `limit` files (fio opens them
    all), so that the reads spread over as much of the image as they
    read. Returns [(path, size)]."""
    files = []
    for root, dirs, names in os.walk(tree):
        dirs.sort()
        for name in sorted(names):
            path = os.path.join(root, name)
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode) and st.st_size >= 16 * 1024:
                files.append((os.path.relpath(path, tree), st.st_size))
    big = [f for f in files if f[1] >= 256 * 1024]
    if len(big) > 64:
        big = [big[round(i * (len(big) - 1) / 63)] for i in range(64)]
    chosen, total = list(big), sum(f[1] for f in big)
    for f in sorted(set(files) - set(big), key=lambda f: -f[1]):
        if total >= want or len(chosen) >= limit:
            break
        chosen.append(f)
        total += f[1]
    return chosen


def run_fio(mnt: str, files: list, bs: str, settings: dict, log) -> dict | None:
    """Random reads of block size `bs` over `files` ([(path, size)]) under
    `mnt`, one job per thread, each reading settings['fio_io_size'][bs]
    bytes with O_DIRECT, so that every read reaches the driver and none
    is answered by the page cache, however small the files (or for at
    most settings['fio_runtime'] seconds, if set); IOPS and MiB/s. fio takes the files through short symbolic links, as it takes
    at most 4096 characters of file names."""
    with tempfile.TemporaryDirectory(prefix="hoard-bench-fio-") as links:
        for i, (path, _) in enumerate(files):
            os.symlink(os.path.join(mnt, path), os.path.join(links, str(i)))
        argv = ["fio", "--name=randread", f"--directory={links}",
                "--filename=" + ":".join(str(i) for i in range(len(files))),
                "--rw=randread", f"--bs={bs}", "--ioengine=psync", "--direct=1",
                "--readonly", "--randrepeat=1", "--file_service_type=random",
                f"--io_size={settings['fio_io_size'][bs]}",
                f"--numjobs={settings['threads']}", "--group_reporting",
                "--output-format=json"]
        if settings.get("fio_runtime"):
            argv.append(f"--runtime={settings['fio_runtime']}")
        r = measure.run([argv], capture=True, log=log, timeout=settings["timeout"])
    if not r.ok:
        return None
    text = r.stdout.decode(errors="replace")
    try:
        job = json.loads(text[text.index("{"):])["jobs"][0]["read"]
    except (ValueError, KeyError, IndexError):
        return None
    return {"iops": job["iops"], "mibs": job["bw_bytes"] / (1 << 20)}
