"""heads.report.report_causal: a run's causal evidence (heads.read.causal) as the data of the report page's
"Causal" section: the activation-patching grids per kind (and their AtP estimates), how many heads
carry 80% of the head-output effect, the direct logit attribution with every part, the copying
scores, the strongest path-patching edges (or why there are none); and the head table's columns
of the same (DLA, copying, patching effect).

Knows heads.read.causal; knows nothing of HTML.
"""
import numpy as np

from ..read import causal

DIGITS = 4  # every value in the page: rounded to 4 decimals (the page says so)
TOP_PATHS = 10


def _grid(a):
    a = np.round(np.asarray(a, dtype=float), DIGITS)
    return np.where(np.isfinite(a), a, None).tolist()


def _plain(v):
    v = float(v)
    return round(v, 6) if np.isfinite(v) else None


def read_causal(f):
    """The section's data, or None when the file has no patching, DLA or copying scores."""
    effects, estimates = causal.patching(f), causal.atp(f)
    d_dla, copy = causal.dla(f), causal.copying(f)
    if not effects and d_dla is None and copy is None:
        return None
    meaning = dict(causal.PATCH_KINDS)
    out = {"digits": DIGITS, "share": causal.CARRY_SHARE,
           "patching": {k: {"meaning": meaning[k], "values": _grid(v)} for k, v in effects.items()},
           "atp": {k: _grid(v) for k, v in estimates.items()},
           "atp_correlation": {k: _plain(r) for k, r in causal.atp_correlation(f).items()},
           "attrs": {k: (_plain(v) if isinstance(v, (int, float)) else str(v))
                     for k, v in causal.patching_attrs(f).items()},
           "carrying": causal.heads_carrying(effects["head_out"]) if "head_out" in effects else None,
           "dla": None, "copying": _grid(copy) if copy is not None else None}
    if d_dla is not None:
        out["dla"] = {"head": _grid(d_dla["head"]), "bias_o": [_plain(v) for v in d_dla["bias_o"]],
                      **{k: _plain(d_dla[k]) for k in ("embed", "ln_bias", "logit", "positions")}}
    has_paths = any(f"patching/{k}" in f for k, _ in causal.PATH_KINDS)
    out["paths"] = [{"kind": k, "later": list(b), "earlier": list(a), "effect": _plain(e)}
                    for k, b, a, e in causal.top_paths(f, TOP_PATHS)] if has_paths else None
    return out


HEAD_COLUMNS = [  # (key in the page's heads table, title, meaning)
    ("patching", "patching effect (output)", "the normalised effect of taking the head's output "
     "from the clean run into the corrupted one (1 = the clean behaviour restored)"),
    ("dla", "direct logit attribution", "the head's direct effect on the right token's logit, "
     "through the final LayerNorm with its scale frozen, mean over the patching set's positions"),
    ("copying", "copying score", "Re(Σλ)/Σ|λ| of the full OV circuit W_E·W_V·W_O·W_U (1 = copies)")]


def head_columns(c):
    """{key: {title, meaning, values [L][H]}} of the head table's causal columns c has."""
    values = {"patching": (c["patching"].get("head_out") or {}).get("values"),
              "dla": c["dla"]["head"] if c["dla"] else None, "copying": c["copying"]}
    return {k: {"title": t, "meaning": m, "values": values[k]} for k, t, m in HEAD_COLUMNS
            if values[k] is not None}
