"""heads.read.steps: a run over training, from its results file: when each head class formed
(between which two stored steps), the pattern scores at every stored step (/attn's snapshots and
/study_steps'), and what a weight snapshot's study stored (`Run.at(step)`).

The one place that decides a formation step: the report, the plots and the sweep summary read it
here. Knows the file layout (docs/results-format.md: /scores, /study_steps, /snapshots, /eval);
never writes.
"""
import numpy as np

PATTERNS = ["prev", "self", "first", "induction", "duplicate"]
THRESHOLD = 0.5  # a head's class: the pattern scoring over 0.5 (src/analysis/analysis.c)


def formation(steps, scores, threshold=THRESHOLD):
    """When heads of each pattern formed: for every head below the threshold at the first stored
    step and at or above it at the last, the first stored step `step` at or above it and the one
    before, `after` (below it): it formed after `after`, by `step`, no finer. Returns {pattern:
    {"after", "step", "heads": [[layer, head, after, step], ...]}} for the earliest head, leaving
    out patterns no head crossed (one stored step: nothing can be said)."""
    out = {}
    steps = np.asarray(steps)
    if len(steps) < 2:
        return out
    for p in PATTERNS:
        if p not in scores:
            continue
        s = np.asarray(scores[p])  # [S, L, H]
        heads = []
        for layer in range(s.shape[1]):
            for h in range(s.shape[2]):
                col = s[:, layer, h]
                if col[0] < threshold <= col[-1]:
                    first = int(np.argmax(col >= threshold))
                    heads.append([layer, h, int(steps[first - 1]), int(steps[first])])
        if heads:
            earliest = min(heads, key=lambda x: x[3])
            out[p] = {"after": earliest[2], "step": earliest[3], "heads": heads}
    return out


def interval_text(m):
    """"between step 150 and 200": a formation step as measured."""
    return f"between step {m['after']} and {m['step']}"


def scores_over_steps(f):
    """(steps [S'], {pattern: [S', L, H]}) of every stored step of an open results file: /attn's
    snapshots and those /study_steps holds, sorted (a step in both: /attn's, the same bits)."""
    rows = {}
    for s in sorted(f["study_steps"], key=int) if "study_steps" in f else []:
        g = f[f"study_steps/{s}/scores"]
        rows[int(s)] = {p: np.asarray(g[p][0]) for p in PATTERNS if p in g}
    if "attn/step" in f:
        for i, s in enumerate(np.asarray(f["attn/step"][()])):
            rows[int(s)] = {p: np.asarray(f[f"scores/{p}"][i]) for p in PATTERNS if f"scores/{p}" in f}
    steps = sorted(rows)
    return np.array(steps, dtype=np.int64), {p: np.stack([rows[s][p] for s in steps]) for p in PATTERNS
                                             if steps and all(p in rows[s] for s in steps)}


def icl_bands(f):
    """The ICL score's bands of an open file, {"early": (first, end), "late": ...}, or None (not
    defined for its task, or a file before format 1.7)."""
    if "eval/icl_score" not in f or "early_first" not in f["eval/icl_score"].attrs:
        return None
    a = f["eval/icl_score"].attrs
    return {"early": (int(a["early_first"]), int(a["early_end"])),
            "late": (int(a["late_first"]), int(a["late_end"]))}


class AtStep:
    """What a results file holds of one weight snapshot: the study /study_steps/<step> stored,
    by the final one's name (at["heads/ablation_delta"] is [L, H] like /heads/ablation_delta;
    at["scores/induction"] is [1, L, H], one snapshot of /scores/induction), and the weights."""

    def __init__(self, f, step, path):
        self.step, self.path = int(step), path
        snaps = np.asarray(f["snapshots/step"][()]) if "snapshots/step" in f else np.zeros(0, np.int64)
        if self.step not in snaps:
            have = ", ".join(str(int(s)) for s in snaps) or "none (no output.snapshots)"
            raise KeyError(f"{path}: no weight snapshot at step {step}; it holds {have}")
        self.index = int(np.flatnonzero(snaps == self.step)[0])
        self.analyses = {}
        group = f"study_steps/{self.step}"
        if group in f:
            f[group].visititems(lambda n, o: self.analyses.__setitem__(n, np.asarray(o[()]))
                                if hasattr(o, "dtype") else None)
        self.params = {}
        f["snapshots/params"].visititems(lambda n, o: self.params.__setitem__(n, np.asarray(o[self.index]))
                                         if hasattr(o, "dtype") else None)

    def __getitem__(self, name):
        if name not in self.analyses:
            raise KeyError(f"{self.path}: no /study_steps/{self.step}/{name}"
                           + ("" if self.analyses else f" (run harness analyze {self.path} --step {self.step})"))
        return self.analyses[name]
