#!/usr/bin/python3
# suite: a run over training: loss by position and ICL score, formation intervals, run.at, export --step, the figure
# suite-args: {harness}
"""tests/test_over_training.py HARNESS: what a run says about itself over training.

- /eval/loss_by_position weighted by /eval/position_tokens is /eval/loss (1e-6 relative), the
  tokens sum to /eval/tokens, and /eval/icl_score is the late band's mean minus the early band's,
  the bands recomputed here from docs/results-format.md's rule (induction: from the first
  position every window scores; two_source: NaN with not_defined);
- the formation interval of each pattern recomputed in NumPy from /scores and /study_steps (the
  earliest head's first stored step at or above 0.5 and the stored step before) is what the
  reader (heads.read.steps, RunResult.formation), the sweep summary row and the figure say;
- run.at(step): the snapshot's weights and its /study_steps datasets, the same arrays;
  scripts/export --step writes the snapshot (npz), an unknown step exits 2 naming the steps;
- scripts/plot writes over_training.png with over_training.csv holding the file's numbers.
"""
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import csv  # noqa: E402
import h5py  # noqa: E402
import numpy as np  # noqa: E402
from checks import check, finish  # noqa: E402
from heads.read.results import Run  # noqa: E402

PY = "/usr/bin/python3"
CONFIG = """\
model: {{vocab_size: 16, d_model: 48, n_head: 4, n_layer: 2, seq_len: 24}}
train: {{steps: {steps}, batch_size: 16, lr: 3.0e-3, warmup_steps: 10, seed: 0, threads: 1}}
data: {{task: {task}, min_period: 3, max_period: 8}}
output: {{path: {name}.h5, log_every: 10, eval_every: 10, eval_batches: 2, attn_every: 40, probes: 4,
         snapshots: "log:50", snapshot_study: true, patch_batches: 0, prune_step: 0}}
"""


def train(harness, work, name, task="induction", steps=600):
    cfg = os.path.join(work, name + ".yaml")
    with open(cfg, "w") as f:
        f.write(CONFIG.format(steps=steps, task=task, name=name))
    p = subprocess.run([harness, cfg, "--overwrite"], cwd=work, capture_output=True, text=True, timeout=600)
    check(f"{name}: the run completes", p.returncode == 0, p.stderr[-400:])
    return os.path.join(work, name + ".h5")


def bands(tokens):
    """The documented rule: [s, T) every window scores; early [s+40R/512, s+60R/512), late
    [s+490R/512, s+510R/512), at least one position each."""
    T = len(tokens)
    full = tokens == tokens.max()
    s = T - int(np.argmin(full[::-1])) if not full.all() else 0
    R = T - s
    band = lambda a, b: (s + a * R // 512, max(s + b * R // 512, s + a * R // 512 + 1))
    return s, band(40, 60), band(490, 510)


def test_positions(path):
    with h5py.File(path, "r") as f:
        lbp, tok = f["eval/loss_by_position"][()], f["eval/position_tokens"][()]
        loss, tokens, icl = f["eval/loss"][()], f["eval/tokens"][()], f["eval/icl_score"][()]
        a = dict(f["eval/icl_score"].attrs)
    weighted = np.nansum(lbp * tok, axis=1) / tok.sum()
    check("/eval/loss_by_position weighted by position_tokens is /eval/loss (1e-6 relative)",
          lbp.shape == (len(loss), 24) and np.allclose(weighted, loss, rtol=1e-6, atol=0), f"{weighted} {loss}")
    check("position_tokens sum to /eval/tokens; unscored positions are NaN",
          np.all(tok.sum() == tokens) and np.array_equal(np.isnan(lbp[0]), tok == 0))
    s, (e0, e1), (l0, l1) = bands(tok)
    named = [a.get(k) for k in ("first_scored", "early_first", "early_end", "late_first", "late_end")]
    want = lbp[:, l0:l1].mean(1) - lbp[:, e0:e1].mean(1)
    check(f"induction: ICL bands from position {s}: early {e0}..{e1 - 1}, late {l0}..{l1 - 1}, named as "
          "attributes", named == [s, e0, e1, l0, l1] and s > 0, f"{named}")
    check("/eval/icl_score is the late band's mean loss minus the early band's (1e-12)",
          np.allclose(icl, want, rtol=0, atol=1e-12), f"{icl} {want}")


def formation_numpy(f):
    """Per pattern (after, step) of the earliest head, from /scores and /study_steps."""
    rows = {}
    for s in f.get("study_steps", {}):
        rows[int(s)] = {p: f[f"study_steps/{s}/scores/{p}"][0] for p in ("prev", "induction")}
    for i, s in enumerate(f["attn/step"][()]):
        rows[int(s)] = {p: f[f"scores/{p}"][i] for p in ("prev", "induction")}
    steps = sorted(rows)
    out = {}
    for p in ("prev", "induction"):
        x = np.stack([rows[s][p] for s in steps])  # [S, L, H]
        crossed = (x[0] < 0.5) & (x[-1] >= 0.5)
        first = np.where(crossed, np.argmax(x >= 0.5, axis=0), len(steps))
        if crossed.any():
            k = int(first.min())
            out[p] = (steps[k - 1], steps[k])
    return out


def test_formation(path):
    with h5py.File(path, "r") as f:
        want = formation_numpy(f)
    got = {p: (m["after"], m["step"]) for p, m in Run(path).formation.items()}
    check(f"formation intervals recomputed from /scores and /study_steps: {want}",
          got == want and "induction" in want, f"reader {got}")
    from heads.sweep import summary

    class Spec:  # what summary_row reads of a sweep's run
        name, swept, overrides, seed = "r", {}, {}, 0
    row = summary.summary_row(Spec(), Run(path), (None, None))
    a, b = want["induction"]
    check("the summary row: formed_induction_after, formed_induction and icl_score",
          (row["formed_induction_after"], row["formed_induction"]) == (a, b) and
          row["icl_score"] == float(Run(path).icl_score[-1]), str(row))


def test_at_and_export(path, work):
    run = Run(path)
    with h5py.File(path, "r") as f:
        k = list(f["snapshots/step"][()]).index(100)
        w = f["snapshots/params/layer1/w_qkv"][k]
        delta = f["study_steps/100/heads/ablation_delta"][()]
    at = run.at(100)
    check("run.at(100): the snapshot's weights and its study, as stored",
          np.array_equal(at.params["layer1/w_qkv"], w) and np.array_equal(at["heads/ablation_delta"], delta)
          and at["heads/ablation_delta"].shape == (2, 4))
    out = os.path.join(work, "s100.npz")
    p = subprocess.run([PY, os.path.join(ROOT, "scripts/export"), path, "--to", "npz", out, "--step", "100"],
                       capture_output=True, text=True)
    ok = p.returncode == 0 and np.array_equal(np.load(out)["layer1/w_qkv"], w)
    check("scripts/export --step 100 writes the snapshot of step 100", ok, p.stderr)
    p = subprocess.run([PY, os.path.join(ROOT, "scripts/export"), path, "--to", "npz", out + "x", "--step", "99"],
                       capture_output=True, text=True)
    check("scripts/export --step 99 (no snapshot): exit 2 naming the steps held, nothing written",
          p.returncode == 2 and "no weight snapshot at step 99" in p.stderr and not os.path.exists(out + "x"),
          p.stderr)


def test_figure(path, work):
    outdir = os.path.join(work, "plots")
    p = subprocess.run([PY, os.path.join(ROOT, "scripts/plot"), path, "-o", outdir], capture_output=True, text=True)
    png, table = os.path.join(outdir, "over_training.png"), os.path.join(outdir, "over_training.csv")
    check("scripts/plot writes over_training.png and its CSV", p.returncode == 0 and os.path.exists(png)
          and os.path.exists(table), p.stderr[-300:])
    with open(table) as fh, h5py.File(path, "r") as f:
        rows = list(csv.DictReader(fh))
        by = {int(r["step"]): r for r in rows}
        eval_ok = all(float(by[int(s)]["eval_loss"]) == v for s, v in zip(f["eval/step"][()], f["eval/loss"][()]))
        icl_ok = all(float(by[int(s)]["icl_score"]) == v for s, v in zip(f["eval/step"][()], f["eval/icl_score"][()]))
        d = f["study_steps/50/heads/ablation_delta"][()]
        abl_ok = all(float(by[50][f"ablation_delta L{l}H{h}"]) == d[l, h] for l in range(2) for h in range(4))
    check("over_training.csv holds /eval/loss, /eval/icl_score and /study_steps' ablation Δloss exactly",
          eval_ok and icl_ok and abl_ok)


def test_two_source(harness, work):
    path = train(harness, work, "two", task="two_source", steps=20)
    with h5py.File(path, "r") as f:
        icl, why = f["eval/icl_score"][()], f["eval/icl_score"].attrs.get("not_defined", "")
    check("two_source: /eval/icl_score NaN, not_defined says why", np.isnan(icl).all() and "two_source" in why, why)


def main():
    harness = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory() as work:
        path = train(harness, work, "ind")
        for test in (test_positions, test_formation, lambda p: test_at_and_export(p, work),
                     lambda p: test_figure(p, work)):
            try:
                test(path)
            except Exception as e:  # one failure, and the suite goes on
                check(getattr(test, "__name__", "test"), False, repr(e))
        try:
            test_two_source(harness, work)
        except Exception as e:
            check("two_source", False, repr(e))
    return finish()


if __name__ == "__main__":
    sys.exit(main())
