"""heads.read.causal: what a results file says about which heads cause the behaviour, as plain arrays:
activation patching per head (/patching/<kind>, normalised effects) and its AtP estimate
(/patching/atp_<kind>), path patching (/patching/path_q|k|v), the direct logit attribution
(/dla) and the OV copying scores (/scores/copying); and the number a sweep compares across head
counts: how many heads carry 80% of the patching effect (heads_carrying).

Each reader returns None (or an empty dict) for what the file does not hold. Path-patching grids
are [later layer, later head, earlier layer, earlier head] as /circuits: entry [l_B, h_B, l_A, h_A]
is the effect of the A -> B edge alone.
Knows those datasets' layout (docs/results-format.md); nothing of gnuplot or HTML.
"""
import numpy as np

PATCH_KINDS = [  # (dataset under /patching, what is taken from the clean run)
    ("head_out", "the head's output"), ("q", "its Q input"), ("k", "its K input"),
    ("v", "its V input"), ("pattern", "its attention pattern")]
PATH_KINDS = [("path_q", "Q"), ("path_k", "K"), ("path_v", "V")]
CARRY_SHARE = 0.8  # the share of the patching effect heads_carrying counts the heads of
CARRY_COLUMN = "patching_heads_80"  # its summary column (not heads_...: those are class counts)


def _array(f, path):
    return np.asarray(f[path][()], dtype=float) if path in f else None


def patching(f):
    """{kind: [L, heads] normalised effects} of the kinds the file has (K and V: per K/V head)."""
    return {k: a for k, _ in PATCH_KINDS if (a := _array(f, f"patching/{k}")) is not None}


def atp(f):
    """{kind: [L, heads] AtP estimates} beside patching's."""
    return {k: a for k, _ in PATCH_KINDS if (a := _array(f, f"patching/atp_{k}")) is not None}


def atp_correlation(f):
    """{kind: Pearson r of the AtP estimates with the exact effects} (the datasets' attribute)."""
    return {k: float(f[f"patching/atp_{k}"].attrs["correlation"]) for k, _ in PATCH_KINDS
            if f"patching/atp_{k}" in f and "correlation" in f[f"patching/atp_{k}"].attrs}


def patching_attrs(f):
    """The /patching group's attributes (metric values, correlations), as plain Python values."""
    if "patching" not in f:
        return {}
    out = {}
    for k, v in f["patching"].attrs.items():
        v = v.item() if isinstance(v, np.generic) else v
        out[k] = v.decode() if isinstance(v, bytes) else v
    return out


def dla(f):
    """{"head" [L, H], "bias_o" [L], "embed", "ln_bias", "logit", "positions"} or None."""
    if "dla/head" not in f:
        return None
    d = {"head": _array(f, "dla/head"), "bias_o": _array(f, "dla/bias_o")}
    for k in ("embed", "ln_bias", "logit"):
        d[k] = float(_array(f, f"dla/{k}")[0])
    d["positions"] = float(f["dla"].attrs.get("positions", float("nan")))
    return d


def copying(f):
    """[L, H] copying scores, or None."""
    return _array(f, "scores/copying")


def top_paths(f, n=8):
    """The n strongest edges over the path-patching kinds the file has, by |effect|:
    [(kind letter, (l_B, h_B), (l_A, h_A), effect)], receivers B reading senders A."""
    edges = []
    for key, letter in PATH_KINDS:
        a = _array(f, f"patching/{key}")
        if a is None:
            continue
        for idx in zip(*np.nonzero(np.isfinite(a))):
            lb, hb, la, ha = (int(i) for i in idx)
            edges.append((letter, (lb, hb), (la, ha), float(a[idx])))
    edges.sort(key=lambda e: -abs(e[3]))
    return edges[:n]


def heads_carrying(effect, share=CARRY_SHARE):
    """The fewest heads, taken by |normalised effect| from the largest, whose |effects| sum to at
    least `share` of the sum of |effects| over every head: a head count (int), or None when no
    head has an effect (all 0 or NaN)."""
    a = np.abs(np.asarray(effect, dtype=float).ravel())
    a = np.sort(a[np.isfinite(a)])[::-1]
    total = a.sum()
    if not total > 0:
        return None
    # a small tolerance so that an exact 80% split (0.4 + 0.4 of 1.0) counts as reaching it
    return int(np.searchsorted(np.cumsum(a), share * total * (1 - 1e-12)) + 1)


def summary_values(f):
    """The summary row's causal columns: {CARRY_COLUMN: heads carrying 80% of the head-output
    patching effect, or None without /patching/head_out}."""
    effect = _array(f, "patching/head_out")
    return {CARRY_COLUMN: None if effect is None else heads_carrying(effect)}
