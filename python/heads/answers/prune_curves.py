"""heads.answers.prune_curves: a sweep's pruning curves per point of its layout: each point's runs'
/prune (heads.read.pruning.read_curves) averaged over seeds, for plot-sweep and the sweep report.
"""
import os

import numpy as np

from ..read import results
from ..read.pruning import read_curves


def sweep_curves(s, criterion, keys, points):
    """{point: (fraction pruned, heads left, mean eval loss, its sample std, seeds)} of one
    criterion: points {values of keys: [row indices]} (heads.answers.sweepaxes.Layout), each point's runs
    with /prune averaged (a seed whose curve has other points than the point's first is left
    out); points without curves are left out."""
    out = {}
    for point, idx in points.items():
        runs = []
        for i in idx:
            if not os.path.exists(s.run_path(i)):
                continue
            with results.open_file(s.run_path(i)) as f:  # a damaged file: one line
                got = read_curves(f)
            if criterion in got:
                runs.append(got[criterion])
        if not runs:
            continue
        left = runs[0][0]
        same = np.asarray([loss for l, loss in runs if len(l) == len(left) and (l == left).all()])
        std = same.std(axis=0, ddof=1) if len(same) > 1 else np.full(len(left), np.nan)
        out[point] = (1.0 - left / float(left[0]), left, same.mean(axis=0), std, len(same))
    return out
