"""Server-rendered SVG bar charts: geometry computed here, drawn by the template."""
from django.utils.dateformat import format as format_date
from django.utils.translation import gettext, pgettext

WIDTH, HEIGHT, PAD_LEFT, PAD_BOTTOM, PAD_TOP = 600, 160, 28, 20, 8
# A phone's drawing: about as many units as the screen has pixels, and taller, so it is not a thin strip.
PHONE_WIDTH, PHONE_HEIGHT = 360, 220


def stacked_bars(rows: list[dict], *, series: tuple[str, ...] = ("helpful", "harmful"), width: int = WIDTH,
                 height: int = HEIGHT) -> dict:
    """Bars per row, one stacked segment per series, with y-axis ticks; empty when every value is 0."""
    WIDTH, HEIGHT = width, height  # noqa: N806 - the module's defaults, overridden for this drawing
    peak = max((sum(r[s] for s in series) for r in rows), default=0)
    plot_h = HEIGHT - PAD_BOTTOM - PAD_TOP
    slot = (WIDTH - PAD_LEFT) / max(len(rows), 1)
    bars = []
    for i, row in enumerate(rows):
        y = HEIGHT - PAD_BOTTOM
        x = PAD_LEFT + i * slot + slot * 0.15
        segments = []
        for name in series:
            h = plot_h * row[name] / peak if peak else 0
            y -= h
            if h:
                segments.append({"series": name, "x": round(x, 1), "y": round(y, 1), "h": round(h, 1)})
        # weekly, ending today; the format is translated ("M j" is "Nov 27", Chinese "11月27日")
        label = format_date(row["day"], pgettext("chart day", "M j")) if (len(rows) - 1 - i) % 7 == 0 else ""
        counts = ", ".join(gettext("%(count)s %(series)s") % {"count": row[s], "series": series_label(s)} for s in series)
        bars.append({"segments": segments, "label": label, "label_x": round(x + slot * 0.35, 1),
                     "title": f"{format_date(row['day'], 'Y-m-d')}: {counts}"})
    ticks = [{"value": v, "y": round(HEIGHT - PAD_BOTTOM - plot_h * v / peak, 1)} for v in sorted({0, peak // 2, peak})] if peak else []
    return {"bars": bars, "bar_width": round(slot * 0.7, 1), "ticks": ticks, "width": WIDTH, "height": HEIGHT,
            "axis_x": PAD_LEFT, "axis_y": HEIGHT - PAD_BOTTOM, "empty": peak == 0,
            "totals": {s: sum(r[s] for r in rows) for s in series}}


def unit_lines(rows: list[dict], *, series: tuple[str, ...], label: str) -> dict:
    """One line per series of values in 0..1 (metrics), a point per row, labelled by `row[label]`."""
    plot_h = HEIGHT - PAD_BOTTOM - PAD_TOP
    slot = (WIDTH - PAD_LEFT) / max(len(rows), 1)
    lines = []
    for name in series:
        points = [{"x": round(PAD_LEFT + slot * (i + 0.5), 1), "y": round(HEIGHT - PAD_BOTTOM - plot_h * row[name], 1),
                   "title": f"{row[label]}: {series_label(name)} {row[name]:.3f}"} for i, row in enumerate(rows)]
        lines.append({"series": name, "points": points, "path": " ".join(f"{p['x']},{p['y']}" for p in points)})
    labels = [{"x": round(PAD_LEFT + slot * (i + 0.5), 1), "text": row[label]} for i, row in enumerate(rows)]
    ticks = [{"value": f"{v:.1f}", "y": round(HEIGHT - PAD_BOTTOM - plot_h * v, 1)} for v in (0.0, 0.5, 1.0)]
    return {"lines": lines, "labels": labels, "ticks": ticks, "width": WIDTH, "height": HEIGHT, "axis_x": PAD_LEFT,
            "empty": not rows}


def series_label(name: str) -> str:
    """A series' name as a person reads it, in the current language (metric names stay as they are)."""
    return {"helpful": gettext("helpful"), "harmful": gettext("harmful")}.get(name, name)
