"""The report: results.json (every sample), README.md (machine, command,
charts, one set of tables per corpus) and one SVG chart per metric.

Each figure is the median of the runs, with the spread (min–max) in
brackets and the ratio against hoard's default (`hoard -l7` for builds,
`hoard mount` of that image for reads, `hoard extract` for extraction).
Each corpus also gets a "hoard / DwarFS" table: every figure of hoard over
the same figure of DwarFS 0.15.3 (each level against mkdwarfs at that
level, extraction against dwarfsextract, the mount against dwarfs).
"""

from __future__ import annotations

import dataclasses
import json
import os

import measure
import svg

MiB = 1 << 20
ORDER = ["rootfs", "versions", "manyfiles", "small"]
PHASES = ["build", "mount", "extract"]
REFERENCE = {"build": "hoard-l7", "mount": "hoard-mount", "extract": "hoard-extract"}
VERSUS = [  # (phase, hoard's id, DwarFS's id): the pairs of the hoard / DwarFS table
    ("build", "hoard-l1", "mkdwarfs-l1"), ("build", "hoard-l7", "mkdwarfs-l7"),
    ("build", "hoard-l9", "mkdwarfs-l9"), ("extract", "hoard-extract", "dwarfsextract"),
    ("mount", "hoard-mount", "dwarfs"),
]


@dataclasses.dataclass
class Metric:
    key: str  # file name of its chart
    phase: str  # build, mount or extract
    title: str  # column and chart title
    unit: str
    better: str  # "lower" or "higher"
    get: object  # sample -> number or None


METRICS = [
    Metric("image_size", "build", "Image size", "MiB", "lower", lambda s: s["size"] / MiB),
    Metric("build_time", "build", "Build time (wall)", "s", "lower", lambda s: s["wall"]),
    Metric("build_cpu", "build", "Build CPU (user+sys)", "s", "lower", lambda s: s["cpu"]),
    Metric("build_rss", "build", "Build peak RSS", "MiB", "lower", lambda s: s["rss_kib"] / 1024),
    Metric("mount_time", "mount", "Mount time", "ms", "lower", lambda s: s["mount_s"] * 1000),
    Metric("find_time", "mount", "find over the mount", "s", "lower", lambda s: s["find_s"]),
    Metric("cold_read", "mount", "Full read, cold", "s", "lower", lambda s: s["cold_read_s"]),
    Metric("warm_read", "mount", "Full read, warm", "s", "lower", lambda s: s["warm_read_s"]),
    Metric("fio_4k", "mount", "Random reads 4k", "IOPS", "higher", lambda s: s.get("fio_4k_iops")),
    Metric("fio_64k", "mount", "Random reads 64k", "MiB/s", "higher",
           lambda s: s.get("fio_64k_mibs")),
    Metric("driver_cpu", "mount", "Driver CPU, cold read", "s", "lower",
           lambda s: s.get("driver_cold_cpu_s")),
    Metric("driver_rss", "mount", "Driver peak RSS", "MiB", "lower",
           lambda s: s["driver_rss_kib"] / 1024 if s.get("driver_rss_kib") else None),
    Metric("extract_time", "extract", "Extraction time (wall)", "s", "lower", lambda s: s["wall"]),
    Metric("extract_cpu", "extract", "Extraction CPU", "s", "lower", lambda s: s["cpu"]),
    Metric("extract_rss", "extract", "Extraction peak RSS", "MiB", "lower",
           lambda s: s["rss_kib"] / 1024),
]


def num(v: float | None) -> str:
    """A figure with about three significant digits."""
    if v is None:
        return "–"
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    return f"{v:.3f}"


def summarize(entry: dict, metric: Metric) -> dict | None:
    return measure.summary([metric.get(s) for s in entry.get("samples", [])])


def cell(st: dict | None, ref: dict | None, entry: dict) -> str:
    """'median [min–max] ×ratio' for a table; why not, when there is no figure."""
    if st is None:
        if entry.get("skipped"):
            return "skipped"
        return "failed" if entry.get("error") else "–"
    text = num(st["median"])
    if st["n"] > 1 and st["max"] != st["min"]:
        text += f" [{num(st['min'])}–{num(st['max'])}]"
    if ref and ref["median"]:
        text += f" ×{st['median'] / ref['median']:.2f}"
    return text


def tables(name: str, corpus: dict, unavailable: dict) -> list:
    """Markdown lines: one table per phase of one corpus."""
    st = corpus["stats"]
    lines = [f"### {corpus['label']}", "",
             f"{num(st['bytes'] / MiB)} MiB in {st['files']:,} files, {st['dirs']:,} directories, "
             f"{st['symlinks']:,} symlinks, {st['hardlinks']:,} extra hard links "
             f"({_recipe_text(name, corpus['recipe'])}).", ""]
    lines += versus_dwarfs(corpus)
    for phase, first in (("build", "Builder"), ("mount", "Driver (image)"),
                         ("extract", "Extractor (image)")):
        entries = corpus.get(phase)
        if not entries:
            continue
        metrics = [m for m in METRICS if m.phase == phase]
        ref = entries.get(REFERENCE[phase], {})
        head = [first] + [f"{m.title} ({m.unit})" for m in metrics]
        if phase == "build":
            head.insert(2, "% of input")
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        skipped = []
        for tid, e in entries.items():
            if e.get("skipped") and not e.get("samples"):
                if tid not in unavailable:  # those are listed once, at the top
                    skipped.append(f"`{tid}` ({e['skipped']})")
                continue
            label = e["label"] + (f" ({e['image']})" if e.get("image") else "")
            row = [label]
            for m in metrics:
                row.append(cell(summarize(e, m), summarize(ref, m) if ref else None, e))
            if phase == "build":
                size = summarize(e, metrics[0])
                row.insert(2, f"{size['median'] * MiB / st['bytes'] * 100:.1f}" if size else "–")
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |")
        lines.append("")
        for tid, e in entries.items():
            if e.get("error"):
                lines.append(f"- `{tid}` failed: {e['error']}")
            for n in e.get("notes", []):
                lines.append(f"- `{tid}`: {n}")
        if skipped:
            lines.append(f"- not run: {', '.join(skipped)}")
        lines.append("")
    return lines


def _bytes(n) -> str:
    """An amount of bytes for the text: "64 MiB"; runs before bytes were
    counted wrote fio's own notation ("64m"), kept as it is."""
    return f"{n / MiB:g} MiB" if isinstance(n, int) else str(n)


def versus_dwarfs(corpus: dict) -> list:
    """Markdown lines: the "hoard / DwarFS" table of one corpus, one row per
    figure that both measured, with both medians and their ratio; the pairs
    it could not compare are named under it."""
    rows, missing = [], []
    for phase, ours, theirs in VERSUS:
        entries = corpus.get(phase) or {}
        a, b = entries.get(ours), entries.get(theirs)
        if not (a and a.get("samples")) or not (b and b.get("samples")):
            if a or b:
                missing.append(f"`{ours}` ({_why_no_figure(a)}) / `{theirs}` "
                               f"({_why_no_figure(b)})")
            continue
        pair = f"{_with_image(a)} / {_with_image(b)}"
        for m in (m for m in METRICS if m.phase == phase):
            x, y = summarize(a, m), summarize(b, m)
            if x is None and y is None:
                continue
            ratio = x["median"] / y["median"] if x and y and y["median"] else None
            better = "–" if ratio is None else "=" if round(ratio, 2) == 1 else (
                "hoard" if (ratio < 1) == (m.better == "lower") else "DwarFS")
            rows.append([pair, f"{m.title} ({m.unit})", num(x and x["median"]),
                         num(y and y["median"]), f"**{ratio:.2f}**" if ratio else "–", better])
            pair = ""  # the pair is named on its first row only
    if not rows and not missing:
        return []
    lines = ["hoard / DwarFS 0.15.3: hoard's median over DwarFS's (below 1 is better for hoard, "
             "except for fio, where higher is better); `better` names the winner.", ""]
    if rows:
        lines += ["| hoard / DwarFS | Figure | hoard | DwarFS | ratio | better |",
                  "|---|---|---|---|---|---|"]
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
        lines.append("")
    if missing:
        lines += [f"- not compared: {', '.join(missing)}", ""]
    return lines


def _with_image(e: dict) -> str:
    return e["label"] + (f" ({e['image']})" if e.get("image") else "")


def _why_no_figure(e: dict | None) -> str:
    if not e:
        return "not run"
    if e.get("samples"):
        return "measured"
    if e.get("error"):
        return "failed"
    if e.get("skipped"):
        return f"skipped: {e['skipped']}"
    return "no figure"


def _recipe_text(name: str, r: dict) -> str:
    if name == "versions":
        return f"{r['count']} {r['project']} releases from PyPI"
    if name == "rootfs" and "roots" in r:
        return (f"{r['target'] / MiB:,.0f} MiB of this machine's {', '.join(r['roots'])}, "
                f"files picked by a hash of their path (seed {r['seed']})")
    if name == "rootfs":
        return "copied from this machine's " + ", ".join(r["candidates"]) + " (as far as needed)"
    if name == "manyfiles":
        return (f"{r['files']:,} files of {r['min_bytes']}–{r['max_bytes']} bytes in "
                f"{r['dirs']} directories (seed {r['seed']})")
    if name == "small":
        return (f"{r['zeros'] // MiB} MiB zeros, {r['random'] // MiB} MiB random, "
                f"{r['wav_files']} WAV files, {r['tiny_files']:,} tiny files, "
                f"{r['deep']}-deep path, links")
    return ""


def charts(results: dict) -> dict:
    """{file name: SVG text}, one chart per metric, one panel per corpus."""
    out = {}
    for m in METRICS:
        panels = []
        for name, corpus in results["corpora"].items():
            entries = corpus.get(m.phase) or {}
            bars = []
            for tid, e in entries.items():
                if e.get("skipped") and not e.get("samples"):
                    continue
                st = summarize(e, m)
                label = e["label"]
                if st is None:
                    if m.phase != "build" and not e.get("error") and e.get("samples"):
                        continue  # a figure this driver has not (e.g. no daemon)
                    bars.append(svg.Bar(label, e["family"], None,
                                        note="failed" if e.get("error") else "no figure"))
                    continue
                bars.append(svg.Bar(label, e["family"], st["median"],
                                    st["min"] if st["n"] > 1 else None,
                                    st["max"] if st["n"] > 1 else None,
                                    text=f"{num(st['median'])} {m.unit}",
                                    faint=tid.endswith("-kernel")))
            if bars:
                panels.append((corpus["label"], bars))
        if panels:
            quick = " — quick run" if results.get("quick") else ""
            title = f"{m.title}, {m.unit} ({m.better} is better){quick}"
            out[m.key + ".svg"] = svg.bar_chart(title, panels, _footer(results))
    return out


def _footer(results: dict) -> str:
    m, s = results.get("machine", {}), results.get("settings", {})
    commits = sorted({commit for (_, _, commit) in _runs_behind(results)})
    return (f"median of {s.get('runs', '?')} run(s), whiskers min–max · {m.get('cpu', '?')}, "
            f"{m.get('cores', '?')} cores, {m.get('ram_gib', '?')} GiB · hoard "
            f"{', '.join(commits) or '?'} · {results.get('started', '')[:10]}")


def merge_previous(results: dict, out_dir: str) -> list:
    """Carries over, from the results.json already in `out_dir` (same --quick
    setting and same machine only), what this run did not measure: whole
    corpora, so that the suite can be run one corpus at a time, and the
    phases of a corpus this run left out (same corpus recipe), so that the
    mounts, say, can be measured again after a driver change. Returns what
    was kept, as text."""
    try:
        with open(os.path.join(out_dir, "results.json")) as f:
            prev = json.load(f)
    except (OSError, ValueError):
        return []
    same_machine = {k: prev.get("machine", {}).get(k) for k in ("cpu", "cores", "ram_gib")} == \
        {k: results.get("machine", {}).get(k) for k in ("cpu", "cores", "ram_gib")}
    if prev.get("quick") != results.get("quick") or not same_machine:
        return []
    kept = []
    for name, corpus in results["corpora"].items():
        old = prev.get("corpora", {}).get(name)
        if not old or old.get("recipe") != corpus.get("recipe"):
            continue
        carried = [p for p in PHASES if p not in corpus.get("phases", {}) and p in old]
        for p in carried:
            corpus[p] = old[p]
            corpus.setdefault("phases", {})[p] = phase_origins(old)[p]
        if carried:
            kept.append(f"{name}: {', '.join(carried)}")
    whole = [n for n in prev.get("corpora", {}) if n not in results["corpora"]]
    merged = {}
    for name in ORDER + [n for n in list(results["corpora"]) + whole if n not in ORDER]:
        if name in results["corpora"]:
            merged[name] = results["corpora"][name]
        elif name in whole:
            merged[name] = prev["corpora"][name]
    results["corpora"] = merged
    if kept or whole:  # what the earlier run could not run, too
        results["unavailable"] = {**prev.get("unavailable", {}),
                                  **results.get("unavailable", {})}
    return kept + whole


def phase_origins(corpus: dict) -> dict:
    """{phase: {command, date, hoard_commit}}: the run that measured each
    phase of a corpus (older results record it once per corpus)."""
    if "phases" in corpus:
        return corpus["phases"]
    origin = {k: corpus.get(k) for k in ("command", "date", "hoard_commit")}
    return {p: origin for p in PHASES if p in corpus}


def _runs_behind(results: dict) -> dict:
    """{(command, date, commit): ["corpus phase", ...]}: the runs whose
    figures the report shows, and what each measured."""
    runs = {}
    for name, corpus in results["corpora"].items():
        for phase, o in phase_origins(corpus).items():
            key = (o.get("command") or results["command"], (o.get("date") or "?")[:16],
                   o.get("hoard_commit") or "?")
            runs.setdefault(key, []).append(f"{name} {phase}")
    return runs


def write(results: dict, out_dir: str) -> str:
    """Writes results.json, the charts and README.md into `out_dir`."""
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    made = charts(results)
    for old in os.listdir(out_dir):
        if old.endswith(".svg") and old not in made:
            os.remove(os.path.join(out_dir, old))
    for fname, text in made.items():
        with open(os.path.join(out_dir, fname), "w") as f:
            f.write(text)
    with open(os.path.join(out_dir, "README.md"), "w") as f:
        f.write("\n".join(readme(results, made)) + "\n")
    return os.path.join(out_dir, "README.md")


def readme(results: dict, made: dict) -> list:
    m = results.get("machine", {})
    s = results.get("settings", {})
    quick = results.get("quick")
    lines = ["# hoard benchmarks" + (" — QUICK RUN (small corpora, for checking the suite, "
                                      "not for quoting)" if quick else ""), ""]
    runs = _runs_behind(results)
    if len(runs) <= 1:
        lines += ["Made by", "", "```sh", results["command"], "```", "",
                  f"from {results['started']} to {results.get('finished', '?')}.", ""]
    else:
        lines += ["Made by these runs (each measured the corpora and phases named after it):",
                  "", "```sh"]
        for (command, date, commit), what in sorted(runs.items(), key=lambda r: r[0][1]):
            lines.append(f"{command}   # {', '.join(what)}: {date}, hoard {commit}")
        lines += ["```", ""]
    if m:
        at = (f"hoard at `{m.get('hoard_commit')}`" if len(runs) <= 1 else
              f"The last run's hoard at `{m.get('hoard_commit')}`")
        lines += ["Machine: " + f"{m['cpu']}, {m['cores']} cores, {m['ram_gib']} GiB RAM; "
                  f"{m['os']}, Linux {m['kernel']}; disk {m['disk']}. {at}"
                  + (" (the work tree had uncommitted changes)"
                     if m.get("hoard_tree_dirty") else "")
                  + (f"; hoard binary: {s['hoard_binary']}" if s.get("hoard_binary") else "")
                  + ".", ""]
    if s:
        lines += [f"Each figure is the median of {s['runs']} run(s), the runs of competing tools "
                  "taking turns (round-robin, the order rotated each run); `[min–max]` is the "
                  "spread of the runs and `×` the ratio to hoard's default (`hoard -l7`, its "
                  "mount, its extraction; for sizes and times below 1 is better than hoard). "
                  f"Tools get {s['threads']} threads. Builds start with the corpus in the page "
                  f"cache. Cold reads and extractions: {_cold_text(s['cold'])}. fio: random "
                  f"`psync` reads, one job per thread, each reading {_bytes(s['fio_io_size']['4k'])} "
                  f"(4k) or {_bytes(s['fio_io_size']['64k'])} (64k) from the corpus's larger files"
                  + (" with O_DIRECT, so that every read reaches the driver" if s.get("fio_direct")
                     else " through the page cache") + ".", ""]
    vers = results.get("versions") or {}
    if vers:
        lines += ["Versions: " + "; ".join(f"{k}: {v}" for k, v in vers.items() if v) + ".", ""]
    if results.get("unavailable"):
        lines += ["Not run here: " + "; ".join(f"`{k}` ({v})" for k, v in
                                               results["unavailable"].items()) + ".", ""]
    lines += ["## Charts", ""]
    for metric in METRICS:
        fname = metric.key + ".svg"
        if fname in made:
            lines += [f"![{metric.title}]({fname})", ""]
    lines += ["## Tables", ""]
    for name, corpus in results["corpora"].items():
        lines += tables(name, corpus, results.get("unavailable") or {})
    lines += ["Raw samples: [results.json](results.json).", ""]
    return lines


def _cold_text(cold: str) -> str:
    if cold == "drop_caches":
        return ("page cache dropped (`/proc/sys/vm/drop_caches`) before each, and each mount "
                "fresh")
    return "a fresh mount each time, but the page cache could not be dropped (not root)"
