"""heads.pruning: what a run's pruning curves say (the harness writes them to /prune: Michel et
al. 2019's iterative pruning, docs in the README's Per-head analysis): the heads needed to keep
the held-out loss within a tolerance of the unpruned model, and the fraction of heads prunable;
Holm's step-down adjustment of a family of p-values for the comparisons built on them.

Knows the /prune layout and a Summary's run files; nothing of plotting or launching.
"""
import math
import os

import numpy as np

CRITERIA = ("importance", "delta_loss")
CRITERION_TEXT = {"importance": "Michel importance (normalised per layer)",
                  "delta_loss": "measured single-head Δloss"}
DEFAULT_TOLERANCE = 0.05


def read_curves(f):
    """{criterion: (heads_left, eval_loss)} from an open results file (empty without /prune)."""
    out = {}
    for c in CRITERIA:
        if f"prune/{c}/heads_left" in f and f"prune/{c}/eval_loss" in f:
            out[c] = (np.asarray(f[f"prune/{c}/heads_left"][()], dtype=int),
                      np.asarray(f[f"prune/{c}/eval_loss"][()], dtype=float))
    return out


def heads_needed(heads_left, eval_loss, tolerance=DEFAULT_TOLERANCE):
    """Fewest heads left whose loss is within `tolerance` (relative) of the first (unpruned)
    point, every point before it within too (as src/prune.c's prune_heads_needed)."""
    limit = float(eval_loss[0]) * (1.0 + tolerance)
    needed = int(heads_left[0])
    for left, loss in zip(heads_left[1:], eval_loss[1:]):
        if not loss <= limit:
            break
        needed = int(left)
    return needed


def summary_values(curves, tolerance=DEFAULT_TOLERANCE):
    """Summary columns of one run: heads_needed (the fewer of the two criteria), prunable_fraction
    (1 - heads_needed / all heads), and heads_needed_<criterion> for each; None without /prune."""
    row = {"heads_needed": None, "prunable_fraction": None}
    for c in CRITERIA:
        row[f"heads_needed_{c}"] = None
    if not curves:
        return row
    total = max(int(left[0]) for left, _ in curves.values())
    for c, (left, loss) in curves.items():
        row[f"heads_needed_{c}"] = heads_needed(left, loss, tolerance)
    row["heads_needed"] = min(row[f"heads_needed_{c}"] for c in curves)
    row["prunable_fraction"] = 1.0 - row["heads_needed"] / total if total else float("nan")
    return row


def holm(p_values):
    """Holm (1979) step-down adjusted p-values, in the input order; nan stays nan and is not
    counted in the family. p_(i) sorted ascending gets max_{j<=i} min(1, (m - j + 1) p_(j))."""
    idx = [i for i, p in enumerate(p_values) if not math.isnan(p)]
    m = len(idx)
    out = [float("nan")] * len(p_values)
    running = 0.0
    for rank, i in enumerate(sorted(idx, key=lambda i: p_values[i])):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        out[i] = running
    return out


def sweep_curves(s, criterion):
    """{n_head: (fraction pruned, mean eval loss over seeds, seeds)} of one criterion over the
    complete runs of a Summary that have /prune; one series per head count (other swept keys are
    pooled; a seed whose curve has other points than the first seed's is left out)."""
    from . import results  # here: results imports this module
    by_heads = {}
    for i in range(s.n):
        if s["status"][i] != "complete" or not os.path.exists(s.run_path(i)):
            continue
        with results.open_file(s.run_path(i)) as f:  # a damaged file: one line
            curves = read_curves(f)
        if criterion in curves:
            by_heads.setdefault(int(s["n_head"][i]), []).append(curves[criterion])
    out = {}
    for h, runs in by_heads.items():
        left = runs[0][0]
        same = [loss for l, loss in runs if len(l) == len(left) and (l == left).all()]
        out[h] = (1.0 - left / float(left[0]), np.mean(same, axis=0), len(same))
    return out
