"""heads.plots.heatmaps: layer x head heatmaps with gnuplot (scripts/plot's scores, ablation,
importance and heads figures): panels stacked, one cell per head, the value written in each cell
when cells are large enough, one shared colour scale, one per panel, or a fixed one per panel.
Diverging (red below 0, white, blue above) when a scale spans 0. Any format heads.plots.gnuplot draws.

Knows nothing of results files: it gets [L, H] arrays and titles.
"""
import math
import os

import numpy as np

from . import gnuplot

SEQUENTIAL = ("set palette defined (0 '#ffffff', 0.1 '#deebf7', 0.3 '#9ecae1', 0.5 '#4292c6', "
              "0.75 '#08519c', 1 '#08306b')")
DIVERGING = ("set palette defined (0 '#b2182b', 0.25 '#ef8a62', 0.5 '#f7f7f7', 0.75 '#67a9cf', "
             "1 '#2166ac')")


def cell_text(v, fmt):
    if not np.isfinite(v):
        return "–"
    if fmt == "score":
        return f"{v:.2f}"
    a = abs(v)
    if a == 0:
        return "0"
    if fmt == "delta" and a >= 0.001 and a < 1000:
        return f"{v:+.3g}" if a >= 0.01 else f"{v:+.3f}"
    if a >= 0.01 and a < 1000:
        return f"{v:.3g}"
    m, e = f"{v:.1e}".split("e")
    return f"{m}e{int(e)}"  # 4.1e-4: short enough for a cell


def scale(values, fixed):
    """(lo, hi, palette): fixed (lo, hi) as given (diverging when lo < 0); else [0, max]
    (sequential) or, when some value is negative, [-m, m] around white (diverging)."""
    if fixed:
        return fixed[0], fixed[1], DIVERGING if fixed[0] < 0 else SEQUENTIAL
    finite = np.asarray(values, float)[np.isfinite(values)]
    top = float(np.max(np.abs(finite))) if finite.size else 1.0
    top = top if top > 0 else 1.0
    if finite.size and finite.min() < 0:
        return -top, top, DIVERGING
    return 0.0, top, SEQUENTIAL


def nice_step(span, n):
    """A step of 1, 2, 2.5 or 5 x 10^k that cuts span into at most about n parts."""
    raw = span / max(1, n)
    if not raw > 0 or not math.isfinite(raw):
        return 1.0
    mag = 10.0 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw * (1 - 1e-9))


def tic_step(lo, hi, n):
    """The largest nice step (1, 2, 2.5, 5 x 10^k) that puts at least 3 tics on [lo, hi] and at
    most n + 1 (2 when even the smallest that keeps n + 1 gives fewer)."""
    step = nice_step(hi - lo, n)
    for _ in range(8):
        if len(_tic_labels(lo, hi, step)) >= 3:
            return step
        smaller = nice_step(step * 0.999, 1.0001)  # the next nice step below
        while smaller >= step:
            smaller /= 2
        if len(_tic_labels(lo, hi, smaller)) > n + 1:
            return step
        step = smaller
    return step


def _tic_labels(lo, hi, step):
    first = math.ceil(lo / step - 1e-9)
    return ["%g" % (k * step if abs(k * step) > step * 1e-9 else 0.0)
            for k in range(first, int(math.floor(hi / step + 1e-9)) + 1)]


MAX_WIDTH = 1300  # px: panels go side by side up to this width; longer titles wrap at it
HEADER_FONT, TITLE_FONT = 11, 10


def layer_head_heatmaps(out, header, panels, tmp, shared=None, cblabel="value"):
    """panels: [(title, values [L, H], fmt 'score', 'value' or 'delta' (signed)[, (lo, hi)
    [, colour-box label]])]; shared: (lo, hi) of one colour scale for all panels (each panel's
    colour box then shows that one scale, labelled cblabel); else each panel gets its own
    scale, (lo, hi) when given, else fitted to its values.

    Laid out so that nothing is cut: cells of up to 80 px, panels side by side when several fit
    in MAX_WIDTH px, the header and each panel's title wrapped to the room they have (measured
    with heads.plots.gnuplot.text_px) and the figure as wide as its widest line; each panel's colour
    box beside it, no taller than the panel, with tics far enough apart to be read."""
    L, H = np.asarray(panels[0][1]).shape
    cell = int(max(18, min(80, 1000 / H, 640 / L)))
    panel_w, panel_h = H * cell, max(L * cell, 40)
    left = 80
    scales = []
    for title, values, fmt, *own in panels:
        lo, hi, palette = scale(np.asarray(values, float), shared or (own[0] if own else None))
        step = tic_step(lo, hi, max(2, min(8, panel_h // 18)))
        label = cblabel if shared else (own[1] if len(own) > 1 else None)
        scales.append((lo, hi, palette, step, label))
    tic_w = max(gnuplot.text_px(t, 8) for lo, hi, _, step, _ in scales
                for t in _tic_labels(lo, hi, step) or ["0"])
    right = 20 + 14 + 8 + int(tic_w) + (int(gnuplot.line_px(9)) + 14 if any(sc[4] for sc in scales)
                                         else 10)
    block = left + panel_w + right
    n_cols = max(1, min(len(panels), MAX_WIDTH // block))
    title_x = 16  # a title wider than its panel starts here in its column, over the y label
    title_room = block - 2 * title_x if n_cols > 1 else max(block, MAX_WIDTH) - 2 * title_x
    # a colour-box label is drawn along the box only when it fits the panel's height; else it
    # joins the header (one shared scale) or the panel's title
    fits = lambda label: label and gnuplot.text_px(label, 9) <= panel_h - 4
    titles = []
    for (title, *_), (_, _, _, _, label) in zip(panels, scales):
        if label and not fits(label) and not shared:
            title += f" (colour: {label})"
        titles.append(gnuplot.wrap(title, title_room, TITLE_FONT))
    if shared and cblabel and not fits(cblabel):
        header += f"; colour: {cblabel}"
    scales = [sc[:4] + (sc[4] if fits(sc[4]) else None,) for sc in scales]
    widest_title = max(gnuplot.text_px(line, TITLE_FONT) for t in titles for line in t)
    width = max(640, n_cols * block, title_x + int(widest_title) + title_x if n_cols == 1 else 0)
    head_lines = gnuplot.wrap(header, max(width, MAX_WIDTH) - 40, HEADER_FONT)
    width = int(max(width, max(gnuplot.text_px(x, HEADER_FONT) for x in head_lines) + 40))
    x_shift = max(0, (width - n_cols * block) // 2 if n_cols > 1 else
                  min((width - block) // 2, width - int(widest_title) - 2 * title_x))
    lp_head, lp_title = gnuplot.line_px(HEADER_FONT), gnuplot.line_px(TITLE_FONT)

    # vertical layout, in px from the top: header, then rows of (titles, panels, x tics)
    y = 14 + len(head_lines) * lp_head + 8
    places = []  # (x of the panel, y of its top, y of its first title line) per panel
    rows = [list(range(r, min(r + n_cols, len(panels)))) for r in range(0, len(panels), n_cols)]
    for r, members in enumerate(rows):
        lines_here = max(len(titles[k]) for k in members)
        title_y = y + lp_title / 2
        y += lines_here * lp_title + 6
        for c, k in enumerate(members):
            places.append((x_shift + c * block + left, y, title_y))
        y += panel_h + 26 + (22 if r == len(rows) - 1 else 16)
    height = int(y + 8)

    sx = lambda px: px / width
    sy = lambda px: 1.0 - px / height
    value_font = next((fs for fs in (9, 8, 7) if max(
        gnuplot.text_px(cell_text(v, p[2]), fs) for p in panels
        for v in np.asarray(p[1], float).ravel()) + 6 <= cell), None)
    lines = [gnuplot.terminal_for(out, width, height, 10), f"set output {gnuplot.gp_string(out)}",
             "set multiplot", "unset key", f"set xrange [-0.5:{H - 0.5}]",
             f"set yrange [{L - 0.5}:-0.5]",
             f"set xtics 0,{1 if H <= 16 else 2 if H <= 32 else 4} scale 0 font ',8'",
             "set ytics 0,1 scale 0 font ',9'", "set ylabel 'layer' font ',9'",
             "set format cb '%g'", "unset title"]
    words = []  # the header's and titles' labels: drawn with the first panel, then unset
    for i, text in enumerate(head_lines):
        words.append(f"set label {len(words) + 1} {gnuplot.gp_string(text)} at screen 0.5, screen "
                     f"{sy(14 + (i + 0.5) * lp_head)} center font ',{HEADER_FONT}'")
    for k, (x0, _, title_y) in enumerate(places):
        wide = max(gnuplot.text_px(t, TITLE_FONT) for t in titles[k]) > panel_w
        for i, text in enumerate(titles[k]):
            at = f"screen {sx(x0 - left + title_x)}" if wide else f"screen {sx(x0 + panel_w / 2)}"
            words.append(f"set label {len(words) + 1} {gnuplot.gp_string(text)} at {at}, screen "
                         f"{sy(title_y + i * lp_title)} {'left' if wide else 'center'} "
                         f"font ',{TITLE_FONT}'")
    lines += words
    last_row = {k for k in range(len(panels)) if k + n_cols >= len(panels)}  # of its column
    for k, (title, values, fmt, *own) in enumerate(panels):
        values = np.asarray(values, dtype=float)
        lo, hi, palette, step, label = scales[k]
        x0, y0, _ = places[k]
        path = os.path.join(tmp, f"heatmap_{k}.txt")
        gnuplot.write_matrix(path, values)
        lines += [palette, f"set cbrange [{lo}:{hi}]", f"set cbtics {step} font ',8'",
                  f"set lmargin at screen {sx(x0)}",
                  f"set rmargin at screen {sx(x0 + panel_w)}",
                  f"set tmargin at screen {sy(y0)}", f"set bmargin at screen {sy(y0 + panel_h)}",
                  "set xlabel 'head' font ',9' offset 0,0.5" if k in last_row else "unset xlabel",
                  f"set colorbox user origin screen {sx(x0 + panel_w + 20)}, screen "
                  f"{sy(y0 + panel_h)} size screen {sx(14)}, screen {panel_h / height}",
                  f"set cblabel {gnuplot.gp_string(label)} font ',9'" if label else "unset cblabel"]
        tags = []
        if value_font:
            for layer in range(L):
                for h in range(H):
                    v = values[layer, h]
                    t = (v - lo) / (hi - lo) if np.isfinite(v) else 0.0
                    dark = abs(t - 0.5) > 0.3 if lo < 0 else t > 0.55
                    tags.append(1000 + layer * H + h)
                    lines.append(f"set label {tags[-1]} {gnuplot.gp_string(cell_text(v, fmt))} at "
                                 f"{h},{layer} center front font ',{value_font}' textcolor rgb "
                                 f"'{'white' if dark else 'black'}'")
        lines.append(f"plot {gnuplot.gp_string(path)} matrix with {gnuplot.image_style(out)}")
        if k == 0:
            lines += [f"unset label {i + 1}" for i in range(len(words))]
        lines += [f"unset label {t}" for t in tags]
    lines.append("unset multiplot")
    gnuplot.run_gnuplot("\n".join(lines) + "\n", out, tmp)
