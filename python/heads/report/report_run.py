"""heads.report.report_run: one results file as the data of an interactive report page (scripts/report).

Reads the run (attention maps and pattern scores at every stored step, /attn's and the weight
snapshots' studies'; losses; the final model's and each snapshot's classes, head table and
composition through report_steps; the pruning curves through report_study, the causal evidence
through report_causal) and returns a plain dict that report_page serialises into the page.
Attention maps are stored in the page as 8-bit integers
round(255·p) (only the causal lower triangle) whenever every map value lies in [0, 1], which
keeps each shown weight within 1/510 of the file's; otherwise as float32.

Knows the results-file layout (docs/results-format.md); knows nothing of HTML or JavaScript.
"""
import base64
import os

import numpy as np

from . import report_steps, report_study
from ..read import results, steps as over_training
from ..core import tokens as tok
from ..core.cli import UserError

PATTERNS = results.PATTERNS  # the reader's, which tests/test_rules.py checks against the harness
QUANT_LEVELS = 255


def _floats(a, digits=6):
    """A float array as nested lists of Python floats (NaN/inf as None: JSON has neither)."""
    a = np.asarray(a, dtype=float)
    out = np.round(a, digits).tolist()
    if np.all(np.isfinite(a)):
        return out

    def clean(x):
        if isinstance(x, list):
            return [clean(v) for v in x]
        return x if x == x and abs(x) != float("inf") else None
    return clean(out)


def encode_maps(maps):
    """maps [S,L,H,P,T,T] float -> (encoding, base64 text, max abs error of the encoding).

    Only the lower triangle (j <= i) of each T x T map is kept, row by row."""
    S, L, H, P, T, _ = maps.shape
    rows, cols = np.tril_indices(T)
    tri = maps[..., rows, cols]  # [S,L,H,P,T(T+1)/2]
    finite = np.all(np.isfinite(tri))
    if finite and tri.size and tri.min() >= 0.0 and tri.max() <= 1.0:
        q = np.round(tri * QUANT_LEVELS).astype(np.uint8)
        error = float(np.max(np.abs(q / QUANT_LEVELS - tri))) if tri.size else 0.0
        return "u8", base64.b64encode(q.tobytes()).decode("ascii"), error
    data = np.ascontiguousarray(tri, dtype="<f4")
    return "f32", base64.b64encode(data.tobytes()).decode("ascii"), 0.0


def pick_snapshots(n_steps, bytes_per_snapshot, budget):
    """Indices of the snapshots kept within budget bytes: evenly spaced, always the last."""
    keep = max(1, min(n_steps, budget // max(1, bytes_per_snapshot)))
    if keep >= n_steps:
        return list(range(n_steps))
    idx = np.unique(np.round(np.linspace(0, n_steps - 1, keep)).astype(int))
    return [int(i) for i in idx]


def _config(f):
    if "config" not in f:
        return {}
    out = {}
    for k, v in f["config"].attrs.items():
        v = v.item() if isinstance(v, np.generic) else v
        v = results.text(v) if isinstance(v, (bytes, str, np.ndarray)) else v
        out[k] = {"true": True, "false": False}.get(v, v) if isinstance(v, str) else v
    return out  # booleans as written today ("true"/"false") or as HDF5 booleans: both bool


def _probes(f, cfg, P, T):
    pieces = results.read_strings(f, "/tokenizer/pieces")
    labels = results.read_strings(f, "/probe/labels")
    task = cfg.get("task", "")
    out = []
    for p in range(P):
        ids = [int(x) for x in f["probe/tokens"][p][:T]] if "probe/tokens" in f else list(range(T))
        out.append({"tokens": ids,
                    "labels": tok.token_labels(task, int(cfg.get("vocab_size", 0)), ids, pieces),
                    "text": labels[p] if labels and p < len(labels) else None,
                    "marked": [int(x) for x in f["probe/marked"][p][:T]] if "probe/marked" in f else None})
    legend = ("tokens are the tokenizer's pieces (▁ = space)" if pieces is not None
              else tok.task_legend(task, int(cfg.get("vocab_size", 0))))
    return out, legend


def read_run(path, map_budget=16 << 20):
    """The page data of one results file (a dict of JSON-able values)."""
    with results.open_file(path) as f:  # refuses a format_version this reader does not know
        if "config" not in f:
            raise UserError(f"{path}: not a harness results file (no /config group)")
        cfg = _config(f)
        name = os.path.splitext(os.path.basename(path))[0]
        d = {"kind": "run", "name": name, "file": os.path.basename(path),
             "status": results.text(f.attrs.get("status", "?")),
             "created": results.text(f.attrs.get("created", "")),
             "harness_version": results.text(f.attrs.get("harness_version", "")),
             "config": cfg, "config_yaml": results.text(f.attrs.get("config_yaml", ""))}
        get = lambda p: np.asarray(f[p][()]) if p in f else np.zeros(0)
        d["train"] = {"step": get("train/step").tolist(), "loss": _floats(get("train/loss"))}
        d["eval"] = {"step": get("eval/step").tolist(), "loss": _floats(get("eval/loss")),
                     "tokens": _floats(get("eval/tokens"))}
        d["heldout"] = results.read_heldout(f)
        all_steps, all_scores = over_training.scores_over_steps(f)  # /attn's and /study_steps'
        study, d["causal"] = report_steps.head_study(f, cfg, _floats)
        d.update(study)  # the final model's classes, marked, heads and circuits
        final = int(all_steps[-1]) if len(all_steps) else None
        d["studies"] = report_steps.snapshot_studies(f, cfg, _floats, final)
        d["steps_missing"] = report_steps.missing(f, os.path.basename(path))
        d["maps"] = None
        index = {int(s): i for i, s in enumerate(all_steps)}
        sources = [x for x in report_steps.map_sources(f) if x[0] in index]
        if sources:
            _, L, H, P, T, _ = sources[0][1].shape
            per_snapshot = L * H * P * T * (T + 1) // 2
            keep = pick_snapshots(len(sources), per_snapshot, map_budget)
            data = np.stack([np.asarray(sources[k][1][sources[k][2]], np.float32) for k in keep])
            encoding, b64, error = encode_maps(data)
            d["maps"] = {"shape": [len(keep), L, H, P, T], "encoding": encoding, "data": b64,
                         "max_error": error, "levels": QUANT_LEVELS,
                         "snapshots": [index[sources[k][0]] for k in keep],
                         "dropped_snapshots": len(sources) - len(keep)}
            d["probes"], d["token_legend"] = _probes(f, cfg, P, T)
        d["score_steps"] = [int(s) for s in all_steps]
        d["patterns"] = PATTERNS
        d["scores"] = {p: _floats(v, 4) for p, v in all_scores.items()}
        d["formation"] = over_training.formation(all_steps, all_scores) if all_scores else {}
        d["prune"] = report_study.read_prune(f)
    return d
