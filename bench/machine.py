"""What the numbers were measured on: CPU model, cores, RAM, kernel, the
distribution, the disk under the cache directory, and hoard's commit."""

from __future__ import annotations

import os
import platform
import re
import subprocess


def describe(cache: str, repo: str) -> dict:
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "ram_gib": round(_meminfo("MemTotal") / (1 << 20), 1),
        "kernel": platform.release(),
        "os": _os_release(),
        "disk": disk_of(cache),
        "python": platform.python_version(),
        "hoard_commit": _git(repo, "rev-parse", "--short=12", "HEAD"),
        "hoard_tree_dirty": bool(_git(repo, "status", "--porcelain", "--untracked-files=no")),
    }


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _meminfo(key: str) -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def _os_release() -> str:
    try:
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return platform.system()


def disk_of(path: str) -> str:
    """The block device holding `path`, its kind (rotating, SSD, virtio…),
    model and size, and the file system type."""
    os.makedirs(path, exist_ok=True)
    st = os.stat(path)
    major, minor = os.major(st.st_dev), os.minor(st.st_dev)
    fstype = _fstype(path)
    sys_dev = f"/sys/dev/block/{major}:{minor}"
    if not os.path.exists(sys_dev):
        return f"{fstype} (no block device: {major}:{minor})"
    dev = os.path.realpath(sys_dev)
    if os.path.exists(os.path.join(dev, "partition")):
        dev = os.path.dirname(dev)  # the whole disk of a partition
    name = os.path.basename(dev)
    rot = _read(os.path.join(dev, "queue", "rotational"))
    model = _read(os.path.join(dev, "device", "model")) or ""
    size = _read(os.path.join(dev, "size"))
    kind = "rotational" if rot == "1" else "non-rotational" if rot == "0" else "unknown kind"
    if name.startswith("vd"):
        kind = f"virtio disk (kernel says {kind})"
    elif name.startswith("nvme"):
        kind = "NVMe SSD"
    gib = f", {int(size) * 512 / (1 << 30):.0f} GiB" if size and size.isdigit() else ""
    return f"{name}: {kind}{', ' + model if model else ''}{gib}; {fstype}"


def _fstype(path: str) -> str:
    best, fstype = "", "unknown fs"
    real = os.path.realpath(path)
    try:
        with open("/proc/self/mounts") as f:
            for line in f:
                parts = line.split()
                point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), parts[1])
                inside = real == point or real.startswith(point.rstrip("/") + "/")
                if inside and len(point) > len(best):
                    best, fstype = point, parts[2]
    except OSError:
        pass
    return fstype


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _git(repo: str, *args) -> str | None:
    try:
        r = subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout.strip() if r.returncode == 0 else None
