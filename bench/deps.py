"""Installing what the suite compares against, and building hoard.

`install()` installs the Debian packages of missing programs with apt-get
when running as root (squashfs-tools, erofs-utils, squashfuse, fio, zstd,
fuse3, and erofsfuse where the archive has it); otherwise it names them.
`setup_dwarfs()` runs the `setup.sh` beside a DwarFS bin/ directory (the
reference build's: it installs the shared libraries its tools need).
`build_hoard()` runs `cargo build --release --locked -p hoard-cli`.
"""

from __future__ import annotations

import os
import shutil
import subprocess

PACKAGES = {  # program -> Debian package
    "mksquashfs": "squashfs-tools", "unsquashfs": "squashfs-tools",
    "mkfs.erofs": "erofs-utils", "fsck.erofs": "erofs-utils",
    "squashfuse": "squashfuse", "squashfuse_ll": "squashfuse",
    "fio": "fio", "zstd": "zstd", "fusermount3": "fuse3",
    "tar": "tar", "find": "findutils", "erofsfuse": "erofsfuse",
}
OPTIONAL = {"erofsfuse"}  # not in Debian 12; installed where the archive has it


def install(log) -> None:
    missing = sorted({pkg for prog, pkg in PACKAGES.items() if not shutil.which(prog)})
    if set(missing) <= OPTIONAL and not any(_has_candidate(p) for p in missing):
        return  # only optional ones, which this archive does not have
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        log(f"missing packages (run as root on Debian to install them): {' '.join(missing)}")
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    log(f"installing: {' '.join(missing)}")
    subprocess.run(["apt-get", "update", "-qq"], env=env, check=False)
    wanted = [p for p in missing if p not in OPTIONAL or _has_candidate(p)]
    for p in sorted(set(missing) - set(wanted)):
        log(f"  {p}: not in this distribution's archive, skipped")
    if wanted:
        r = subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *wanted],
                           env=env, stdout=subprocess.DEVNULL)
        if r.returncode != 0:
            log(f"  apt-get install failed (exit {r.returncode}); going on with what is there")


def _has_candidate(package: str) -> bool:
    r = subprocess.run(["apt-cache", "policy", package], capture_output=True, text=True)
    return any(line.strip().startswith("Candidate:") and "(none)" not in line
               for line in r.stdout.splitlines())


def setup_dwarfs(bin_dir: str, log) -> None:
    """Runs `bin_dir`/../setup.sh when there is one (idempotent: it returns
    at once when the tools already run)."""
    script = os.path.join(os.path.dirname(bin_dir), "setup.sh")
    if not os.path.isfile(script):
        return
    r = subprocess.run([script], capture_output=True, text=True)
    if r.returncode != 0:
        why = (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]
        log(f"{script} failed: {why}")


def build_hoard(repo: str, log) -> str | None:
    """Builds hoard's release binary; its path, or None if the build failed."""
    if not shutil.which("cargo"):
        log("cargo not found: hoard is not built")
        return None
    log("building hoard: cargo build --release --locked -p hoard-cli")
    r = subprocess.run(["cargo", "build", "--release", "--locked", "-p", "hoard-cli"], cwd=repo)
    if r.returncode != 0:
        log(f"hoard's build failed (exit {r.returncode}); its runs are skipped")
        return None
    return os.path.join(repo, "target", "release", "hoard")
