"""Timing, CPU and peak memory of commands (os.wait4 rusage), medians and
spreads of repeated runs, page-cache dropping and /proc readings of a daemon."""
import os
import statistics
import subprocess
import time


class Result:
    """Wall seconds, user+sys CPU seconds and peak RSS (KiB, summed over a
    pipeline's processes) of one run."""

    def __init__(self, wall, cpu, rss_kb):
        self.wall, self.cpu, self.rss_kb = wall, cpu, rss_kb


def run(cmd, shell=False):
    """Runs `cmd` (argv list, or a shell pipeline with shell=True), waits with
    os.wait4 and returns a Result; raises RuntimeError when it fails. For a
    shell pipeline the shell's rusage covers every process it waited for."""
    start = time.perf_counter()
    p = subprocess.Popen(cmd, shell=shell, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    if p.returncode != 0:
        raise RuntimeError(f"{cmd!r} failed ({p.returncode}): {err.decode(errors='replace')[-500:]}")
    return Result(wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss)


def summarize(values):
    """Median, min, max and number of runs."""
    return {"median": statistics.median(values), "min": min(values),
            "max": max(values), "runs": len(values)}


def du_bytes(path):
    """Apparent size of a tree, hard-linked files counted once."""
    seen, total = set(), 0
    for root, dirs, files in os.walk(path):
        for name in files:
            st = os.lstat(os.path.join(root, name))
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_size
    return total


def drop_caches():
    """Drops the page cache (root only); returns whether it could."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def process_cpu(pid):
    """User+system CPU seconds of a running process."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def process_rss_kb(pid):
    """Peak RSS (VmHWM) of a running process, KiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return None
