"""heads.read.pruning: what a run's pruning curves say (the harness writes them to /prune: Michel et
al. 2019's iterative pruning, docs/analyses.md): the heads needed to keep the held-out loss
within a tolerance of the unpruned model (relative, with an absolute floor), and the fraction of
heads prunable; Holm's step-down adjustment of a family of p-values for the comparisons built on
them.

Knows the /prune layout and a Summary's run files; nothing of plotting or launching.
"""
import math

import numpy as np

CRITERIA = ("importance", "delta_loss")
CRITERION_TEXT = {"importance": "Michel importance (normalised per layer)",
                  "delta_loss": "measured single-head Δloss"}
# The heads-needed tolerance: a pruned model is "as good" while its loss stays within
# max(relative x unpruned loss, floor) of the unpruned loss. The floor keeps the count meaningful
# near zero loss (a run at 0.0012 nats would otherwise allow 0.00006). src/analysis/prune.h defines the
# same two numbers (PRUNE_TOLERANCE_RELATIVE, PRUNE_TOLERANCE_FLOOR) for the harness's table.
DEFAULT_TOLERANCE = 0.05
DEFAULT_FLOOR = 0.01  # nats


def read_curves(f):
    """{criterion: (heads_left, eval_loss)} from an open results file (empty without /prune)."""
    out = {}
    for c in CRITERIA:
        if f"prune/{c}/heads_left" in f and f"prune/{c}/eval_loss" in f:
            out[c] = (np.asarray(f[f"prune/{c}/heads_left"][()], dtype=int),
                      np.asarray(f[f"prune/{c}/eval_loss"][()], dtype=float))
    return out


def loss_limit(unpruned, tolerance=DEFAULT_TOLERANCE, floor=DEFAULT_FLOOR):
    """The highest loss that still counts as unharmed: unpruned + max(tolerance x unpruned,
    floor) (as src/analysis/prune.c's prune_loss_limit)."""
    return float(unpruned) + max(tolerance * float(unpruned), floor)


def tolerance_text(tolerance=DEFAULT_TOLERANCE, floor=DEFAULT_FLOOR):
    """The tolerance as the figures, tables and notes state it: 'max(5% of the loss, 0.01 nats)'."""
    return f"max({100 * tolerance:g}% of the loss, {floor:g} nats)"


def below_floor_warning(unpruned, floor=DEFAULT_FLOOR):
    """The warning for an unpruned loss below the floor (the floor, not the percentage, then
    decides how many heads are needed), or None."""
    if not unpruned < floor:
        return None
    return (f"the unpruned eval loss {unpruned:.3g} is below the {floor:g}-nat floor of the "
            "tolerance: heads needed counts heads whose removal costs more than the floor, "
            "so it is a coarse count here")


def heads_needed(heads_left, eval_loss, tolerance=DEFAULT_TOLERANCE, floor=DEFAULT_FLOOR):
    """Fewest heads left whose loss is within the tolerance (loss_limit) of the first (unpruned)
    point, every point before it within too (as src/analysis/prune.c's prune_heads_needed)."""
    limit = loss_limit(eval_loss[0], tolerance, floor)
    needed = int(heads_left[0])
    for left, loss in zip(heads_left[1:], eval_loss[1:]):
        if not loss <= limit:
            break
        needed = int(left)
    return needed


def summary_values(curves, tolerance=DEFAULT_TOLERANCE, floor=DEFAULT_FLOOR):
    """Summary columns of one run: heads_needed (the fewer of the two criteria), prunable_fraction
    (1 - heads_needed / all heads), and heads_needed_<criterion> for each; None without /prune."""
    row = {"heads_needed": None, "prunable_fraction": None}
    for c in CRITERIA:
        row[f"heads_needed_{c}"] = None
    if not curves:
        return row
    total = max(int(left[0]) for left, _ in curves.values())
    for c, (left, loss) in curves.items():
        row[f"heads_needed_{c}"] = heads_needed(left, loss, tolerance, floor)
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
