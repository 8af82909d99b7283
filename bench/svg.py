"""Horizontal bar charts as SVG text, standard library only.

`bar_chart(title, panels)` draws one chart: a title, then one panel per
corpus, each with its own scale, one bar per tool (the median), a whisker
for the spread of the runs (min–max) and the value written beside it. Bars
are coloured by family, hoard's stand out. Light and dark themes follow the
viewer's preference, like DwarFS's doc/perf charts.
"""

from __future__ import annotations

import dataclasses
import math
from xml.sax.saxutils import escape

COLORS = {"hoard": "#e0701b", "dwarfs": "#3b8f45", "squashfs": "#4878b0",
          "erofs": "#8a5aa6", "tar": "#8a8a8a"}

WIDTH = 860
LABEL_W = 230  # left column for tool names
VALUE_W = 120  # right margin for the value text
BAR_H = 20
BAR_GAP = 7
PANEL_HEAD = 26
AXIS_H = 22
PANEL_GAP = 16


@dataclasses.dataclass
class Bar:
    label: str
    family: str
    value: float | None  # None: no figure (failed or not run); `note` says why
    lo: float | None = None
    hi: float | None = None
    text: str = ""  # the value as printed
    note: str = ""
    faint: bool = False  # a reference row (kernel file systems)


def nice_ticks(top: float, count: int = 5) -> list:
    """0 and round steps (1, 2, 2.5 or 5 times a power of ten) up to `top`."""
    if top <= 0:
        return [0, 1]
    raw = top / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    n = math.ceil(top / step - 1e-9)
    return [i * step for i in range(n + 1)]


def _fmt_tick(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 1e6:
        return f"{v / 1e6:g}M"
    if abs(v) >= 1e4:
        return f"{v / 1e3:g}k"
    return f"{v:g}"


def bar_chart(title: str, panels: list, footer: str = "") -> str:
    """`panels`: [(panel title, [Bar, ...]), ...] -> the SVG document;
    `footer` is a line of small print under the panels."""
    x0 = LABEL_W
    x1 = WIDTH - VALUE_W
    y = 44
    body = []
    for ptitle, bars in panels:
        body.append(f'<text x="12" y="{y + 14}" class="t head">{escape(ptitle)}</text>')
        y += PANEL_HEAD
        top = max([b.hi if b.hi is not None else b.value for b in bars if b.value is not None]
                  + [0])
        ticks = nice_ticks(top * 1.02 if top > 0 else 1)
        scale = (x1 - x0) / ticks[-1]
        y_top = y
        y_end = y + len(bars) * (BAR_H + BAR_GAP)
        for t in ticks:
            x = x0 + t * scale
            body.append(f'<line x1="{x:.1f}" y1="{y_top - 3}" x2="{x:.1f}" y2="{y_end}" '
                        'class="grid"/>')
            body.append(f'<text x="{x:.1f}" y="{y_end + 13}" class="t tick" '
                        f'text-anchor="middle">{_fmt_tick(t)}</text>')
        for b in bars:
            cy = y + BAR_H / 2
            body.append(f'<text x="{x0 - 8}" y="{cy + 4}" class="t" text-anchor="end">'
                        f'{escape(b.label)}</text>')
            if b.value is None:
                body.append(f'<text x="{x0 + 6}" y="{cy + 4}" class="t note">'
                            f'{escape(b.note or "n/a")}</text>')
            else:
                w = max(b.value * scale, 1.0)
                color = COLORS.get(b.family, "#888")
                op = 0.45 if b.faint else (0.95 if b.family == "hoard" else 0.8)
                body.append(f'<rect x="{x0}" y="{y}" width="{w:.1f}" height="{BAR_H}" rx="2" '
                            f'fill="{color}" fill-opacity="{op}"/>')
                end = x0 + w
                if b.lo is not None and b.hi is not None and b.hi > b.lo:
                    xl, xh = x0 + b.lo * scale, x0 + b.hi * scale
                    body.append(f'<path d="M{xl:.1f} {cy:.1f}H{xh:.1f}'
                                f'M{xl:.1f} {cy - 5:.1f}V{cy + 5:.1f}'
                                f'M{xh:.1f} {cy - 5:.1f}V{cy + 5:.1f}" class="whisker"/>')
                    end = max(end, xh)
                body.append(f'<text x="{end + 6:.1f}" y="{cy + 4}" class="t">'
                            f'{escape(b.text)}</text>')
            y += BAR_H + BAR_GAP
        body.append(f'<line x1="{x0}" y1="{y_top - 3}" x2="{x0}" y2="{y_end}" class="axis"/>')
        y = y_end + AXIS_H + PANEL_GAP
    if footer:
        body.append(f'<text x="12" y="{y}" class="t tick">{escape(footer)}</text>')
        y += 12
    height = int(y)
    head = f'''<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" \
viewBox="0 0 {WIDTH} {height}" role="img" aria-label="{escape(title)}">
<style>
  .t {{ fill: #24292f; font: 12px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }}
  .title {{ font-size: 14px; font-weight: 600; }}
  .head {{ font-weight: 600; }}
  .tick {{ font-size: 10px; opacity: .75; }}
  .note {{ font-style: italic; opacity: .7; }}
  .grid {{ stroke: #24292f; stroke-opacity: .15; }}
  .axis {{ stroke: #24292f; }}
  .whisker {{ stroke: #24292f; stroke-width: 1.2; fill: none; }}
  @media (prefers-color-scheme: dark) {{
    .t {{ fill: #c9d1d9; }} .grid, .axis, .whisker {{ stroke: #c9d1d9; }}
  }}
</style>
<text x="12" y="24" class="t title">{escape(title)}</text>
'''
    return head + "\n".join(body) + "\n</svg>\n"
