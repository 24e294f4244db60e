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

from ..core.cli import UserError


_TERMINALS = None
FORMATS = ["png", "svg", "pdf"]  # --format of scripts/plot and plot-sweep


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
    fails or leaves no (or an empty) file."""
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

