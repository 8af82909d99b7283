"""Running commands and measuring them; summarising repeated samples.

`run()` starts a command or a pipeline of commands, waits for every process
with os.wait4 and returns a `Sample`: wall time, user and system CPU, peak
resident memory (for a pipeline, the children's peaks added up) and the exit
status. `summary()` turns a list of numbers into median, min, max and IQR.
Also here: dropping the page cache, reading a tree whole, and reading a
daemon's CPU time and memory from /proc.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import statistics
import subprocess
import threading
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclasses.dataclass
class Sample:
    """What one run of a command (or pipeline) cost."""

    wall: float  # seconds, from the first spawn until the last process ended
    user: float  # seconds of user CPU, all processes of the pipeline
    sys: float  # seconds of system CPU
    rss_kib: int  # peak resident set size, KiB, summed over the pipeline
    rc: int  # exit code of the first process that failed, else 0
    timed_out: bool = False
    stdout: bytes = b""  # captured output of the last command, if asked for

    @property
    def cpu(self) -> float:
        return self.user + self.sys

    @property
    def ok(self) -> bool:
        return self.rc == 0 and not self.timed_out

    def as_dict(self) -> dict:
        return {"wall": self.wall, "user": self.user, "sys": self.sys,
                "cpu": self.cpu, "rss_kib": self.rss_kib}


class CommandFailed(RuntimeError):
    """A measured command exited non-zero; carries the tail of its log."""


def run(cmds, *, cwd=None, log=None, capture=False, timeout=None, env=None) -> Sample:
    """Run `cmds` (one argv list, or a list of argv lists joined by pipes).

    stderr of every process goes to `log` (an open binary file) or is
    discarded; stdout of the last process is captured when `capture` is set,
    else it goes to `log` too. The processes share a new process group,
    which is killed if `timeout` seconds pass.
    """
    if cmds and isinstance(cmds[0], str):
        cmds = [cmds]
    sink = log if log is not None else subprocess.DEVNULL
    procs = []
    start = time.perf_counter()
    prev_out = None
    try:
        for i, argv in enumerate(cmds):
            last = i == len(cmds) - 1
            stdin = prev_out if prev_out is not None else subprocess.DEVNULL
            stdout = (subprocess.PIPE if capture else sink) if last else subprocess.PIPE
            p = subprocess.Popen(argv, stdin=stdin, stdout=stdout, stderr=sink, cwd=cwd, env=env,
                                 process_group=0 if i == 0 else procs[0].pid)
            if prev_out is not None:
                prev_out.close()  # the next process holds it now
            prev_out = None if last else p.stdout
            procs.append(p)
    except BaseException:
        for p in procs:
            _kill_group(p.pid)
        raise
    out = []
    reader = None
    if capture:
        reader = threading.Thread(target=lambda: out.append(procs[-1].stdout.read()), daemon=True)
        reader.start()
    expired = threading.Event()
    timer = None
    if timeout is not None:
        def expire():
            expired.set()
            _kill_group(procs[0].pid)
        timer = threading.Timer(timeout, expire)
        timer.daemon = True
        timer.start()
    user = sys_ = 0.0
    rss = 0
    rc = 0
    try:
        for p in procs:
            _, status, ru = os.wait4(p.pid, 0)
            p.returncode = os.waitstatus_to_exitcode(status)
            user += ru.ru_utime
            sys_ += ru.ru_stime
            rss += ru.ru_maxrss
            if p.returncode != 0 and rc == 0:
                rc = p.returncode
        wall = time.perf_counter() - start
    except BaseException:  # interrupted: take the children down too
        _kill_group(procs[0].pid)
        raise
    finally:
        if timer:
            timer.cancel()
    if reader:
        reader.join()
        procs[-1].stdout.close()
    return Sample(wall=wall, user=user, sys=sys_, rss_kib=rss, rc=rc,
                  timed_out=expired.is_set(), stdout=out[0] if out else b"")


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def drop_caches() -> bool:
    """Write back dirty pages and drop the page cache; False if not permitted."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def read_tree(root: str) -> int:
    """Reads every regular file below `root` (symlinks not followed) whole;
    returns the bytes read."""
    total = 0
    for top, _, files in os.walk(root):
        for name in files:
            path = os.path.join(top, name)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            with open(path, "rb", buffering=0) as f:
                while chunk := f.read(1 << 20):
                    total += len(chunk)
    return total


def can_drop_caches() -> bool:
    return os.geteuid() == 0 and os.access("/proc/sys/vm/drop_caches", os.W_OK)


def proc_cpu(pid: int) -> float | None:
    """User+system CPU seconds a live process has used so far (from /proc)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    # fields[0] is field 3 (state); utime and stime are fields 14 and 15
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_peak_rss_kib(pid: int) -> int | None:
    """Peak resident set size (VmHWM) of a live process, KiB."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def summary(values) -> dict | None:
    """Median, min, max, quartiles and count of a list of numbers (Nones dropped)."""
    vals = sorted(v for v in values if v is not None)
    if not vals:
        return None
    if len(vals) >= 4:
        q1, _, q3 = statistics.quantiles(vals, n=4)
    else:
        q1, q3 = vals[0], vals[-1]
    return {"median": statistics.median(vals), "min": vals[0], "max": vals[-1],
            "q1": q1, "q3": q3, "n": len(vals)}


def round_robin(items: list, run_index: int) -> list:
    """The order to run `items` in for run number `run_index`: rotated by one
    each run, so that no tool always goes first or last."""
    if not items:
        return []
    k = run_index % len(items)
    return items[k:] + items[:k]
