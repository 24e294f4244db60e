"""heads.report.report_study: a run's head study (/prune and /circuits, written by the harness at the end
of a run or by `harness prune`) as the data of the report page's "Pruning" and "Composition"
sections: both pruning curves with the order heads were removed and the heads needed within the
tolerance, one head per layer, and the Q-, K-, V-composition scores with their random baselines.

Knows the /prune and /circuits layout (docs/results-format.md); knows nothing of HTML.
"""
import numpy as np

from ..read import pruning
from ..read.results import text

COMPOSITION = ("q_composition", "k_composition", "v_composition")
DIGITS = 4  # composition scores in the page: rounded to 4 decimals (the page says so)


def _plain(v):
    v = float(v)
    return v if np.isfinite(v) else None


def read_prune(f, tolerance=pruning.DEFAULT_TOLERANCE):
    """The pruning section's data, or None when the file has no /prune."""
    curves = pruning.read_curves(f)
    if not curves:
        return None
    unpruned = _plain(f["prune"].attrs.get("unpruned_eval_loss",
                                           next(iter(curves.values()))[1][0]))
    out = {"tolerance_text": pruning.tolerance_text(tolerance), "criteria": {},
           "unpruned": unpruned, "limit": pruning.loss_limit(unpruned, tolerance),
           "warning": pruning.below_floor_warning(unpruned)}
    H = int(f["config"].attrs["n_head"]) if "config" in f else 1
    for c, (left, loss) in curves.items():
        order = np.asarray(f[f"prune/{c}/order"][()], int) if f"prune/{c}/order" in f else []
        out["criteria"][c] = {
            "title": pruning.CRITERION_TEXT[c], "heads_left": [int(x) for x in left],
            "eval_loss": [_plain(x) for x in loss],  # float64 as in the file (JSON keeps it)
            "order": [[int(k) // H, int(k) % H] for k in order],
            "step_heads": _plain(f[f"prune/{c}"].attrs.get("step_heads", float("nan"))),
            "heads_needed": pruning.heads_needed(left, loss, tolerance)}
    one = "prune/one_head_per_layer"
    if f"{one}/best_head" in f:
        out["one_head"] = {
            "delta_loss": [[_plain(v) for v in row] for row in f[f"{one}/delta_loss"][()]],
            "best_head": [int(h) for h in f[f"{one}/best_head"][()]],
            "best_delta_loss": [_plain(v) for v in f[f"{one}/best_delta_loss"][()]]}
    return out


def read_circuits(f, cfg):
    """The composition section's data: {"kinds": {name: {values [L,H,L,H] (None where no score),
    random_baseline}}, "note": why some or all are missing, or None}."""
    kinds, note = {}, None
    for k in COMPOSITION:
        if f"circuits/{k}" not in f:
            continue
        ds = f[f"circuits/{k}"]
        v = np.round(np.asarray(ds[()], dtype=float), DIGITS)
        kinds[k] = {"values": np.where(np.isfinite(v), v, None).tolist(),  # NaN (no pair): null
                    "random_baseline": _plain(ds.attrs.get("random_baseline", float("nan")))}
        if "note" in ds.attrs:
            note = text(ds.attrs["note"])
    if not kinds:
        if cfg.get("output_gate"):
            note = ("no composition scores: with model.output_gate a head's output is gated by "
                    "its input, so W_OV is not one matrix")
        elif int(cfg.get("n_layer", 1)) < 2:
            note = "no composition scores: one layer has no earlier head to read from"
        else:
            note = ("this file has no composition scores (/circuits): `harness prune RUN.h5` "
                    "adds them")
    return {"kinds": kinds, "note": note, "digits": DIGITS}
