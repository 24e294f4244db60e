"""heads.plots.heatmaps: layer x head heatmaps with gnuplot (scripts/plot's scores, ablation,
importance and heads figures): panels stacked, one cell per head, the value written in each cell
when cells are large enough, one shared colour scale, one per panel, or a fixed one per panel.
Diverging (red below 0, white, blue above) when a scale spans 0. Any format heads.plots.gnuplot draws.

Knows nothing of results files: it gets [L, H] arrays and titles.
"""
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


def layer_head_heatmaps(out, header, panels, tmp, shared=None, cblabel="value"):
    """panels: [(title, values [L, H], fmt 'score', 'value' or 'delta' (signed)[, (lo, hi)
    [, colour-box label]])]; shared: (lo, hi) of one colour scale for all panels (one colour box
    labelled cblabel); else each panel gets its own colour box, on its own (lo, hi) when given,
    else fitted to its values."""
    L, H = np.asarray(panels[0][1]).shape
    cell = int(max(18, min(56, 1000 / H)))
    left, right, top, bottom, gap = 80, 150, 80 + 16 * header.count("\n"), 45, 75  # a line more per header line
    panel_h = max(L * cell, 40)
    width = max(left + H * cell + right, 640)
    height = top + len(panels) * (panel_h + gap) - gap + bottom
    sx = lambda px: px / width
    sy = lambda px: 1.0 - px / height
    show_values = cell >= 30
    lines = [gnuplot.terminal_for(out, width, height, 10), f"set output {gnuplot.gp_string(out)}",
             "set multiplot", "unset key", f"set xrange [-0.5:{H - 0.5}]",
             f"set yrange [{L - 0.5}:-0.5]",
             f"set xtics 0,{1 if H <= 16 else 2 if H <= 32 else 4} scale 0 font ',8'",
             "set ytics 0,1 scale 0 font ',9'", "set ylabel 'layer' font ',9'",
             f"set label 1 {gnuplot.gp_string(header)} at screen 0.5, screen {sy(25)} center "
             "font ',11'"]
    for k, (title, values, fmt, *own) in enumerate(panels):
        values = np.asarray(values, dtype=float)
        lo, hi, palette = scale(values, shared or (own[0] if own else None))
        y0 = top + k * (panel_h + gap)
        path = os.path.join(tmp, f"heatmap_{k}.txt")
        gnuplot.write_matrix(path, values)
        lines += [palette, f"set cbrange [{lo}:{hi}]",
                  f"set lmargin at screen {sx(left)}",
                  f"set rmargin at screen {sx(left + H * cell)}",
                  f"set tmargin at screen {sy(y0)}", f"set bmargin at screen {sy(y0 + panel_h)}",
                  f"set title {gnuplot.gp_string(title)} font ',10'",
                  "set xlabel 'head' font ',9' offset 0,0.5" if k == len(panels) - 1
                  else "unset xlabel"]
        tags = []
        if show_values:
            for layer in range(L):
                for h in range(H):
                    v = values[layer, h]
                    t = (v - lo) / (hi - lo) if np.isfinite(v) else 0.0
                    dark = abs(t - 0.5) > 0.3 if lo < 0 else t > 0.55
                    tags.append(100 + layer * H + h)
                    lines.append(f"set label {tags[-1]} {gnuplot.gp_string(cell_text(v, fmt))} at "
                                 f"{h},{layer} center front font ',8' textcolor rgb "
                                 f"'{'white' if dark else 'black'}'")
        if shared is None:
            lines += [f"set colorbox user origin screen {sx(left + H * cell + 20)}, screen "
                      f"{sy(y0 + panel_h)} size screen {sx(14)}, screen {panel_h / height}",
                      "set cbtics font ',8'",
                      f"set cblabel {gnuplot.gp_string(own[1])} font ',9'" if len(own) > 1
                      else "unset cblabel"]
        elif k == len(panels) - 1:
            lines += [f"set colorbox user origin screen {sx(left + H * cell + 40)}, screen "
                      f"{sy(height - bottom)} size screen {sx(18)}, screen "
                      f"{(height - top - bottom) / height}",
                      f"set cblabel {gnuplot.gp_string(cblabel)} font ',10'"]
        else:
            lines.append("unset colorbox")
        lines.append(f"plot {gnuplot.gp_string(path)} matrix with {gnuplot.image_style(out)}")
        if k == 0:
            lines.append("unset label 1")
        lines += [f"unset label {t}" for t in tags]
    lines.append("unset multiplot")
    gnuplot.run_gnuplot("\n".join(lines) + "\n", out, tmp)
