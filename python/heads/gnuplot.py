"""heads.gnuplot: running gnuplot: the terminal this gnuplot has (pngcairo, else png), a script
run with its errors reported as UserError, string literals, and data files for it.

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

from .cli import UserError


_TERMINAL = None


def gnuplot_terminal():
    """'pngcairo' when this gnuplot has it, else 'png'."""
    global _TERMINAL
    if _TERMINAL is None:
        if not shutil.which("gnuplot"):
            raise UserError("gnuplot not found; install gnuplot-nox (scripts/install-deps)")
        p = subprocess.run(["gnuplot", "-e", "set terminal"], capture_output=True, text=True)
        listing = p.stdout + p.stderr
        _TERMINAL = "pngcairo" if re.search(r"^\s*pngcairo\b", listing, re.M) else "png"
    return _TERMINAL


def png_terminal(width, height, font_size=10):
    term = gnuplot_terminal()
    if term == "pngcairo":
        return (f"set terminal pngcairo size {int(width)},{int(height)} noenhanced "
                f"font 'DejaVu Sans,{font_size}'")
    return f"set terminal png size {int(width)},{int(height)} noenhanced font ',{font_size}'"


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


def token_label(byte):
    """A byte of a text probe as a one-character axis label: visible space and newline."""
    c = chr(byte) if isinstance(byte, int) else byte
    return {" ": "␣", "\n": "↵", "\t": "→", "\r": "␍"}.get(c, c if c.isprintable() else "·")
