"""heads.plots.sweep_style: what every figure of a sweep shares (scripts/plot-sweep, the L0
figure): the colours of series and head classes, the x axis of the key compared along (its tics,
their texts and label, the dodge of a group's points), the style of a series, and the room below a
plot for its key and tic lines.

Knows a sweep's layout (heads.answers.sweepaxes.Layout); nothing of which figure uses it.
"""
from ..core import configs
from ..read import results
from ..answers import sweepaxes

SERIES_COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",
                  "#7f7f7f", "#bcbd22", "#17becf"]
CLASS_COLOURS = {"prev": "#1f77b4", "self": "#2ca02c", "first": "#ff7f0e", "induction": "#d62728",
                 "duplicate": "#9467bd", "mixed": "#c7c7c7"}


def sequential(i, n):
    """Colour i of n along a light-to-dark blue-purple ramp (head counts in order)."""
    t = 0.0 if n <= 1 else i / (n - 1)
    stops = [(0.0, (0x9e, 0xca, 0xe1)), (0.35, (0x42, 0x92, 0xc6)), (0.7, (0x6a, 0x51, 0xa3)),
             (1.0, (0x3f, 0x00, 0x7d))]
    for (t0, c0), (t1, c1) in zip(stops, stops[1:]):
        if t <= t1:
            u = (t - t0) / (t1 - t0)
            return "#%02x%02x%02x" % tuple(int(round(a + u * (b - a))) for a, b in zip(c0, c1))
    return "#3f007d"


def x_tics(layout, s):
    """gnuplot xtics at positions 0, 1, ... of the by key's values; head counts also say d_head
    (or E = H x d_head when d_head is fixed)."""
    return "set xtics (" + ", ".join(f'"{t}" {j}' for j, t in enumerate(x_tic_texts(layout, s))) \
        + ")"


def x_tic_texts(layout, s):
    """The labels of x_tics(), gnuplot-escaped ('\\n' between lines)."""
    parts = []
    heads = layout.by in sweepaxes.HEAD_KEYS
    d_heads = {}
    for idx in layout.points.values():
        for i in idx:
            d_heads.setdefault(results.plain(s[layout.by][i]), set()).add(int(s["d_head"][i]))
    one_width = heads and len(set().union(*d_heads.values())) == 1
    widths = {}  # a layout's attention width E = n_head x d_head, under its label
    for idx in layout.points.values():
        for i in idx:
            widths.setdefault(results.plain(s[layout.by][i]), set()).add(
                int(s["n_head"][i]) * int(s["d_head"][i]))
    for j, v in enumerate(layout.by_values):
        extra = ""
        dh = d_heads.get(v, set())
        if heads and len(dh) == 1:
            extra = f"\\nE {v * next(iter(dh))}" if one_width else f"\\ndh {next(iter(dh))}"
        elif layout.layout_heads and len(widths.get(v, ())) == 1:
            extra = f"\\nE {next(iter(widths[v]))}"
        parts.append(f"{configs.format_value(v)}{extra}")
    return parts


def x_tic_lines(layout, s):
    """The lines of x_tics()'s labels."""
    return 1 + max(t.count("\\n") for t in x_tic_texts(layout, s))


def x_label(layout):
    return layout.axis_label()


def dodge(layout, k):
    """The x offset of group k's points on a layout axis (categories: the groups side by side
    at each, not on top of each other); 0 along an ordered axis."""
    n = len(layout.groups)
    return 0.0 if layout.by != sweepaxes.LAYOUT or n < 2 else (k - (n - 1) / 2) * min(0.12, 0.5 / n)


def series_style(layout):
    """Points of one series joined by lines along an ordered axis; a layout's points are
    categories, each its own bar."""
    return "yerrorbars" if layout.by == sweepaxes.LAYOUT else "yerrorlines"


def below_plot(layout, key_rows, tic_lines=2):
    """(bmargin in character rows, extra height in px) for a figure whose x tics have tic_lines
    lines, its x label under them and its key below in key_rows rows (one entry a row)."""
    rows = tic_lines + 1.6 + 1.15 * key_rows + 0.8
    return rows, int(max(0, rows - 7) * 15.5)  # 15.5 px: a character row of the 10-point font


def group_colours(layout):
    return {g: SERIES_COLOURS[k % len(SERIES_COLOURS)] for k, g in enumerate(layout.groups)}
