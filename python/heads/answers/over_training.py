"""heads.answers.over_training: a sweep's runs over training, the two questions of Olsson et al.
2022 asked of each run and then across seeds: does the ICL score's sharpest drop fall in the
interval where the induction heads formed, and does the layer-0 previous-token heads' ablation
Δloss rise before the layer-1 induction heads'?

Per run (every measured step is an interval between two stored steps, never rounded):
- ICL drop: the consecutive evaluations (a, b] between which /eval/icl_score falls most;
- formed: heads.read.steps.formation on every stored step (the one rule the report uses);
- Δloss rise of a head group: its largest single-head ablation Δloss over the group at each
  weight snapshot (/study_steps/<s>/heads/ablation_delta), and the first snapshot where that
  reaches RISE nats (the group matters), with the snapshot before it. The groups are the heads of
  the final model's class: prev in layer 0, induction in layer 1 (/scores/class). A group of
  redundant heads may never reach it: single-head ablation is what the study stores.
Across the runs of one head count: how many drops overlap the formation interval (and of the
others, how many come after it), how many prev rises come strictly before the induction rise, and
two-sided sign tests (binomial, p = 1/2) of "after" and of "prev first" over the runs where the
order is resolved (disjoint intervals).

Reads results files (h5py); writes nothing (scripts/over-training writes the CSV and figure).
"""
import glob
import math
import os

import h5py
import numpy as np

from ..read import steps as over_steps
from ..read.results import text

RISE = 0.1  # nats: a head group's Δloss "rises" at the first snapshot reaching this


def icl_drop(eval_steps, icl):
    """(a, b, change): the evaluations between which the ICL score falls most; None when fewer
    than two finite scores."""
    icl = np.asarray(icl, dtype=float)
    ok = np.flatnonzero(np.isfinite(icl))
    if len(ok) < 2:
        return None
    d = np.diff(icl[ok])
    i = int(np.argmin(d))
    return int(eval_steps[ok[i]]), int(eval_steps[ok[i + 1]]), float(d[i])


def rise(snap_steps, curve):
    """(a, b): the first snapshot b whose value reaches RISE, a the one before (-1 when b is the
    first); None when no snapshot reaches it."""
    curve = np.asarray(curve, dtype=float)
    if not len(curve) or not np.nanmax(curve) >= RISE:
        return None
    i = int(np.argmax(curve >= RISE))
    return (int(snap_steps[i - 1]) if i else -1), int(snap_steps[i])


def overlap(x, y):
    """Whether the intervals (a, b] x and y share a step."""
    return x is not None and y is not None and x[0] < y[1] and y[0] < x[1]


def measure(path):
    """One run's measures (docstring at the top): a dict of intervals (or None) and counts."""
    with h5py.File(path, "r") as f:
        n_head = int(f["config"].attrs["n_head"])
        seed = int(f["config"].attrs["seed"])
        eval_steps = np.asarray(f["eval/step"][()])
        icl = np.asarray(f["eval/icl_score"][()]) if "eval/icl_score" in f else np.full(len(eval_steps), np.nan)
        drop = icl_drop(eval_steps, icl)
        formed = over_steps.formation(*over_steps.scores_over_steps(f))
        classes = np.vectorize(text)(np.asarray(f["scores/class"][()]))  # [L, H], the final model
        snaps = sorted((int(s) for s in f["study_steps"]), key=int) if "study_steps" in f else []
        delta = np.stack([np.asarray(f[f"study_steps/{s}/heads/ablation_delta"][()]) for s in snaps]) \
            if snaps else np.zeros((0,) + classes.shape)
    groups = {"prev": (0, "prev"), "induction": (1, "induction")}
    out = {"run": os.path.basename(path)[:-3], "n_head": n_head, "seed": seed, "icl_drop": drop,
           "snapshots": snaps, "eval_steps": [int(s) for s in eval_steps], "icl": [float(v) for v in icl]}
    for name, (layer, cls) in groups.items():
        heads = [h for h in range(classes.shape[1]) if layer < classes.shape[0] and classes[layer, h] == cls]
        m = formed.get(cls)
        out[f"formed_{name}"] = (m["after"], m["step"]) if m else None
        out[f"heads_{name}"] = len(heads)
        curve = delta[:, layer, heads].max(axis=1) if heads and snaps else []
        out[f"delta_{name}"] = [float(v) for v in curve]
        out[f"rise_{name}"] = rise(snaps, curve) if len(curve) else None
    f = out["formed_induction"]
    out["drop_in_formation"] = overlap(drop, f) if drop and f else None
    out["drop_after_formation"] = None if not drop or not f or overlap(drop, f) else drop[0] >= f[1]
    a, b = out["rise_prev"], out["rise_induction"]
    out["prev_first"] = None if a is None or b is None or a == b else a[1] <= b[0]
    return out


def sign_test(k, n):
    """Two-sided binomial sign test of k successes in n at p = 1/2 (exact)."""
    if n == 0:
        return float("nan")
    tail = sum(math.comb(n, i) for i in range(0, min(k, n - k) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def runs_of(directory):
    """(the complete runs' files of a sweep folder whose study covers every weight snapshot, the
    others' names), sorted."""
    paths, partial = [], []
    for p in sorted(glob.glob(os.path.join(directory, "*.h5"))):
        if os.path.basename(p).startswith("summary"):
            continue
        with h5py.File(p, "r") as f:
            if text(f.attrs.get("status", "")) != "complete":
                continue
            snaps = {int(s) for s in f["snapshots/step"][()]} if "snapshots/step" in f else set()
            studied = {int(s) for s in f["study_steps"]} if "study_steps" in f else set()
            (paths if snaps and snaps == studied else partial).append(p)
    return paths, [os.path.basename(p)[:-3] for p in partial]


def answers(directory):
    """{"runs": [measure(...)], "by_n_head": {n: counts(...)}, "all": counts of every run,
    "left_out": the complete runs without a study at every snapshot}."""
    paths, left_out = runs_of(directory)
    runs = [measure(p) for p in paths]
    by = {n: counts([r for r in runs if r["n_head"] == n]) for n in sorted({r["n_head"] for r in runs})}
    return {"runs": runs, "by_n_head": by, "all": counts(runs), "left_out": left_out}


def counts(rs):
    """The counts and sign tests of a set of measured runs."""
    coincide = [r["drop_in_formation"] for r in rs if r["drop_in_formation"] is not None]
    after = [r["drop_after_formation"] for r in rs if r["drop_after_formation"] is not None]
    order = [r["prev_first"] for r in rs if r["prev_first"] is not None]
    return {"runs": len(rs), "formed": sum(r["formed_induction"] is not None for r in rs),
            "drop_in_formation": sum(coincide), "drop_measured": len(coincide),
            "drop_after": sum(after), "drop_outside": len(after),
            "drop_sign_p": sign_test(sum(after), len(after)),
            "prev_first": sum(order), "order_resolved": len(order),
            "sign_p": sign_test(sum(order), len(order))}


def interval(x):
    return "n/a" if x is None else f"({x[0]}, {x[1]}]" if x[0] >= 0 else f"at {x[1]}"


ROW_COLUMNS = ["run", "n_head", "seed", "ICL drop (nats)", "induction formed", "drop in it",
               "prev Δ rise", "induction Δ rise", "prev first"]


def row_cells(r):
    d = r["icl_drop"]
    yes = {True: "yes", False: "no", None: "n/a"}
    return [r["run"], str(r["n_head"]), str(r["seed"]),
            "n/a" if d is None else f"({d[0]}, {d[1]}] {d[2]:+.3f}", interval(r["formed_induction"]),
            yes[r["drop_in_formation"]], interval(r["rise_prev"]), interval(r["rise_induction"]),
            yes[r["prev_first"]]]
