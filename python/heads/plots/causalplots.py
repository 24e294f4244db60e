"""heads.plots.causalplots: gnuplot pictures of which heads cause the behaviour (heads.read.causal): per run,
the activation-patching effects per head and kind and their AtP estimates, the direct logit attribution per head, and the OV copying scores, as layer x head
heatmaps with the values written in, each with NAME.csv beside it holding exactly the numbers drawn
(one row per layer and head, one column per panel).

Each function takes an open results file, the run's name, the output path and a scratch
directory, and returns whether it drew (False when the file has nothing for that figure).
Knows heads.read.causal's readers; nothing of the other plots.
"""
import os

import numpy as np

from ..read import causal
from . import heatmaps
from ..answers.sweepaxes import write_csv


def _write_panels_csv(out, panels):
    """NAME.csv: layer, head, then one column per panel (its CSV name), a row per cell; panels of
    fewer heads (K/V heads under grouped K/V) leave the other rows empty."""
    L = max(np.asarray(p[1]).shape[0] for p in panels)
    H = max(np.asarray(p[1]).shape[1] for p in panels)
    rows = []
    for layer in range(L):
        for h in range(H):
            row = [layer, h]
            for _, values, *_ in panels:
                v = np.asarray(values, float)
                row.append(float(v[layer, h]) if layer < v.shape[0] and h < v.shape[1] else None)
            rows.append(row)
    write_csv(out, ["layer", "head"] + [p[0] for p in panels], rows)


def _draw(out, header, named_panels, tmp):
    """named_panels: [(csv column, title, values, fmt, (lo, hi), colour-box label)] of one shape."""
    heatmaps.layer_head_heatmaps(out, header, [p[1:] for p in named_panels], tmp)
    _write_panels_csv(out, [(p[0], p[2]) for p in named_panels])


def _symmetric(*arrays):
    top = max([float(np.nanmax(np.abs(a))) for a in arrays if np.isfinite(a).any()] + [1e-6])
    return (-top, top)


def plot_patching(f, run_name, out, tmp, out_atp=None, out_kv=None):
    """The normalised patching effect (m_patched − m_corrupt) / (m_clean − m_corrupt) of every
    head per kind into out, one shared diverging scale; the AtP estimates (with their correlation
    to the exact effects) into out_atp; under grouped K/V the kinds read per K/V head (K and V)
    into out_kv, each with its AtP estimate below it. Returns whether out was drawn."""
    effects, estimates = causal.patching(f), causal.atp(f)
    if not effects:
        return False
    attrs = causal.patching_attrs(f)
    metric = attrs.get("metric", "the metric")
    H = effects.get("head_out", next(iter(effects.values()))).shape[1]
    scale = _symmetric(*effects.values(), *estimates.values())
    meaning = dict(causal.PATCH_KINDS)
    exact, atp, kv = [], [], []
    for kind, values in effects.items():
        panel = (kind, f"{meaning[kind]} from the clean run", values, "delta", scale, "effect")
        estimate = None
        if kind in estimates:
            r = causal.atp_correlation(f).get(kind, float("nan"))
            estimate = (f"atp_{kind}", f"AtP: {meaning[kind]} (r {r:.3f} with the exact)", estimates[kind],
                        "delta", scale, "effect")
        if values.shape[1] == H:
            exact.append(panel)
            atp += [estimate] if estimate else []
        else:
            kv += [panel] + ([estimate] if estimate else [])
    header = (f"{run_name}: activation patching, clean into corrupted\nnormalised effect on {metric} "
              "(1 = the clean behaviour restored)")
    _draw(out, header + ", layer × head", exact, tmp)
    if atp and out_atp:
        _draw(out_atp, f"{run_name}: attribution patching (AtP),\nthe one-backward estimate of "
                       f"{os.path.basename(out)}", atp, tmp)
    if kv and out_kv:
        _draw(out_kv, header + ", layer × K/V head", kv, tmp)
    return True


def plot_dla(f, run_name, out, tmp):
    """Each head's direct logit attribution (logit units), the other parts in the title."""
    d = causal.dla(f)
    if d is None:
        return False
    others = (f"embedding {d['embed']:+.3f}, output biases {float(np.sum(d['bias_o'])):+.3f}, final LayerNorm "
              f"bias {d['ln_bias']:+.3f}, heads {float(np.sum(d['head'])):+.3f}: sum = the logit {d['logit']:.3f}")
    _draw(out, f"{run_name}: direct logit attribution of the right token, mean over "
               f"{d['positions']:.0f} marked positions\n{others}",
          [("dla", "each head's z·W_O through the final LayerNorm, its scale frozen (logit)", d["head"], "delta",
            _symmetric(d["head"]), "logit")], tmp)
    return True


def plot_copying(f, run_name, out, tmp):
    """The OV copying score of every head on [−1, 1]."""
    c = causal.copying(f)
    if c is None:
        return False
    _draw(out, f"{run_name}: OV copying score Re(Σλ)/Σ|λ| of W_E·W_V·W_O·W_U (1 = copies its input token)",
          [("copying", "copying score (TransformerLens's eigenvalue copying score, LayerNorm folded)",
            c, "score", (-1, 1), "copying")], tmp)
    return True
