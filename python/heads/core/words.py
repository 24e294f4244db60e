"""heads.core.words: numbers and words as every table, note, figure and page prints them: p values
(two significant digits, scientific below 1e-3) and counts with the noun's plural (the harness's
own table picks its articles in src/analysis/head_table.c).

Pure functions of numbers and text: knows nothing of runs or files.
"""
import math

from .configs import format_value


def fmt_p(p):
    """A p value: two significant digits, scientific below 1e-3 (0.043, 0.0012, 4.3e-05)."""
    if p is None or p != p:
        return "n/a"
    if p < 1e-3:
        return f"{p:.1e}"
    rounded = float(f"{p:.2g}")  # 0.996 -> 1.0, so the decimals follow the rounded value
    return f"{rounded:.{max(0, 1 - math.floor(math.log10(rounded)))}f}"


def plural(n, noun, plural_form=None):
    """'1 head', '3 heads', '2.5 heads' (a mean); plural_form for irregular nouns."""
    many = plural_form or noun + "s"
    text = format_value(n) if not (isinstance(n, float) and n.is_integer()) else str(int(n))
    return f"{text} {noun if n == 1 else many}"
