#!/usr/bin/env python3
"""hoard's benchmark suite: builds images of real corpora with hoard and
its alternatives, measures size, build time, CPU and memory, extraction and
reads through FUSE mounts, and writes tables, JSON and charts.

    bench/run.py [--quick] [--corpus rootfs,versions,small] [--runs N]
                 [--tools hoard,squashfs,erofs,tar,dwarfs] [--out doc/bench]

Run as root on Debian to have the competitors installed automatically."""
import argparse
import datetime
import os
import platform
import shlex
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import corpora  # noqa: E402
import measure  # noqa: E402
import mounts  # noqa: E402
import report  # noqa: E402
import tools  # noqa: E402

PACKAGES = {"mksquashfs": "squashfs-tools", "mkfs.erofs": "erofs-utils",
            "squashfuse": "squashfuse", "fio": "fio", "zstd": "zstd",
            "fusermount3": "fuse3", "erofsfuse": "erofsfuse"}


def install_packages():
    """Installs missing competitors with apt when running as root."""
    missing = sorted({p for t, p in PACKAGES.items() if not tools.have(t)})
    if not missing:
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        print(f"note: not installing {' '.join(missing)} (needs root and apt)")
        return
    subprocess.run(["apt-get", "update", "-qq"], check=False)
    for p in missing:  # one by one: erofsfuse is not packaged everywhere
        subprocess.run(["apt-get", "install", "-y", "-qq", p], check=False,
                       env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def machine():
    """What the numbers were measured on."""
    cpu = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    with open("/proc/meminfo") as f:
        ram = int(next(l for l in f if l.startswith("MemTotal")).split()[1]) / 2**20
    disk = "unknown disk"
    out = subprocess.run(["lsblk", "-d", "-n", "-o", "NAME,ROTA,SIZE"], capture_output=True, text=True)
    if out.returncode == 0 and out.stdout.strip():
        first = out.stdout.split("\n")[0].split()
        disk = f"{'rotating' if first[1] == '1' else 'solid-state/virtual'} disk {first[0]} ({first[2]})"
    return {"cpu": cpu, "cores": os.cpu_count(), "ram_gib": ram,
            "kernel": platform.release(), "disk": disk}


def file_count(path):
    return sum(len(files) + len(dirs) for _, dirs, files in os.walk(path))


def bench_corpus(name, args, scratch):
    src = corpora.corpus(name, args.quick)
    result = {"source_bytes": measure.du_bytes(src), "files": file_count(src),
              "builds": {}, "extract": {}, "mounts": {}, "skipped": []}
    builds = [b for b in tools.builds() if b.kind in args.tools]
    result["skipped"] = [b.label for b in builds if not b.available()]
    builds = [b for b in builds if b.available()]
    images, samples = {}, {b.label: [] for b in builds}
    for run in range(args.runs):
        for b in builds:  # alternate tools within each run
            out = os.path.join(scratch, b.label.replace(" ", "_") + ".img")
            if os.path.exists(out):
                os.remove(out)
            print(f"  [{name} {run + 1}/{args.runs}] {b.label}", flush=True)
            try:
                samples[b.label].append(measure.run(b.command(src, out), shell=b.shell))
                images[b.label] = (b.kind, out)
            except RuntimeError as e:
                result["builds"][b.label] = {"error": str(e)}
    for b in builds:
        s = samples[b.label]
        if s and "error" not in result["builds"].get(b.label, {}):
            result["builds"][b.label] = {
                "size": os.path.getsize(images[b.label][1]),
                "wall": measure.summarize([x.wall for x in s]),
                "cpu": measure.summarize([x.cpu for x in s]),
                "rss_kb": measure.summarize([x.rss_kb for x in s]),
            }
    # Extraction and mounts: hoard's default level against the strongest
    # image of each other kind.
    chosen = {}
    for label, (kind, path) in images.items():
        if kind not in chosen or label in ("hoard -l7", "squashfs zstd-22", "erofs lz4hc"):
            chosen[kind] = (label, path)
    ex = {label: [] for label, _ in chosen.values()}
    mt = {label: [] for label, _ in chosen.values()}
    mnt = os.path.join(scratch, "mnt")
    os.makedirs(mnt, exist_ok=True)
    for run in range(args.runs):
        for kind, (label, path) in chosen.items():
            dest = os.path.join(scratch, "extracted")
            shutil.rmtree(dest, ignore_errors=True)
            cmd = tools.extract_command(kind, path, dest)
            if cmd:
                print(f"  [{name} {run + 1}/{args.runs}] extract {label}", flush=True)
                ex[label].append(measure.run(cmd, shell=isinstance(cmd, str)))
                shutil.rmtree(dest, ignore_errors=True)
            print(f"  [{name} {run + 1}/{args.runs}] mount {label}", flush=True)
            m = mounts.bench_mount(kind, path, mnt, args.quick)
            if m:
                mt[label].append(m)
    for label, s in ex.items():
        if s:
            result["extract"][label] = {"wall": measure.summarize([x.wall for x in s]),
                                        "cpu": measure.summarize([x.cpu for x in s])}
    for label, runs in mt.items():
        if not runs:
            continue
        summary = {}
        for key in runs[0]:
            if key == "cold_cache":
                continue
            if key.startswith("fio"):
                vals = [r[key]["iops"] for r in runs if r.get(key)]
            else:
                vals = [r[key] for r in runs if r.get(key) is not None]
            summary[key] = measure.summarize(vals) if vals else None
        result["mounts"][label] = summary
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small corpora, one run")
    p.add_argument("--corpus", default="versions,rootfs,small")
    p.add_argument("--tools", default="hoard,squashfs,erofs,tar,dwarfs")
    p.add_argument("--runs", type=int, default=None, help="runs per measurement (default 3, quick 1)")
    p.add_argument("--out", default=os.path.join(tools.REPO, "doc", "bench"))
    p.add_argument("--no-build", action="store_true", help="use the existing hoard binary")
    args = p.parse_args()
    args.runs = args.runs or (1 if args.quick else 3)
    args.tools = args.tools.split(",")
    install_packages()
    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "--locked", "-p", "hoard-cli"],
                       cwd=tools.REPO, check=True)
    results = {"command": "bench/run.py " + shlex.join(sys.argv[1:]),
               "date": datetime.date.today().isoformat(), "quick": args.quick,
               "runs": args.runs, "machine": machine(), "corpora": {},
               "cold_cache": os.geteuid() == 0}
    scratch = os.path.join(corpora.cache_dir(), "scratch")
    for name in args.corpus.split(","):
        shutil.rmtree(scratch, ignore_errors=True)
        os.makedirs(scratch)
        print(f"== {name}", flush=True)
        results["corpora"][name] = bench_corpus(name, args, scratch)
    shutil.rmtree(scratch, ignore_errors=True)
    print(f"wrote {report.write(results, args.out)}")


if __name__ == "__main__":
    main()
