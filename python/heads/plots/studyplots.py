"""heads.plots.studyplots: gnuplot pictures of the head study (the harness's /heads, /prune and /circuits;
heads.read.pruning): per run, the single-head ablation Δloss (zero and mean) and importance as
layer x head heatmaps with the values written in, the pruning curves, and the composition scores
with previous-token and induction heads labelled (a sweep's pruning figures are heads.plots.plot_sweep's).

Each function takes an open results file (or a Summary) and the output path, and writes one
figure in the format the path's extension names (PNG, SVG, PDF).
Knows the results layout of those groups; nothing of the other plots.
"""
import math
import os

import numpy as np

from . import gnuplot as gp
from . import heatmaps
from ..read import pruning
from ..read.results import read_classes, text
from ..core.words import plural

CURVE_COLOURS = {"importance": "#1f77b4", "delta_loss": "#d62728"}

HEAD_PANELS = [  # (dataset, title, cell format) of heads.png
    ("heads/ablation_delta", "Δloss with the head's output zeroed (nats; one scale with the next)",
     "delta"),
    ("heads/ablation_delta_mean", "Δloss with the head's output replaced by its mean over the "
     "held-out tokens (nats; same scale)", "delta"),
    ("heads/importance_normalized", "Michel importance |∂L/∂gate|, normalised per layer", "score")]


def plot_head_heatmaps(f, run_name, out, tmp):
    """ablation Δloss zeroed and mean-ablated (one shared diverging scale, nats) and Michel
    importance normalised per layer ([0, 1]): one panel per quantity, values written in."""
    panels = [(path, title, fmt) for path, title, fmt in HEAD_PANELS if path in f]
    if not panels:
        return False
    values = {path: np.asarray(f[path][()], float) for path, _, _ in panels}
    top = max([float(np.nanmax(np.abs(v))) for p, v in values.items() if "ablation" in p]
              + [1e-6])
    heatmaps.layer_head_heatmaps(
        out, f"{run_name}: what each head is worth on the held-out loss (layer × head)",
        [(title, values[path], fmt, (-top, top), "nats") if "ablation" in path
         else (title, values[path], fmt, (0, 1), "importance") for path, title, fmt in panels],
        tmp)
    return True


def plot_pruning_curves(f, run_name, out, tmp):
    """eval loss against heads left, both criteria, the unpruned loss and its tolerance band."""
    curves = pruning.read_curves(f)
    if not curves:
        return False
    parts = []
    first = next(iter(curves.values()))
    total, base = int(first[0][0]), float(first[1][0])
    for c, (left, loss) in curves.items():
        path = os.path.join(tmp, f"prune_{c}.txt")
        gp.write_columns(path, ["heads_left", "eval_loss"], zip(left, loss))
        needed = pruning.heads_needed(left, loss)  # the default tolerance: a run has no other
        title = f"{pruning.CRITERION_TEXT[c]}: {plural(needed, 'head')} needed"
        parts.append(f"{gp.gp_string(path)} using 1:2 with linespoints lw 2 pt 7 ps 0.8 lc rgb "
                     f"'{CURVE_COLOURS[c]}' title {gp.gp_string(title)}")
    parts.append(f"{pruning.loss_limit(base)} with lines dt 2 lw 1 lc rgb '#555555' title "
                 f"'unpruned loss + {pruning.tolerance_text()} (the heads-needed tolerance)'")
    one = ""
    if "prune/one_head_per_layer/best_delta_loss" in f:
        best = np.asarray(f["prune/one_head_per_layer/best_delta_loss"][()])
        heads = np.asarray(f["prune/one_head_per_layer/best_head"][()])
        one = "\none head per layer (its best head kept, the other layers whole): " + ", ".join(
            f"layer {l} head {h} {d:+.3f}" for l, (h, d) in enumerate(zip(heads, best)))
    step = int(f["prune/" + next(iter(curves)) + "/heads_left"][0] - f["prune/" + next(iter(curves)) + "/heads_left"][1]) \
        if len(first[0]) > 1 else 1
    removed = plural(step, "head")
    values = np.concatenate([loss for _, loss in curves.values()])
    values = values[np.isfinite(values) & (values > 0)]
    logy = len(values) > 0 and values.max() / values.min() > 3.0
    script = f"""{gp.terminal_for(out, 1000, 640)}
set output {gp.gp_string(out)}
set title {gp.gp_string(gp.fit(f'{run_name}: pruning curves (Michel et al. 2019), {removed} removed a step, importance measured again after each{one}', 950))} font ',10'
set xlabel 'heads left (of {total}, all layers)'
set ylabel 'held-out eval loss{" (log scale)" if logy else ""}'
{"set logscale y" if logy else ""}
set format y '%g'
set xrange [{total + 0.5}:-0.5]
set grid
set key top left font ',9'
plot {", ".join(parts)}
"""
    gp.run_gnuplot(script, out, tmp)
    return True


def _head_label(layer, h, classes):
    klass = classes[layer][h] if classes and layer < len(classes) else ""
    tag = {"prev": " prev", "induction": " ind"}.get(klass, "")
    return f"L{layer}H{h}{tag}"


def plot_composition(f, run_name, out, tmp):
    """Q-, K- and V-composition of every (later, earlier) head pair: rows the later heads, columns
    the earlier ones, prev/induction heads (/scores/class) labelled; the random baseline beside."""
    kinds = [k for k in ("q_composition", "k_composition", "v_composition") if f"circuits/{k}" in f]
    if not kinds:
        return False
    L, H = f[f"circuits/{kinds[0]}"].shape[:2]
    if L < 2:
        return False
    classes = read_classes(f)
    later = [(l, h) for l in range(1, L) for h in range(H)]
    earlier = [(l, h) for l in range(L - 1) for h in range(H)]
    mats = {}
    for k in kinds:
        s = np.asarray(f[f"circuits/{k}"][()], float)
        mats[k] = np.array([[s[a, b, c, d] for (c, d) in earlier] for (a, b) in later])
    vmax = max(float(np.nanmax(m)) for m in mats.values())
    n_r, n_c = len(later), len(earlier)
    cell = int(max(8, min(40, 420 / max(n_r, n_c))))
    every = max(1, math.ceil(12 / cell))
    pw, ph = n_c * cell, n_r * cell
    bases = {k: float(f[f"circuits/{k}"].attrs.get("random_baseline", float("nan"))) for k in kinds}
    titles = {k: f"{k[0].upper()}-composition (random matrices: {bases[k]:.3f})" for k in kinds}
    title_w = max(gp.text_px(t, 10) for t in titles.values())
    left, top, bottom = 120, 90, 110
    # panels far enough apart for their titles (centred over each) and the tics between them
    gap = int(max(150, title_w - pw + 40))
    left = int(max(left, (title_w - pw) / 2 + 20))
    width = max(left + len(kinds) * (pw + gap) + 60, 820)  # room for the header and the note
    header = gp.wrap(run_name + ": composition scores (Elhage et al. 2021)", width - 40, 11) + gp.wrap(
        "rows = later head reading, columns = earlier head writing; prev / ind = previous-token / "
        "induction heads", width - 40, 11)
    top += int((len(header) - 2) * gp.line_px(11))
    note = f[f"circuits/{kinds[0]}"].attrs.get("note")
    note_lines = gp.wrap(text(note), width - 40, 9) if note is not None else []
    height = top + ph + bottom + int(max(0, len(note_lines) - 1) * gp.line_px(9))
    sx = lambda px: px / width
    sy = lambda px: 1.0 - px / height
    xt = ", ".join(f"{gp.gp_string(_head_label(l, h, classes))} {i}"
                   for i, (l, h) in enumerate(earlier) if i % every == 0 or classes and classes[l][h] in ("prev", "induction"))
    yt = ", ".join(f"{gp.gp_string(_head_label(l, h, classes))} {i}"
                   for i, (l, h) in enumerate(later) if i % every == 0 or classes and classes[l][h] in ("prev", "induction"))
    lines = [gp.terminal_for(out, width, height, 10), f"set output {gp.gp_string(out)}", "set multiplot",
             heatmaps.SEQUENTIAL, f"set cbrange [0:{vmax}]", "unset key",
             f"set xrange [-0.5:{n_c - 0.5}]", f"set yrange [{n_r - 0.5}:-0.5]",
             f"set xtics ({xt}) rotate by 60 right scale 0 font ',{8 if cell >= 14 else 7}'",
             f"set ytics ({yt}) scale 0 font ',{8 if cell >= 14 else 7}'",
             ]
    words = [f"set label {k + 1} {gp.gp_string(t)} at screen 0.5, screen "
             f"{sy(20 + k * gp.line_px(11))} center font ',11'" for k, t in enumerate(header)]
    # why some scores are missing (rotary: V only), under the panels
    words += [f"set label {len(header) + k + 1} {gp.gp_string(t)} at screen 0.5, screen "
              f"{sy(height - 14 - (len(note_lines) - 1 - k) * gp.line_px(9))} center font ',9'"
              for k, t in enumerate(note_lines)]
    lines += words
    for j, k in enumerate(kinds):
        x0 = left + j * (pw + gap)
        m = os.path.join(tmp, f"comp_{k}.txt")
        gp.write_matrix(m, mats[k])
        title = titles[k]
        lines += [f"set lmargin at screen {sx(x0)}", f"set rmargin at screen {sx(x0 + pw)}",
                  f"set tmargin at screen {sy(top)}", f"set bmargin at screen {sy(top + ph)}",
                  f"set title {gp.gp_string(title)} font ',10'",
                  f"set colorbox user origin screen {sx(x0 + pw + 12)}, screen {sy(top + ph)} size "
                  f"screen {sx(12)}, screen {ph / height}" if j == len(kinds) - 1 else "unset colorbox",
                  f"plot {gp.gp_string(m)} matrix with {gp.image_style(out)}"]
        if j == 0:
            lines += [f"unset label {i + 1}" for i in range(len(words))]
    lines.append("unset multiplot")
    gp.run_gnuplot("\n".join(lines) + "\n", out, tmp)
    return True
