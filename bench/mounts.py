"""Read benchmarks on mounted images: mount time, `find`, full-tree reads
cold and warm, fio random reads, and the driver's CPU time."""
import json
import os
import subprocess
import time

import measure
import tools


def driver_pid(mnt):
    """The pid of the FUSE process serving `mnt` (the one whose command line
    names it)."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if os.fsencode(mnt) in args:
            return int(pid)
    return None


def wait_mounted(mnt, timeout=30):
    """Waits until `mnt` is a mount point."""
    end = time.time() + timeout
    while not os.path.ismount(mnt):
        if time.time() > end:
            raise RuntimeError(f"{mnt}: not mounted after {timeout} s")
        time.sleep(0.005)


def fio(mnt, block_size, seconds):
    """Random-read IOPS over all files of the mount, or None without fio."""
    if not tools.have("fio"):
        return None
    out = subprocess.run(
        ["fio", "--name=rand", f"--opendir={mnt}", "--rw=randread", f"--bs={block_size}",
         "--readonly", "--ioengine=psync", "--numjobs=4", "--group_reporting",
         "--time_based", f"--runtime={seconds}", "--output-format=json"],
        capture_output=True, text=True)
    # fio prints notes about skipped files before its JSON.
    start = out.stdout.find("{\n")
    if out.returncode != 0 or start < 0:
        return None
    job = json.loads(out.stdout[start:])["jobs"][0]["read"]
    return {"iops": job["iops"], "mib_s": job["bw"] / 1024}


def bench_mount(kind, image, mnt, quick):
    """Every read metric of one image through its FUSE driver, or None
    when no driver for it is installed."""
    cmd = tools.mount_command(kind, image, mnt)
    if cmd is None:
        return None
    result = {}
    cold = measure.drop_caches()
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wait_mounted(mnt)
    result["mount_s"] = time.perf_counter() - start
    try:
        pid = driver_pid(mnt)
        result["find_s"] = measure.run(f"find '{mnt}' | wc -l", shell=True).wall
        # A fresh mount after dropping caches is as cold as it gets.
        if cold:
            measure.drop_caches()
        result["read_cold_s"] = measure.run(f"tar cf - -C '{mnt}' . | wc -c", shell=True).wall
        result["read_warm_s"] = measure.run(f"tar cf - -C '{mnt}' . | wc -c", shell=True).wall
        seconds = 3 if quick else 10
        result["fio_4k"] = fio(mnt, "4k", seconds)
        result["fio_64k"] = fio(mnt, "64k", seconds)
        if pid:
            result["driver_cpu_s"] = measure.process_cpu(pid)
            result["driver_rss_kb"] = measure.process_rss_kb(pid)
        result["cold_cache"] = cold
    finally:
        tools.unmount(mnt)
        for _ in range(100):
            if not os.path.ismount(mnt):
                break
            time.sleep(0.05)
    return result
