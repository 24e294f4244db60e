"""heads.report.report_steps: what the report page's step control switches between: the head
study of one model (classes, the head table's columns, composition) read the same way from the
root (the final model) and from each weight snapshot's /study_steps/<step>; the attention maps
of every stored step (/attn's snapshots and each study's); and what a file lacks for the control,
with the command that adds it.

Knows the /study_steps and /snapshots layout (docs/results-format.md); knows nothing of HTML.
"""
import numpy as np

from . import report_causal, report_study
from ..read import results

HEAD_METRICS = [  # (dataset under /heads, column title, what it means)
    ("ablation_delta", "Δloss (zero ablation)",
     "held-out loss increase with the head's output zeroed"),
    ("ablation_delta_mean", "Δloss (mean ablation)",
     "held-out loss increase with the head's output replaced by its mean"),
    ("importance", "importance", "Michel et al.: mean |∂loss/∂gate| over held-out batches"),
    ("importance_normalized", "importance (layer-normalised)",
     "importance divided by its layer's L2 norm"),
]


def head_study(g, cfg, floats):
    """(study, causal) of one model: g is the file (the final model) or a /study_steps/<step>
    group (a snapshot's, the same layout). study = {classes, marked, heads {key: {title, meaning,
    values [L][H]}}, circuits}; causal = report_causal.read_causal(g) (None without it)."""
    heads = {key: {"title": title, "meaning": meaning, "values": floats(g[f"heads/{key}"][()])}
             for key, title, meaning in HEAD_METRICS if f"heads/{key}" in g}
    causal = report_causal.read_causal(g)
    if causal:
        heads.update(report_causal.head_columns(causal))
    return {"classes": results.read_classes(g), "marked": results.read_marked(g), "heads": heads,
            "circuits": report_study.read_circuits(g, cfg) if "heads" in g else None}, causal


def study_steps(f):
    """The steps /study_steps holds, ascending."""
    return sorted(int(s) for s in f["study_steps"]) if "study_steps" in f else []


def snapshot_studies(f, cfg, floats, final_step):
    """{str(step): head_study} of every weight snapshot's study but the final step's (the root's,
    the same bits)."""
    return {str(s): head_study(f[f"study_steps/{s}"], cfg, floats)[0]
            for s in study_steps(f) if s != final_step}


def map_sources(f):
    """[(step, dataset, index)] of every stored step's attention maps, ascending: /attn/maps'
    snapshots and each /study_steps/<s>/attn/maps of the same shape (a step in both: /attn's,
    the same bits)."""
    src = {}
    shape = f["attn/maps"].shape[1:] if "attn/maps" in f else None
    for s in study_steps(f):
        ds = f.get(f"study_steps/{s}/attn/maps")
        if ds is not None and len(ds.shape) == 6 and ds.shape[0] and shape in (None, ds.shape[1:]):
            src[s], shape = (ds, 0), ds.shape[1:]
    if "attn/maps" in f and "attn/step" in f:
        for i, s in enumerate(np.asarray(f["attn/step"][()])[:f["attn/maps"].shape[0]]):
            src[int(s)] = (f["attn/maps"], i)
    return [(s, ds, i) for s, (ds, i) in sorted(src.items())]


def missing(f, name):
    """What the step control cannot show of this file and the command that adds it, or None."""
    snaps = [int(s) for s in f["snapshots/step"][()]] if "snapshots/step" in f else []
    if not snaps:
        return ("This run kept no weight snapshots, so the head table and the composition are "
                "the final model's only; the maps and scores follow the step. Rerun with "
                "output.snapshots (e.g. \"log:50\"), then `harness analyze "
                f"{name} --steps all` adds them.")
    left = [s for s in snaps if s not in set(study_steps(f))]
    if not left:
        return None
    shown = ", ".join(map(str, left[:8])) + (", …" if len(left) > 8 else "")
    return (f"{len(left)} of {len(snaps)} weight snapshots have no study yet (steps {shown}): "
            f"`harness analyze {name} --steps all` adds their head table and composition.")
