"""heads.plots.gnuplot: running gnuplot: the terminal for a figure's format (PNG: pngcairo, else png;
SVG: svg; PDF: pdfcairo), a script run with its errors reported as UserError, string literals,
and data files for it.

Knows nothing of results files or what is plotted.
"""
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

from ..core import safefile
from ..core.cli import UserError


_TERMINALS = None
FORMATS = ["png", "svg", "pdf"]  # --format of scripts/plot and plot-sweep



# The frame of a mean ± std chart with each seed a dot: a grid, the key below in one column,
# short error-bar caps, room above and below the points (plot-sweep's loss and tuning charts).
MEAN_STD_FRAME = ("set grid\nset key below vertical maxcols 1\nset bars 2\n"
                  "set offsets 0, 0, graph 0.05, graph 0.05")

def terminals():
    """The names of the terminals this gnuplot has."""
    global _TERMINALS
    if _TERMINALS is None:
        if not shutil.which("gnuplot"):
            raise UserError("gnuplot not found; install gnuplot-nox (scripts/install-deps)")
        p = subprocess.run(["gnuplot", "-e", "set terminal"], capture_output=True, text=True)
        _TERMINALS = set(re.findall(r"^\s*(\w+)\s", p.stdout + p.stderr, re.M))
    return _TERMINALS


def gnuplot_terminal():
    """'pngcairo' when this gnuplot has it, else 'png'."""
    return "pngcairo" if "pngcairo" in terminals() else "png"


def png_terminal(width, height, font_size=10):
    return terminal("png", width, height, font_size)


def terminal(fmt, width, height, font_size=10):
    """The `set terminal` line of a figure of width x height pixels (PDF: a pixel is a point,
    1/72 inch, so that fonts and lines keep the PNG's proportions; scale it in the paper).
    UTF-8 throughout, so ±, Δ and × print as such."""
    w, h = int(width), int(height)
    if fmt == "svg":
        return (f"set encoding utf8\nset terminal svg size {w},{h} noenhanced "
                f"font 'DejaVu Sans,{font_size}' background '#ffffff'")
    if fmt == "pdf":
        if "pdfcairo" not in terminals():
            raise UserError("--format pdf: this gnuplot has no pdfcairo terminal (Debian's "
                            "gnuplot-nox has it)")
        return (f"set encoding utf8\nset terminal pdfcairo size {w / 72:.3f}in,{h / 72:.3f}in "
                f"noenhanced font 'DejaVu Sans,{font_size}' fontscale 1 linewidth 1")
    if gnuplot_terminal() == "pngcairo":
        return (f"set encoding utf8\nset terminal pngcairo size {w},{h} noenhanced "
                f"font 'DejaVu Sans,{font_size}'")
    return f"set encoding utf8\nset terminal png size {w},{h} noenhanced font ',{font_size}'"


def image_style(path):
    """`with image` for a PNG; `with image pixels` (one rectangle per cell) for SVG and PDF,
    whose viewers would otherwise smooth a small embedded bitmap into a blur."""
    return "image" if path.lower().endswith(".png") else "image pixels"


def terminal_for(path, width, height, font_size=10):
    """terminal() for the format that path's extension names (.png, .svg, .pdf)."""
    return terminal(os.path.splitext(path)[1].lstrip(".").lower() or "png", width, height,
                    font_size)


def run_gnuplot(script, png_path, workdir=None):
    """Run a gnuplot script that writes png_path; raise UserError with gnuplot's message if it
    fails or leaves no (or an empty) file. gnuplot opens png_path itself: a link or a FIFO
    there is refused first (safefile's rule), never written through."""
    safefile.refuse_unsafe_target(png_path)
    with tempfile.TemporaryDirectory() as tmp:
        script_path = os.path.join(workdir or tmp, os.path.basename(png_path) + ".gp")
        with open(script_path, "w") as f:
            f.write(script)
        p = subprocess.run(["gnuplot", script_path], capture_output=True, text=True,
                           cwd=workdir or tmp)
    if p.returncode != 0 or not os.path.exists(png_path) or os.path.getsize(png_path) == 0:
        raise UserError(f"gnuplot failed on {png_path}:\n{p.stderr.strip()}")
    noise = [l for l in p.stderr.splitlines() if l.strip() and "warning" not in l.lower()]
    if noise:
        print("\n".join(noise), file=sys.stderr)


def gp_string(s):
    """A gnuplot double-quoted string literal: backslash, quote and newline escaped."""
    s = str(s).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return '"' + s.replace("\t", "\\t").replace("\r", "\\r") + '"'


def write_columns(path, header, rows):
    with open(path, "w") as f:
        f.write("# " + " ".join(header) + "\n")
        for row in rows:
            f.write(" ".join("nan" if v is None or (isinstance(v, float) and math.isnan(v))
                             else repr(float(v)) if isinstance(v, (float, np.floating))
                             else str(v) for v in row) + "\n")


def write_matrix(path, matrix):
    np.savetxt(path, np.asarray(matrix, dtype=float), fmt="%.6g")



# ---- text widths, so that a figure is made wide enough for its titles (or they are wrapped)
#
# Advance widths of DejaVu Sans (the font of every terminal above) in 1/1000 em, for the
# characters figures print; any other character counts as a wide one. A PNG (pngcairo) draws a
# font of size S points S * 4/3 pixels high; SVG and PDF draw it smaller on the same canvas, so
# a text that fits the PNG fits them.
_CHARS = (" !\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstu"
          "vwxyz{|}~±Δ×∂–—…÷≥≤→←²λσ·‘’“”√≈∑µμ−")
_ADVANCE = [318, 401, 460, 838, 636, 950, 780, 275, 390, 390, 500, 838, 318, 361, 318, 337, 636,
            636, 636, 636, 636, 636, 636, 636, 636, 636, 337, 337, 838, 838, 838, 531, 1000, 684,
            686, 698, 770, 632, 575, 775, 752, 295, 295, 656, 557, 863, 748, 787, 603, 787, 695,
            635, 611, 732, 684, 989, 685, 611, 685, 390, 337, 390, 838, 500, 500, 613, 635, 550,
            635, 615, 352, 635, 634, 278, 278, 579, 278, 974, 634, 612, 635, 635, 411, 521, 392,
            634, 592, 818, 592, 592, 525, 636, 337, 636, 838, 838, 684, 838, 517, 500, 1000,
            1000, 838, 838, 838, 838, 838, 401, 592, 634, 318, 318, 318, 518, 518, 637, 838, 674,
            636, 636, 838]
_WIDTH = dict(zip(_CHARS, _ADVANCE))


def text_px(text, size=10):
    """The width in PNG pixels of text (its widest line) in DejaVu Sans of size points, with 3%
    to spare (kerning, rounding)."""
    em = size * 4.0 / 3.0
    return max(sum(_WIDTH.get(c, 1000) for c in line) for line in str(text).split("\n")) \
        * em / 1000.0 * 1.03


def line_px(size=10):
    """The height of one line of text of size points in a PNG, with the gap to the next."""
    return size * 4.0 / 3.0 * 1.25


def wrap(text, max_px, size=10):
    """text as lines that are each at most max_px wide (text_px): its own lines, each broken
    at spaces, a word too long for a line alone on its line."""
    out = []
    for line in str(text).split("\n"):
        words, cur = line.split(" "), ""
        for w in words:
            trial = f"{cur} {w}" if cur else w
            if cur and text_px(trial, size) > max_px:
                out.append(cur)
                cur = w
            else:
                cur = trial
        out.append(cur)
    return out


def fit(text, max_px, size=10):
    """wrap()'s lines joined by newlines (a gnuplot title or label of several lines)."""
    return "\n".join(wrap(text, max_px, size))


def log_tics(lo, hi):
    """`set ytics (...)` at 1, 2 and 5 x 10^k within [lo, hi] (a log axis spanning less than a
    few decades, which gnuplot would label at its decades alone), or '' when that is over 12."""
    if not (0 < lo < hi) or not math.isfinite(hi):
        return ""
    tics = [m * 10.0 ** e for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
            for m in (1, 2, 5) if lo <= m * 10.0 ** e <= hi]
    if not 2 <= len(tics) <= 12:
        return ""
    return "set ytics (" + ", ".join(f'"{t:g}" {t!r}' for t in tics) + ")"
