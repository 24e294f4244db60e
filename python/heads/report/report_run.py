"""heads.report.report_run: one results file as the data of an interactive report page (scripts/report).

Reads the run (attention maps, pattern scores, classes, ablation Δloss zeroed and mean-ablated,
importance, losses; the head study through report_study, the causal evidence and the head
table's DLA, copying and patching columns through report_causal) and returns a plain dict that
report_page serialises into the page. Attention maps are stored in the page as 8-bit integers
round(255·p) (only the causal lower triangle) whenever every map value lies in [0, 1], which
keeps each shown weight within 1/510 of the file's; otherwise as float32.

Knows the results-file layout (docs/results-format.md); knows nothing of HTML or JavaScript.
"""
import base64
import os

import numpy as np

from . import report_causal, report_study
from ..read import results, steps as over_training
from ..core import tokens as tok
from ..core.cli import UserError

PATTERNS = results.PATTERNS  # the reader's, which tests/test_rules.py checks against the harness
HEAD_METRICS = [  # (dataset under /heads, column title, what it means)
    ("ablation_delta", "Δloss (zero ablation)",
     "held-out loss increase with the head's output zeroed"),
    ("ablation_delta_mean", "Δloss (mean ablation)",
     "held-out loss increase with the head's output replaced by its mean"),
    ("importance", "importance", "Michel et al.: mean |∂loss/∂gate| over held-out batches"),
    ("importance_normalized", "importance (layer-normalised)",
     "importance divided by its layer's L2 norm"),
]
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
        scores = {p: np.asarray(f[f"scores/{p}"][()], dtype=float) for p in PATTERNS
                  if f"scores/{p}" in f}
        d["classes"] = results.read_classes(f)
        d["marked"] = results.read_marked(f)
        d["heads"] = {}
        for key, title, meaning in HEAD_METRICS:
            if f"heads/{key}" in f:
                d["heads"][key] = {"title": title, "meaning": meaning,
                                   "values": _floats(f[f"heads/{key}"][()])}
        d["maps"] = None
        steps = get("attn/step")
        if "attn/maps" in f and len(steps):
            maps = f["attn/maps"]
            S, L, H, P, T, _ = maps.shape
            per_snapshot = L * H * P * T * (T + 1) // 2
            keep = pick_snapshots(S, per_snapshot, map_budget)
            data = np.stack([np.asarray(maps[s], dtype=np.float32) for s in keep])
            encoding, b64, error = encode_maps(data)
            d["maps"] = {"shape": [len(keep), L, H, P, T], "encoding": encoding, "data": b64,
                         "max_error": error, "levels": QUANT_LEVELS, "snapshots": keep,
                         "dropped_snapshots": S - len(keep)}
            d["probes"], d["token_legend"] = _probes(f, cfg, P, T)
        d["score_steps"] = [int(s) for s in steps]
        d["patterns"] = PATTERNS
        d["scores"] = {p: _floats(v, 4) for p, v in scores.items()}
        all_steps, all_scores = over_training.scores_over_steps(f)
        d["formation"] = over_training.formation(all_steps, all_scores) if all_scores else {}
        d["prune"] = report_study.read_prune(f)
        d["circuits"] = report_study.read_circuits(f, cfg) if "heads" in f else None
        d["causal"] = report_causal.read_causal(f)
        if d["causal"]:
            d["heads"].update(report_causal.head_columns(d["causal"]))
    return d
