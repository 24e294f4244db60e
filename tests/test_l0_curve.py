#!/usr/bin/python3
# suite: the learned-gates curve of a sweep over train.head_l0 (compare, plot-sweep) recomputed
"""The answer of a sweep over train.head_l0 (experiments/l0.yaml), recomputed here from the run
files with h5py, NumPy and scipy (none of the package's functions): heads kept against eval
loss beside the pruning curves of the λ = 0 run of the same seed (scripts/compare's gate table
and its JSON, scripts/plot-sweep's l0_curve.csv), the pruned models against their kept shapes
trained from scratch (compare --scratch: Welch's t-test, scipy.stats.ttest_ind with
equal_var=False), and train.heads_kept, the kept shape from scratch: the closed heads' rows of
W_o are zero, their Q, K and V columns got no gradient (their initial values times the weight
decay of every step, computed here from the schedule), and keeping every head is the run
without the key, bit for bit; train.head_l0_lr_scale: 1 is the run without it, bit for bit, and
scale 2 moves log α twice as far in the first step. Then a real tiny sweep (scripts/sweep: λ in
{0, 0.01}, 2 seeds) and its scratch sweep: compare's numbers from the real /heads/kept and
/prune, and the sweep report in headless Chromium (skipped without it): the learned-gates
chart (every pruning curve and λ), and its tables equal to scripts/compare's.

usage: /usr/bin/python3 tests/test_l0_curve.py [--keep]
  --keep   keep the temporary directory (fixtures, figures, CSVs) and print its path

The fixture is two sweep directories written with h5py (and heads.sweep.summary for the summary.h5
under test): 4 heads x 2 layers, λ in {0, 0.01, 0.05} x 4 seeds, the λ = 0 runs with pruning
curves of one head a step (importance) and of two heads a step (delta_loss: the matched loss is
then interpolated between points), the gated runs with a /heads/kept mask; and a scratch sweep
over train.heads_kept. Needs gnuplot and a built harness (`make`, or $HARNESS). Checks, one line each, then "N passed, M failed".
"""
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np
from scipy import stats as sps

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.join(ROOT, "python"))  # heads: only to write a summary under test
from checks import (browser, check, console_errors, end_suite, harness_missing,  # noqa: E402
                    holm_by_hand, open_page, read_csv, run_check)

PY = "/usr/bin/python3"
HARNESS = os.environ.get("HARNESS", os.path.join(ROOT, "build", "harness"))
KEEP = "--keep" in sys.argv
TMP = tempfile.mkdtemp(prefix="test_l0_curve.")
L, H = 2, 4
LAMBDAS = [0.0, 0.01, 0.05]
SEEDS = [0, 1, 2, 3]
STEPS = 100


def script(name, *args):
    return subprocess.run([PY, os.path.join(ROOT, "scripts", name)] + [str(a) for a in args],
                          capture_output=True, text=True, timeout=300)


class Experiment:
    """What heads.sweep.summary.write_summary reads of an experiment."""
    text, path, base, width, description = "", "-", "-", "fixed_width", ""

    def __init__(self, name, swept):
        self.name, self._swept = name, swept

    def swept_keys(self):
        return self._swept


def summary_row(run, loss, **keys):
    from heads import results
    return {"run": run, "status": "complete", **keys, "seed": keys["train.seed"], "n_head": H,
            "d_head": 4, "d_model": 16, "n_layer": L, "E": 16, "params": 1000,
            "flops_per_token": 2000, "final_step": STEPS, "final_train_loss": loss,
            "final_eval_loss": loss, "min_eval_loss": loss, "train_seconds": 1.0,
            **{f"heads_{c}": 0 for c in results.CLASSES[:-1]}, "heads_mixed": L * H}


def recorded(outdir, rows):
    """What a sweep's summary records of its run files (size, mtime, CRC-32), for its readers to
    check them against: the fixture's files stand for the rows as written."""
    from heads.sweep import states
    return states.file_states(outdir, [r["run"] for r in rows])


def make_gate_sweep(outdir):
    """The λ sweep's run files and summary; returns nothing (the checks read the files back)."""
    from heads.sweep import summary
    os.makedirs(outdir)
    rng = np.random.RandomState(7)
    rows = []
    for lam in LAMBDAS:
        for seed in SEEDS:
            run = f"head_l0{lam:g}_s{seed}"
            with h5py.File(os.path.join(outdir, run + ".h5"), "w") as f:
                f.attrs["status"] = "complete"
                if lam == 0:
                    unpruned = 2.0 + 0.05 * rng.rand()
                    loss = unpruned
                    for c, step in (("importance", 1), ("delta_loss", 2)):
                        left = np.arange(L * H, -1, -step)
                        curve = unpruned + np.cumsum(np.r_[0, rng.rand(len(left) - 1) * 0.2])
                        f[f"prune/{c}/heads_left"] = left.astype(np.int64)
                        f[f"prune/{c}/eval_loss"] = curve
                else:
                    kept = np.zeros((L, H), dtype=np.uint8)
                    n_keep = {0.01: 5, 0.05: 3}[lam] + rng.randint(-1, 2)
                    cells = rng.permutation(L * H)[:n_keep]
                    kept.flat[cells] = 1
                    kept[0, 0] = 1  # every layer keeps a head
                    kept[1, 0] = 1
                    f["heads/kept"] = kept
                    loss = 2.0 + 0.1 * (L * H - kept.sum()) * rng.rand()
                f["eval/step"] = np.array([0, STEPS], dtype=np.int64)  # plot-sweep's eval curves
                f["eval/loss"] = np.array([5.5, loss])
            rows.append(summary_row(run, float(loss), **{"train.head_l0": lam,
                                                          "train.seed": seed}))
    summary.write_summary(outdir, rows, Experiment("l0", ["train.head_l0", "train.seed"]),
                          recorded(outdir, rows))


def read_back(outdir):
    """{(λ, seed): (final eval loss, kept mask or None, {criterion: (heads_left, eval_loss)})}."""
    out = {}
    with h5py.File(os.path.join(outdir, "summary.h5"), "r") as s:
        runs = [r.decode() if isinstance(r, bytes) else r for r in s["run"][()]]
        lams, seeds, losses = s["train.head_l0"][()], s["train.seed"][()], s["final_eval_loss"][()]
    for run, lam, seed, loss in zip(runs, lams, seeds, losses):
        with h5py.File(os.path.join(outdir, run + ".h5"), "r") as f:
            kept = f["heads/kept"][()].astype(bool) if "heads/kept" in f else None
            curves = {c: (f[f"prune/{c}/heads_left"][()], f[f"prune/{c}/eval_loss"][()])
                      for c in ("importance", "delta_loss") if f"prune/{c}/eval_loss" in f}
        out[(float(lam), int(seed))] = (float(loss), kept, curves)
    return out


def at_heads(left, loss, k):
    """The curve's loss at k heads left, linear between its points (written out, not np.interp)."""
    pts = sorted(zip(left.tolist(), loss.tolist()))
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if x0 <= k <= x1:
            return y0 if x1 == x0 else y0 + (y1 - y0) * (k - x0) / (x1 - x0)
    return None


def close(a, b, rtol=1e-9):
    return a is not None and b is not None and math.isclose(a, b, rel_tol=rtol, abs_tol=1e-12)


def test_gate_table():
    d = os.path.join(TMP, "l0")
    make_gate_sweep(d)
    got = read_back(d)
    p = script("compare", d, "--json")
    check("compare --json on a λ sweep exits 0", p.returncode == 0, p.stderr.strip()[-300:])
    js = json.loads(p.stdout)
    rows = {r["lambda"]: r for r in js["l0_gates"]["rows"]}
    check("a row per λ", sorted(rows) == LAMBDAS, sorted(rows))
    pvals, where = [], []
    for lam in LAMBDAS[1:]:
        r = rows[lam]
        kept = [int(got[(lam, s)][1].sum()) for s in SEEDS]
        loss = [got[(lam, s)][0] for s in SEEDS]
        shapes = [got[(lam, s)][1].sum(axis=1).tolist() for s in SEEDS]
        median = [int(math.ceil(v)) for v in np.median(np.array(shapes), axis=0)]
        check(f"λ {lam}: heads kept per seed, mean and sample std",
              r["heads_kept"]["values"] == kept
              and close(r["heads_kept"]["mean"], np.mean(kept))
              and close(r["heads_kept"]["std"], np.std(kept, ddof=1)), (r["heads_kept"], kept))
        check(f"λ {lam}: eval loss mean and std", close(r["eval_loss"]["mean"], np.mean(loss))
              and close(r["eval_loss"]["std"], np.std(loss, ddof=1)))
        check(f"λ {lam}: kept per layer and its median (halves up)",
              r["shapes"] == shapes and r["shape"] == median, (r["shapes"], r["shape"], median))
        for c in ("importance", "delta_loss"):
            matched = [at_heads(*got[(0.0, s)][2][c], k) for s, k in zip(SEEDS, kept)]
            t = sps.ttest_ind(loss, matched, equal_var=False)
            e = r["pruning"][c]
            check(f"λ {lam}, {c}: the λ = 0 run of each seed pruned to as many heads",
                  all(close(a, b) for a, b in zip(e["values"], matched)), (e["values"], matched))
            check(f"λ {lam}, {c}: Δ, Welch t and p (scipy.stats.ttest_ind, equal_var=False)",
                  close(e["delta"], np.mean(loss) - np.mean(matched))
                  and close(e["t"], float(t.statistic), 1e-7) and close(e["p"], float(t.pvalue), 1e-6),
                  (e, t))
            pvals.append(float(t.pvalue))
            where.append(e)
    q = holm_by_hand(pvals)
    check("Holm p over the table's 4 tests", js["l0_gates"]["holm_family"] == 4
          and all(close(e["holm_p"], v, 1e-6) for e, v in zip(where, q)))
    md = script("compare", d)
    check("the Markdown has the gate table", md.returncode == 0
          and "## Learned head gates against pruning" in md.stdout
          and "| 0.05 | 4 |" in md.stdout, md.stdout[-600:])

    # the figure and its CSV
    out = os.path.join(TMP, "plots")
    p = script("plot-sweep", d, "-o", out)
    check("plot-sweep draws l0_curve.png", p.returncode == 0 and os.path.getsize(
        os.path.join(out, "l0_curve.png")) > 0, p.stderr[-300:])
    rows_csv = read_csv(os.path.join(out, "l0_curve.csv"))
    for c in ("importance", "delta_loss"):
        curves = np.array([got[(0.0, s)][2][c][1] for s in SEEDS])
        left = got[(0.0, 0)][2][c][0]
        mine = [r for r in rows_csv if r["series"] == c]
        check(f"l0_curve.csv: the λ = 0 runs' mean {c} curve ± std over seeds, every point",
              [int(float(r["heads_left_mean"])) for r in mine] == left.tolist()
              and all(close(float(r["eval_loss_mean"]), m) and close(float(r["eval_loss_std"]), sd)
                      for r, m, sd in zip(mine, curves.mean(axis=0), curves.std(axis=0, ddof=1))),
              mine[:2])
    for lam in LAMBDAS[1:]:
        r = next(r for r in rows_csv if r["series"] == "gates" and float(r["train.head_l0"]) == lam)
        kept = [int(got[(lam, s)][1].sum()) for s in SEEDS]
        loss = [got[(lam, s)][0] for s in SEEDS]
        seeds = [x.split(":") for x in r["each_seed"].split()]
        check(f"l0_curve.csv: λ {lam}'s point (heads kept, loss: mean ± std) and every seed",
              close(float(r["heads_left_mean"]), np.mean(kept))
              and close(float(r["heads_left_std"]), np.std(kept, ddof=1))
              and close(float(r["eval_loss_mean"]), np.mean(loss))
              and close(float(r["eval_loss_std"]), np.std(loss, ddof=1))
              and [(int(a), int(b), float(c)) for a, b, c in seeds]
              == [(s, k, v) for s, k, v in zip(SEEDS, kept, loss)], r)
    return d, got


def test_scratch(d, got):
    from heads.sweep import summary
    sd = os.path.join(TMP, "l0_scratch")
    os.makedirs(sd)
    rng = np.random.RandomState(3)
    medians, rows, scratch = {}, [], {}
    for lam in LAMBDAS[1:]:
        shapes = [got[(lam, s)][1].sum(axis=1) for s in SEEDS]
        medians[lam] = ",".join(str(int(math.ceil(v))) for v in np.median(shapes, axis=0))
    for lam, shape in medians.items():
        for seed in SEEDS:
            loss = 2.1 + 0.1 * rng.rand()
            scratch[(shape, seed)] = loss
            rows.append(summary_row(f"heads_kept{shape}_s{seed}", loss,
                                    **{"train.heads_kept": shape, "train.seed": seed}))
    summary.write_summary(sd, rows, Experiment("l0_scratch", ["train.heads_kept", "train.seed"]),
                          recorded(sd, rows))
    p = script("compare", d, "--json")  # DIR_scratch beside the sweep is found
    js = json.loads(p.stdout) if p.returncode == 0 else {}
    got_rows = {r["lambda"]: r for r in js.get("l0_scratch", {}).get("rows", [])}
    check("compare finds DIR_scratch and compares both λ", sorted(got_rows) == LAMBDAS[1:],
          p.stderr[-300:])
    for lam in LAMBDAS[1:]:
        pruned = [got[(lam, s)][0] for s in SEEDS]
        fresh = [scratch[(medians[lam], s)] for s in SEEDS]
        t = sps.ttest_ind(pruned, fresh, equal_var=False)
        r = got_rows.get(lam, {})
        check(f"λ {lam}: pruned against scratch {medians[lam]}: Δ, Welch t and p (scipy)",
              close(r.get("delta"), np.mean(pruned) - np.mean(fresh))
              and close(r.get("t"), float(t.statistic), 1e-7) and close(r.get("p"), float(t.pvalue), 1e-6)
              and r.get("pruned", {}).get("values") == pruned
              and r.get("scratch", {}).get("values") == fresh, (r, t))
    md = script("compare", d, "--scratch", sd)
    check("the Markdown has the scratch table", md.returncode == 0
          and "## The pruned models against their kept shapes trained from scratch" in md.stdout,
          md.stdout[-400:])


def test_bad_input():
    d = os.path.join(TMP, "l0")
    p = script("compare", d, "--scratch", os.path.join(TMP, "nowhere"))
    check("--scratch a missing directory: one line, exit 2",
          p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1
          and "nowhere" in p.stderr, (p.returncode, p.stderr))
    p = script("compare", os.path.join(TMP, "l0_scratch"), "--scratch", d)
    check("--scratch beside a sweep that is not over train.head_l0: one line, exit 2",
          p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1
          and "train.head_l0" in p.stderr, (p.returncode, p.stderr))
    p = script("compare", d, "--scratch", d)
    check("--scratch naming a sweep not over train.heads_kept: one line, exit 2",
          p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1
          and "train.heads_kept" in p.stderr, (p.returncode, p.stderr))


TINY = """\
model: {vocab_size: 256, d_model: 16, n_head: 4, n_layer: 2, seq_len: 16}
train: {steps: 40, batch_size: 8, lr: 3.0e-2, warmup_steps: 4, seed: 0, threads: 1,
        weight_decay: 0.1, min_lr_ratio: 0.1}
data: {task: text, path: /usr/share/common-licenses/GPL-3}
output: {log_every: 10, eval_every: 10, eval_batches: 2, attn_every: 20, probes: 1}
"""


def lr_at(step, steps=40, lr=3e-2, warmup=4, floor=0.1):
    """The cosine schedule with linear warmup of docs/configuration.md, written out."""
    if step < warmup:
        return lr * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, steps - warmup))
    return lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress)))


def tiny_runs(directory):
    """run(name, *sets): the TINY config run in TMP/directory with --set sets, checked to
    complete; returns its results file opened with h5py."""
    d = os.path.join(TMP, directory)
    os.makedirs(d)
    config = os.path.join(d, "tiny.yaml")
    with open(config, "w") as f:
        f.write(TINY)

    def run(name, *sets):
        out = os.path.join(d, name + ".h5")
        p = subprocess.run([HARNESS, config, "--set", f"output.path={out}"]
                           + [a for s in sets for a in ("--set", s)], capture_output=True,
                           text=True, timeout=300)
        check(f"harness {' '.join(sets) or '(no key)'} completes", p.returncode == 0,
              p.stderr[-300:])
        return h5py.File(out, "r")
    return run


def test_heads_kept():
    run = tiny_runs("kept")
    kept = [2, 3]
    with run("kept", "train.heads_kept=2,3") as k, run("init", "train.steps=0") as i:
        decay = np.prod([1 - np.float32(lr_at(s)) * np.float32(0.1) for s in range(40)])
        E, dh = 16, 4
        for layer, n in enumerate(kept):
            w_o = k[f"params/layer{layer}/w_o"][()]
            q, q0 = k[f"params/layer{layer}/w_qkv"][()], i[f"params/layer{layer}/w_qkv"][()]
            closed = [c for part in range(3) for c in range(part * E + n * dh, part * E + E)]
            opened = [c for part in range(3) for c in range(part * E, part * E + n * dh)]
            check(f"layer {layer} keeps {n}: the closed heads' rows of W_o are zero, the open "
                  "heads' are not", (w_o[n * dh:] == 0).all() and (w_o[:n * dh] != 0).any())
            check(f"layer {layer}: the closed heads' Q, K, V columns are their initial values "
                  f"times the decay of every step ({decay:.6f}): no gradient reached them",
                  np.allclose(q[:, closed], q0[:, closed] * decay, rtol=2e-5, atol=0)
                  and not np.allclose(q[:, opened], q0[:, opened] * decay, rtol=1e-2),
                  (q[:, closed] / q0[:, closed]).ravel()[:4])
            check(f"layer {layer}: zero-ablating a closed head changes nothing",
                  (k["heads/ablation_delta"][layer][n:] == 0).all(), k["heads/ablation_delta"][layer])
    with run("all", "train.heads_kept=4,4") as a, run("none") as b:
        names = []
        b["params"].visit(lambda n: names.append(n) if isinstance(b["params"][n], h5py.Dataset)
                          else None)
        check("heads_kept 4,4 is the run without the key, bit for bit (/params, /eval/loss)",
              all(np.array_equal(a["params"][n][()], b["params"][n][()]) for n in names)
              and np.array_equal(a["eval/loss"][()], b["eval/loss"][()]), names)


def test_lr_scale():
    run = tiny_runs("scale")

    def log_alpha(name, *sets):
        with run(name, "train.head_l0=0.01", *sets) as f:
            return f["params/log_alpha"][()], f["eval/loss"][()]
    a0, _ = log_alpha("init", "train.steps=0")
    a1, l1 = log_alpha("scale1", "train.steps=1", "train.head_l0_lr_scale=1")
    b1, m1 = log_alpha("plain", "train.steps=1")
    a2, _ = log_alpha("scale2", "train.steps=1", "train.head_l0_lr_scale=2")
    check("head_l0_lr_scale 1 is the run without the key, bit for bit (log α, eval loss)",
          np.array_equal(a1, b1) and np.array_equal(l1, m1))
    check("head_l0_lr_scale 2: the first step moves log α twice as far",
          np.abs(a1 - a0).min() > 0 and np.allclose(a2 - a0, 2 * (a1 - a0), rtol=1e-4, atol=1e-7),
          ((a2 - a0) / (a1 - a0)).ravel()[:4])


def markdown_rows(text, title):
    """The cells of the Markdown table under the heading `## title` of compare's output."""
    lines = text.split(f"## {title}\n", 1)[1].strip().splitlines()
    table = lines[:next((k for k, line in enumerate(lines) if not line.startswith("|")), len(lines))]
    return [[c.strip() for c in line.strip().strip("|").split("|")] for line in table[2:]]


def test_real_sweep():
    d = os.path.join(TMP, "real")
    os.makedirs(d)
    base = os.path.join(d, "tiny.yaml")
    with open(base, "w") as f:
        f.write(TINY.replace("steps: 40,", "steps: 60,"))
    exp = os.path.join(d, "gates.yaml")
    with open(exp, "w") as f:
        f.write(f"base: {base}\nset: {{train.head_l0_lr_scale: 10, output.prune_step: 0.125}}\n"
                "grid: {train.head_l0: [0, 0.01]}\nseeds: 2\n")
    res = os.path.join(d, "results")
    sweep = [PY, os.path.join(ROOT, "scripts", "sweep")]
    p = subprocess.run(sweep + [exp, "-j", "2", "--results", res], capture_output=True, text=True,
                       timeout=600)
    check("a λ sweep of 4 tiny runs", p.returncode == 0, p.stderr[-400:])
    gates_dir = os.path.join(res, "gates")
    js = json.loads(script("compare", gates_dir, "--json").stdout)["l0_gates"]
    row = next(r for r in js["rows"] if r["lambda"] == 0.01)
    runs = {}
    for seed in (0, 1):
        with h5py.File(os.path.join(gates_dir, f"lambda0.01_s{seed}.h5"), "r") as f:
            kept = f["heads/kept"][()]
            loss = float(f["eval/loss"][-1])
        with h5py.File(os.path.join(gates_dir, f"lambda0_s{seed}.h5"), "r") as f:
            curve = (f["prune/delta_loss/heads_left"][()], f["prune/delta_loss/eval_loss"][()])
        runs[seed] = (kept, loss, at_heads(*curve, int(kept.sum())))
    check("real runs: heads kept, eval loss and the λ = 0 run pruned to as many heads (delta_loss)",
          row["heads_kept"]["values"] == [int(runs[s][0].sum()) for s in (0, 1)]
          and all(close(a, runs[s][1]) for a, s in zip(row["eval_loss"]["values"], (0, 1)))
          and all(close(a, runs[s][2]) for a, s in
                  zip(row["pruning"]["delta_loss"]["values"], (0, 1))), (row, runs))
    shape = ",".join(str(int(math.ceil(v))) for v in
                     np.median([runs[s][0].sum(axis=1) for s in (0, 1)], axis=0))
    exp = os.path.join(d, "gates_scratch.yaml")
    with open(exp, "w") as f:
        f.write(f"base: {base}\ngrid: {{train.heads_kept: ['{shape}']}}\nseeds: 2\n")
    p = subprocess.run(sweep + [exp, "-j", "2", "--results", res], capture_output=True, text=True,
                       timeout=600)
    check(f"its kept shape {shape} from scratch, 2 seeds", p.returncode == 0, p.stderr[-400:])
    md = script("compare", gates_dir)
    scratch = markdown_rows(md.stdout, "The pruned models against their kept shapes trained "
                            "from scratch")
    check("compare finds the scratch sweep beside the λ sweep", md.returncode == 0
          and len(scratch) == 1 and scratch[0][0] == "0.01", md.stdout[-500:])
    p = script("report", gates_dir)
    check("report of the λ sweep: exit 0", p.returncode == 0, p.stderr[-300:])
    drv, why = browser()
    if drv is None:
        print(f"skipped: no chromium ({why}); the sweep page was not opened")
        return
    try:
        check("the sweep page opens with no console error",
              open_page(drv, os.path.join(gates_dir, "report.html")) and not console_errors(drv),
              str(console_errors(drv)))
        names = [g.get_attribute("data-name") for g in drv.find_elements(
            "css selector", "#sweep-gates-0 g.series")]
        check("the learned-gates chart: both pruning curves, λ 0.01 and its seeds",
              len(names) == 4 and sum(n.startswith("pruning λ = 0") for n in names) == 2
              and "gates λ = 0.01 (2 seeds)" in names, str(names))
        for k, title in enumerate(["Learned head gates against pruning at the same number of "
                                   "heads", "The pruned models against their kept shapes "
                                   "trained from scratch"]):
            shown = drv.execute_script(
                f"return [...document.querySelectorAll('#gates-table-{k} tr')].slice(1)"
                ".map(tr => [...tr.children].map(td => td.textContent))")
            check(f"the page's table '{title}' is compare's", shown == markdown_rows(md.stdout, title),
                  f"{shown} vs {markdown_rows(md.stdout, title)}")
    finally:
        drv.quit()


def main():
    t0 = time.time()
    if harness_missing(HARNESS):
        return 1
    run_check("heads_kept", test_heads_kept)
    run_check("head_l0_lr_scale", test_lr_scale)
    run_check("a real λ sweep, its scratch sweep and the report", test_real_sweep)
    state = {}

    def gates():
        state["d"], state["got"] = test_gate_table()
    run_check("gate table", gates)
    if state:
        run_check("scratch table", lambda: test_scratch(state["d"], state["got"]))
        run_check("bad input", test_bad_input)
    return end_suite(TMP, KEEP, t0)


if __name__ == "__main__":
    sys.exit(main())
