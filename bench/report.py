"""The results as Markdown tables, JSON and SVG charts."""
import json
import os

import svg

MIB = 2**20


def _fmt(summary, digits=2):
    if not summary:
        return "–"
    m, lo, hi = summary["median"], summary["min"], summary["max"]
    spread = f" ({lo:.{digits}f}–{hi:.{digits}f})" if summary["runs"] > 1 else ""
    return f"{m:.{digits}f}{spread}"


def _ratio(value, base):
    return f"{value / base:.2f}×" if base else "–"


def markdown(results):
    """One Markdown section per corpus."""
    lines = []
    for name, c in results["corpora"].items():
        lines.append(f"### {name}: {c['source_bytes'] / MIB:.0f} MiB, {c['files']} files\n")
        base = c["builds"].get("hoard -l7", {})
        lines.append("| build | image size | size vs hoard -l7 | wall s | CPU s | peak RSS MiB |")
        lines.append("|---|---:|---:|---:|---:|---:|")
        for label, b in c["builds"].items():
            if "error" in b:
                lines.append(f"| {label} | failed: {b['error'][:120]} | | | | |")
                continue
            lines.append(
                f"| {label} | {b['size'] / MIB:.1f} MiB | {_ratio(b['size'], base.get('size'))} "
                f"| {_fmt(b['wall'])} | {_fmt(b['cpu'])} | {b['rss_kb']['median'] / 1024:.0f} |")
        for label in c.get("skipped", []):
            lines.append(f"| {label} | not installed, skipped | | | | |")
        if c.get("extract"):
            lines.append("\n| extract | wall s | CPU s |")
            lines.append("|---|---:|---:|")
            for label, e in c["extract"].items():
                lines.append(f"| {label} | {_fmt(e['wall'])} | {_fmt(e['cpu'])} |")
        if c.get("mounts"):
            drivers = list(c["mounts"])
            lines.append("\n| mounted | " + " | ".join(drivers) + " |")
            lines.append("|---|" + "---:|" * len(drivers))
            for key, title, digits in [
                ("mount_s", "mount time s", 3), ("find_s", "find, all entries s", 3),
                ("read_cold_s", "full read, cold s", 2), ("read_warm_s", "full read, warm s", 2),
                ("fio_4k", "fio 4k random reads, IOPS", 0), ("fio_64k", "fio 64k random reads, IOPS", 0),
                ("driver_cpu_s", "driver CPU s", 2), ("driver_rss_kb", "driver peak RSS KiB", 0),
            ]:
                cells = [_fmt(c["mounts"][d].get(key), digits) for d in drivers]
                lines.append(f"| {title} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def charts(results, outdir):
    """SVG bar charts, one per corpus and metric; returns their file names."""
    made = []
    for name, c in results["corpora"].items():
        builds = {k: v for k, v in c["builds"].items() if "error" not in v}
        specs = [
            ("size", "image size", "MiB",
             [(k, v["size"] / MIB, None, None) for k, v in builds.items()]),
            ("build", "build time (wall)", "s",
             [(k, v["wall"]["median"], v["wall"]["min"], v["wall"]["max"]) for k, v in builds.items()]),
        ]
        for key, title in [("read_cold_s", "full read, cold"), ("read_warm_s", "full read, warm"),
                           ("mount_s", "mount time")]:
            specs.append((key.replace("_s", ""), title, "s", [
                (d, m[key]["median"], m[key]["min"], m[key]["max"])
                for d, m in c.get("mounts", {}).items() if m.get(key)]))
        for key, title in [("fio_4k", "random 4k reads"), ("fio_64k", "random 64k reads")]:
            specs.append((key, title, "IOPS", [
                (d, m[key]["median"], m[key]["min"], m[key]["max"])
                for d, m in c.get("mounts", {}).items() if m.get(key)]))
        for key, title, unit, rows in specs:
            fname = f"{name}-{key}.svg"
            if svg.bar_chart(f"{name}: {title}", unit, rows, os.path.join(outdir, fname)):
                made.append(fname)
    return made


def write(results, outdir):
    """Writes results.json, results.md and the charts into `outdir`."""
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    made = charts(results, outdir)
    m = results["machine"]
    text = [f"# Benchmark results{' (quick run)' if results['quick'] else ''}\n",
            f"Command: `{results['command']}`  ",
            f"Date: {results['date']}  ",
            f"Machine: {m['cpu']}, {m['cores']} cores, {m['ram_gib']:.0f} GiB RAM, "
            f"Linux {m['kernel']}, {m['disk']}  ",
            f"Each figure is the median of {results['runs']} runs (min–max in brackets); "
            f"runs of competing tools alternate. "
            f"Cold reads {'drop the page cache first' if results['cold_cache'] else 'use a fresh mount (no permission to drop caches)'}.\n",
            markdown(results)]
    text += [f"![{f}]({f})" for f in made]
    with open(os.path.join(outdir, "results.md"), "w") as f:
        f.write("\n".join(text) + "\n")
    return os.path.join(outdir, "results.md")
