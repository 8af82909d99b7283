"""Horizontal bar charts as standalone SVG (no plotting library needed)."""
from xml.sax.saxutils import escape

COLORS = {"hoard": "#2a7ab0", "other": "#9aa5b1"}


def bar_chart(title, unit, rows, path):
    """Writes a chart of `rows` [(label, value, low, high)] to `path`;
    low/high draw the spread of the runs as a whisker."""
    rows = [r for r in rows if r[1] is not None]
    if not rows:
        return False
    width, bar_h, gap, left, top = 760, 22, 8, 230, 40
    height = top + len(rows) * (bar_h + gap) + 30
    vmax = max(max(r[1], r[3] or r[1]) for r in rows) or 1
    scale = (width - left - 90) / vmax
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="13">',
           f'<rect width="100%" height="100%" fill="white"/>',
           f'<text x="{width / 2}" y="24" text-anchor="middle" font-size="15" '
           f'font-weight="bold">{escape(title)}</text>']
    for i, (label, value, low, high) in enumerate(rows):
        y = top + i * (bar_h + gap)
        color = COLORS["hoard"] if label.startswith("hoard") else COLORS["other"]
        out.append(f'<text x="{left - 8}" y="{y + bar_h * 0.7}" text-anchor="end">'
                   f'{escape(label)}</text>')
        out.append(f'<rect x="{left}" y="{y}" width="{max(value * scale, 1):.1f}" '
                   f'height="{bar_h}" fill="{color}"/>')
        if low is not None and high is not None and high > low:
            x1, x2, ym = left + low * scale, left + high * scale, y + bar_h / 2
            out.append(f'<line x1="{x1:.1f}" y1="{ym}" x2="{x2:.1f}" y2="{ym}" '
                       f'stroke="black"/>')
        out.append(f'<text x="{left + value * scale + 6:.1f}" y="{y + bar_h * 0.7}">'
                   f'{value:.3g} {escape(unit)}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    return True
