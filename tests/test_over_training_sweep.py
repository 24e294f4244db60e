#!/usr/bin/python3
# suite: scripts/over-training on a small sweep: every interval, count and sign test recomputed in NumPy/scipy from the stored datasets
# suite-args: {harness}
"""tests/test_over_training_sweep.py HARNESS: scripts/over-training's answers recomputed.

Four small induction runs (2 and 4 heads, seeds 0 and 1) with weight snapshots and their study;
then, from the raw datasets with NumPy and scipy (none of the package's functions):
- the ICL drop: the consecutive /eval/icl_score pair with the largest fall;
- the induction heads' formation interval from /attn + /scores and /study_steps;
- each group's Δloss rise: layer-0 prev / layer-1 induction heads of /scores/class, the largest
  single-head /study_steps/<s>/heads/ablation_delta, the first snapshot at >= 0.1 nats;
- the overlap (else: after or before) and order per run, the counts and the two-sided exact sign
  tests (scipy.stats.binomtest) per head count;
- over_training_sweep.csv holds exactly the numbers the file stores, and docs/experiments.md
  §10's table is docs/over-training.csv's ICL drops and Δloss crossings; a complete run without a
  study at every snapshot is left out and named; a folder without runs exits 2.
"""
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile

import h5py
import numpy as np
from scipy import stats as sps

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, finish  # noqa: E402

PY = "/usr/bin/python3"
CONFIG = """\
model: {{vocab_size: 16, d_model: 48, n_head: {n}, n_layer: 2, seq_len: 24}}
train: {{steps: 300, batch_size: 16, lr: 3.0e-3, warmup_steps: 10, seed: {seed}, threads: 1}}
data: {{task: induction, min_period: 3, max_period: 8}}
output: {{path: {name}.h5, log_every: 10, eval_every: 10, eval_batches: 2, attn_every: 20, probes: 4,
         snapshots: "log:50", snapshot_study: true, patch_batches: 0}}
"""


def train(harness, work, n, seed):
    name = f"h{n}_s{seed}"
    cfg = os.path.join(work, name + ".yaml")
    with open(cfg, "w") as f:
        f.write(CONFIG.format(n=n, seed=seed, name=name))
    p = subprocess.run([harness, cfg, "--overwrite"], cwd=work, capture_output=True, text=True, timeout=900)
    check(f"{name}: the run completes", p.returncode == 0, p.stderr[-400:])
    os.remove(cfg)
    return os.path.join(work, name + ".h5")


def interval_of(steps, first):
    return None if first is None else (int(steps[first - 1]) if first else -1, int(steps[first]))


def expected(path):
    """Every per-run figure, recomputed from the datasets."""
    with h5py.File(path, "r") as f:
        es, icl = f["eval/step"][()], f["eval/icl_score"][()]
        d = np.diff(icl)
        k = int(np.argmin(d))
        drop = (int(es[k]), int(es[k + 1]), float(d[k]))
        rows = {int(s): f[f"study_steps/{s}/scores/induction"][0] for s in f["study_steps"]}
        for i, s in enumerate(f["attn/step"][()]):
            rows[int(s)] = f["scores/induction"][i]
        steps = sorted(rows)
        x = np.stack([rows[s] for s in steps])
        crossed = (x[0] < 0.5) & (x[-1] >= 0.5)
        formed = None
        if crossed.any():
            k = int(np.where(crossed, np.argmax(x >= 0.5, axis=0), len(steps)).min())
            formed = (steps[k - 1], steps[k])
        cls = f["scores/class"][()].astype(str)
        snaps = sorted(int(s) for s in f["study_steps"])
        delta = np.stack([f[f"study_steps/{s}/heads/ablation_delta"][()] for s in snaps])
    out = {"icl_drop": drop, "formed_induction": formed}
    for name, layer in (("prev", 0), ("induction", 1)):
        heads = np.flatnonzero(cls[layer] == name)
        curve = delta[:, layer, heads].max(axis=1) if len(heads) else np.zeros(0)
        hit = np.flatnonzero(curve >= 0.1)
        out[f"rise_{name}"] = interval_of(snaps, int(hit[0])) if len(hit) else None
        out[f"delta_{name}"] = curve
    a, b = out["rise_prev"], out["rise_induction"]
    out["prev_first"] = None if a is None or b is None or a == b else a[1] <= b[0]
    out["drop_in_formation"] = None if formed is None else drop[0] < formed[1] and formed[0] < drop[1]
    out["drop_after_formation"] = None if formed is None or out["drop_in_formation"] else drop[0] >= formed[1]
    return out


def same(got, want):
    if want is None or got is None:
        return got is None and want is None
    return tuple(got) == tuple(want)


def test_docs_table():
    """docs/experiments.md §10's table against docs/over-training.csv (the figure's numbers): each
    run's ICL drop and both Δloss crossings of 0.1 nats, recomputed here."""
    with open(os.path.join(ROOT, "docs", "over-training.csv")) as fh:
        rows = list(csv.DictReader(fh))
    with open(os.path.join(ROOT, "docs", "experiments.md")) as fh:
        md = fh.read()
    section = md[md.index("## 10. `over_training.yaml`"):md.index("## Summary and caveats")]
    table = {c[0]: c for c in ([x.strip() for x in line.strip().strip("|").split("|")]
                               for line in section.splitlines() if line.startswith("| h")) if c}
    ok = len(table) == len({r["run"] for r in rows}) == 10
    for run in sorted({r["run"] for r in rows}):
        curve = lambda name: sorted((int(r["step"]), float(r["value"])) for r in rows
                                    if r["run"] == run and r["curve"] == name)
        icl = curve("icl_score")
        d = [b[1] - a[1] for a, b in zip(icl, icl[1:])]
        k = int(np.argmin(d))
        drop = f"({icl[k][0]}, {icl[k + 1][0]}] {d[k]:+.3f}".replace("-", "−")
        cells = table.get(run, [""] * 5)
        ok &= cells[1] == drop
        for col, name in ((3, "delta_prev"), (4, "delta_induction")):
            pts = curve(name)
            hit = [i for i, (_, v) in enumerate(pts) if v >= 0.1]
            want = "never" if not hit else f"({pts[hit[0] - 1][0] if hit[0] else -1}, {pts[hit[0]][0]}]"
            ok &= cells[col] == want
        if not ok:
            print(f"# {run}: {cells} against drop {drop}")
            break
    check("docs/experiments.md §10: each run's ICL drop and Δloss crossings are docs/over-training.csv's", ok)


def main():
    harness = os.path.abspath(sys.argv[1])
    test_docs_table()
    script = os.path.join(ROOT, "scripts", "over-training")
    with tempfile.TemporaryDirectory() as work:
        paths = [train(harness, work, n, seed) for n in (2, 4) for seed in (0, 1)]
        p = subprocess.run([PY, script, work, "--json"], capture_output=True, text=True)
        got = json.loads(p.stdout) if p.returncode == 0 else {"runs": [], "by_n_head": {}}
        check("scripts/over-training --json runs", p.returncode == 0, p.stderr[-500:])
        runs = {r["run"]: r for r in got["runs"]}
        want = {os.path.basename(q)[:-3]: expected(q) for q in paths}
        ok = set(runs) == set(want)
        for name, w in want.items():
            r = runs.get(name, {})
            ok &= same(r.get("icl_drop", [0, 0])[:2], w["icl_drop"][:2]) \
                and abs(r["icl_drop"][2] - w["icl_drop"][2]) <= 1e-12
            for key in ("formed_induction", "rise_prev", "rise_induction"):
                ok &= same(r.get(key), w[key])
            ok &= r.get("prev_first") == w["prev_first"] and r.get("drop_in_formation") == w["drop_in_formation"] \
                and r.get("drop_after_formation") == w["drop_after_formation"]
            ok &= np.allclose(r.get("delta_prev", []), w["delta_prev"], rtol=0, atol=0) \
                and np.allclose(r.get("delta_induction", []), w["delta_induction"], rtol=0, atol=0)
        check("per run: the ICL drop, the formation interval, both Δloss rises, the overlap and the order, "
              "recomputed from the datasets", ok, json.dumps(got["runs"], default=str)[:900])
        ok = True
        for n in (2, 4):
            ws = [w for name, w in want.items() if name.startswith(f"h{n}_")]
            order = [w["prev_first"] for w in ws if w["prev_first"] is not None]
            b = got["by_n_head"].get(str(n), {})
            p_want = sps.binomtest(sum(order), len(order), 0.5).pvalue if order else float("nan")
            after = [w["drop_after_formation"] for w in ws if w["drop_after_formation"] is not None]
            pa = sps.binomtest(sum(after), len(after), 0.5).pvalue if after else None
            ok &= b.get("drop_after") == sum(after) and b.get("drop_outside") == len(after) \
                and (abs(b["drop_sign_p"] - pa) < 1e-12 if after else b.get("drop_sign_p") is None)
            ok &= b.get("drop_in_formation") == sum(w["drop_in_formation"] or 0 for w in ws) \
                and b.get("prev_first") == sum(order) and b.get("order_resolved") == len(order) \
                and (abs(b["sign_p"] - p_want) < 1e-12 if order else b.get("sign_p") is None)
        check("per head count: the counts and the exact two-sided sign test (scipy.stats.binomtest)", ok,
              json.dumps(got["by_n_head"]))
        table = os.path.join(work, "plots", "over_training_sweep.csv")
        ok = os.path.exists(os.path.join(work, "plots", "over_training_sweep.png")) and os.path.exists(table)
        if ok:
            with open(table) as fh:
                rows = list(csv.DictReader(fh))
            for q in paths:
                name = os.path.basename(q)[:-3]
                with h5py.File(q, "r") as f:
                    icl = dict(zip(f["eval/step"][()].tolist(), f["eval/icl_score"][()].tolist()))
                mine = {int(r["step"]): float(r["value"]) for r in rows if r["run"] == name and r["curve"] == "icl_score"}
                dp = [float(r["value"]) for r in rows if r["run"] == name and r["curve"] == "delta_prev"]
                ok &= mine == icl and np.array_equal(dp, want[name]["delta_prev"])
        check("over_training_sweep.png with its CSV: the ICL scores and Δloss curves the files store", ok)
        with h5py.File(paths[0], "a") as f:  # a study that stops short of the last snapshot
            del f[f"study_steps/{max(int(s) for s in f['study_steps'])}"]
        p = subprocess.run([PY, script, work], capture_output=True, text=True)
        check("a complete run without a study at every snapshot is left out and named",
              p.returncode == 0 and "left out" in p.stdout and os.path.basename(paths[0])[:-3] in p.stdout,
              p.stdout[-400:] + p.stderr[-300:])
        empty = os.path.join(work, "empty")
        os.mkdir(empty)
        p = subprocess.run([PY, script, empty], capture_output=True, text=True)
        check("a folder without runs: exit 2, one line", p.returncode == 2 and len(p.stderr.splitlines()) == 1,
              p.stderr)
        shutil.rmtree(empty)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
