#!/usr/bin/python3
# suite: a sweep's answers (compare --json, every figure's CSV, the sweep report) recomputed
"""Every number a sweep shows, recomputed here from the run files (h5py, NumPy, scipy; none of
the package's functions): small real sweeps over n_head (fixed width), d_head (fixed_d_head),
n_kv_head and n_head x train.lr, and a summary with known numbers whose best head count is the
baseline, and a points sweep (layouts: 1, 2 and 4 heads at fixed width and 4 heads of 8, E >
d_model) compared along its layout axis.

usage: /usr/bin/python3 tests/test_sweep_answers.py [--keep]
  --keep   keep the temporary directory (configs, results, figures, CSVs) and print its path

Needs a built harness (`make`, or $HARNESS) and gnuplot; the report checks need chromium,
chromium-driver and python3-selenium (else they print "skipped" and the rest runs). Tiny configs
(d_model 16, 40 steps, train.threads 1): each run takes well under a second. Checks, one line
each, then "N passed, M failed"; exit status 1 if anything failed:
  compare --json  per row the key values, seeds, mean, sample std, Δ against the baseline,
                  Welch t, df and p (scipy.stats.ttest_ind, equal_var=False; df by the
                  Welch-Satterthwaite formula), Holm p over exactly the distinct tests printed
                  (Holm's step-down written out here), heads needed within max(5% of the loss,
                  0.01 nats) from /prune, the heads carrying 80% of the patching effect from
                  /patching/head_out; the extra test (narrowest against best) only when it is
                  not a row already; the Markdown's p values (two significant digits, scientific
                  below 1e-3) and its "over the N distinct tests"
  figures' CSVs   final_eval_loss, eval_curves, head_classes, pruning_curves, heads_needed: one
                  row per layout (every swept key, never pooled) with the numbers recomputed;
                  class counts sum to n_head x n_layer
  tolerance       src/analysis/prune.h and python/heads/read/pruning.py define the same relative tolerance and
                  floor; the harness's printed heads needed equals the recomputation from /prune;
                  compare warns when a run's loss is below the floor
  report          the sweep page's comparison table is compare's; its head-class table counts
                  are the recomputed ones
  docs            docs/layouts.csv (experiments/layouts.yaml's figure's numbers): Welch (scipy)
                  and Holm recomputed from its seeds; docs/experiments.md prints them
"""
import json
import math
import os
import re
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
from checks import (script, write, browser, check, end_suite, harness_missing, holm_by_hand,  # noqa: E402
                    known_summary, read_csv, run_check)

PY = "/usr/bin/python3"
HARNESS = os.environ.get("HARNESS", os.path.join(ROOT, "build", "harness"))
KEEP = "--keep" in sys.argv
TMP = tempfile.mkdtemp(prefix="test_sweep_answers.")
RESULTS = os.path.join(TMP, "results")
REL, FLOOR = 0.05, 0.01  # the documented heads-needed tolerance (docs/sweeps.md)
CLASS_NAMES = ["prev", "self", "first", "induction", "duplicate", "mixed"]
RTOL = 1e-9


TINY = write(os.path.join(TMP, "tiny.yaml"), """\
model: {vocab_size: 256, d_model: 16, n_head: 4, n_layer: 2, seq_len: 16}
train: {steps: 40, batch_size: 8, lr: 3.0e-2, warmup_steps: 4, seed: 0, threads: 1}
data: {task: text, path: /usr/share/common-licenses/GPL-3}
output: {log_every: 10, eval_every: 10, eval_batches: 2, attn_every: 20, probes: 1,
         probe_text: ["The cat sat on the mat"]}
""")

SWEEPS = {  # name: (experiment body, the key compare goes along, the group keys)
    "heads": ("grid: {model.n_head: [1, 4, 16]}\nwidth: fixed_width\nseeds: 3\n",
              "model.n_head", []),
    "dhead": ("set: {model.n_head: 2}\ngrid: {model.d_head: [4, 8]}\nwidth: fixed_d_head\n"
              "seeds: 3\n", "model.d_head", []),
    "kv": ("set: {model.n_head: 4}\ngrid: {model.n_kv_head: [4, 2, 1]}\nseeds: 3\n",
           "model.n_kv_head", []),
    "lr": ("grid: {model.n_head: [1, 4], train.lr: [1.0e-2, 3.0e-2]}\nwidth: fixed_width\n"
           "seeds: 3\n", "model.n_head", ["train.lr"]),
    # a list of layouts, not a product (points:): one head, 2 and 4 at fixed width, and 4 heads
    # of 8 (E = 32 > d_model 16): along 'layout', against the first point
    "layouts": ("points: [{n_head: 1}, {n_head: 2}, {n_head: 4}, {n_head: 4, d_head: 8}]\n"
                "seeds: 3\n", "layout", []),
    # two keys without n_head, one of them text: along the grid's first key, per gate
    "gate": ("set: {model.n_head: 4}\ngrid: {model.n_kv_head: [4, 1], model.output_gate: "
             "[\"false\", \"true\"]}\nseeds: 3\n", "model.n_kv_head", ["model.output_gate"]),
}


# ------------------------------------------------------------------------------------------------
# the independent recomputation: run files read with h5py, statistics with NumPy and scipy


def text(x):
    return x.decode() if isinstance(x, bytes) else str(x)


def heldout_loss(f, split):
    """The end-of-training loss of a split (/heldout: what compare reports by default, the test
    split), read with h5py; the last /eval/loss for a file without /heldout."""
    if "heldout" not in f:
        return float(f["eval/loss"][-1])
    names = [text(x) for x in f["heldout/split"][()]]
    return float(f["heldout/loss"][names.index(split)])


def read_runs(directory, keys):
    """[{keys..., seed, loss (the test split's, compare's default), final_eval (the last periodic
    evaluation), eval: (steps, losses), prune: {criterion: (left, loss)},
    classes: [str], n_head, n_layer}] of the complete runs of a sweep directory."""
    runs = []
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".h5") or name == "summary.h5":
            continue
        with h5py.File(os.path.join(directory, name), "r") as f:
            if text(f.attrs["status"]) != "complete":
                continue
            cfg = f["config"].attrs
            run = {"name": name[:-3], "seed": int(cfg["seed"]), "n_head": int(cfg["n_head"]),
                   "n_layer": int(cfg["n_layer"]), "loss": heldout_loss(f, "test"),
                   "val": heldout_loss(f, "validation"),
                   "final_eval": float(f["eval/loss"][-1]),
                   "eval": (f["eval/step"][()].tolist(), f["eval/loss"][()].astype(float)),
                   "prune": {c: (f[f"prune/{c}/heads_left"][()].astype(int),
                                 f[f"prune/{c}/eval_loss"][()].astype(float))
                             for c in ("importance", "delta_loss") if f"prune/{c}" in f},
                   "patching": f["patching/head_out"][()].astype(float) if "patching/head_out" in f else None}
            # a point's layout as its label says it: n_head×d_head, read from the file's config
            run["layout"] = f"{int(cfg['n_head'])}×{int(cfg['d_head'])}"
            for k in keys:
                if k == "layout":
                    continue
                v = cfg[k.split(".")[-1]]
                v = v.item() if isinstance(v, np.generic) else v
                run[k] = ("true" if v else "false") if isinstance(v, bool) else text(v) \
                    if isinstance(v, bytes) else v
            data = f["scores/class"][()]
            enum = h5py.check_enum_dtype(f["scores/class"].dtype)
            names = {v: k for k, v in enum.items()} if enum else None
            run["classes"] = [names[int(x)] if names else text(x) for x in data.ravel()]
        runs.append(run)
    return runs


def points_of(runs, keys):
    """{(values of keys): [runs]}."""
    out = {}
    for r in runs:
        out.setdefault(tuple(r[k] for k in keys), []).append(r)
    return out


def welch(a, b):
    """t, df, p of mean(a) - mean(b): scipy's Welch test, df by the Welch-Satterthwaite formula."""
    a, b = np.asarray(a), np.asarray(b)
    t, p = sps.ttest_ind(a, b, equal_var=False)
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    return float(t), float(df), float(p)


def needed_by_hand(left, loss):
    limit = loss[0] + max(REL * loss[0], FLOOR)
    k = 0
    while k + 1 < len(loss) and loss[k + 1] <= limit:
        k += 1
    return int(left[k])


def run_needed(run):
    return min(needed_by_hand(*run["prune"][c]) for c in run["prune"])


def carrying_by_hand(effect, share=0.8):
    """The fewest heads whose |patching effects|, largest first, reach share of their sum."""
    a = sorted(np.abs(effect).ravel(), reverse=True)
    return next(k + 1 for k in range(len(a)) if sum(a[:k + 1]) >= share * sum(a) * (1 - 1e-12))


def p_text(p):
    if p < 1e-3:
        return "%.1e" % p
    two = float("%.2g" % p)
    return "%.*f" % (max(0, 1 - math.floor(math.log10(two))), two)


def close(a, b, rtol=RTOL, atol=1e-12):
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(float(a), float(b), rel_tol=rtol, abs_tol=atol)


def same_value(a, b):
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(float(a), float(b), rel_tol=1e-12)
    return str(a) == str(b)


def csv_point(row, keys):
    return tuple(float(row[k]) if re.fullmatch(r"[-+0-9.eE]+", row[k]) else row[k] for k in keys)


def find(d, point):
    """d's entry whose key equals point, values compared as numbers where they are numbers."""
    for k, v in d.items():
        if len(k) == len(point) and all(same_value(a, b) for a, b in zip(k, point)):
            return v
    return None


# ------------------------------------------------------------------------------------------------
# checks


def check_compare(name, directory, by, groups, runs, baseline=None, by_arg=None):
    """compare --json and its Markdown against the recomputation."""
    args = [directory, "--json"] + (["--baseline", baseline] if baseline is not None else []) \
        + (["--by", by_arg] if by_arg else [])
    p = script("compare", *args)
    try:
        got = json.loads(p.stdout)
    except ValueError:
        check(f"{name}: compare --json prints JSON", False, (p.stdout + p.stderr)[-400:])
        return None
    keys = groups + [by]
    pts = points_of(runs, keys)
    check(f"{name}: compare goes along {by}, groups {groups or 'none'}",
          got["by"] == by and got["groups"] == groups, f"{got['by']} {got['groups']}")
    heads = by == "model.n_head"
    if baseline is not None:
        base = next(v for v in {k[-1] for k in pts} if same_value(v, baseline if by == "layout"
                                                                  else float(baseline)))
    elif heads:
        base = 1 if 1 in {k[-1] for k in pts} else min(k[-1] for k in pts)
    elif by == "layout":
        base = first_point_layout(directory)
    else:
        base = runs_grid_first(directory, by)
    rows = {tuple(r["keys"][k] for k in keys): r for r in got["rows"]}
    check(f"{name}: one row per layout ({len(pts)}), none pooled",
          len(rows) == len(pts) and all(find(rows, k) is not None for k in pts),
          f"{sorted(map(str, rows))} vs {sorted(map(str, pts))}")
    ok_mean, ok_test, why = True, True, []
    tests = []  # (row point or ("extra", group), p)
    for point, members in pts.items():
        row = find(rows, point)
        if row is None:
            continue
        losses = [r["loss"] for r in members]
        ok_mean &= row["n"] == len(losses) and close(row["mean"], np.mean(losses)) \
            and close(row["std"], np.std(losses, ddof=1))
        if not ok_mean and len(why) < 3:
            why.append(f"{point}: {row['n']} {row['mean']} {row['std']} vs {len(losses)} "
                       f"{np.mean(losses)} {np.std(losses, ddof=1)}")
        bpoint = point[:-1] + (base,)
        bmembers = find(pts, bpoint)
        if same_value(point[-1], base):
            ok_test &= row["baseline"] and row["p"] is None and row["delta"] is None
        else:
            b = [r["loss"] for r in bmembers]
            t, df, pv = welch(losses, b)
            ok_test &= close(row["delta"], np.mean(losses) - np.mean(b)) and close(row["t"], t) \
                and close(row["df"], df) and close(row["p"], pv, 1e-7)
            if not ok_test and len(why) < 6:
                why.append(f"{point}: t {row['t']} df {row['df']} p {row['p']} vs {t} {df} {pv}")
            tests.append((("row", point), pv, {point, bpoint}))
    check(f"{name}: compare --json: seeds, mean and sample std of every row", ok_mean,
          "; ".join(why))
    check(f"{name}: compare --json: Δ, Welch t, df and p against {by} {base}", ok_test,
          "; ".join(why))
    # the extra test: per group, the narrowest head count against the best, unless that is a row
    if heads:
        for group in {k[:-1] for k in pts}:
            # "the best" is chosen on the validation split when the table reports the test split
            mine = {k: np.mean([r["val"] for r in v]) for k, v in pts.items() if k[:-1] == group}
            best = min(mine, key=mine.get)
            narrow = max(mine, key=lambda k: k[-1])
            if best == narrow or any(pair == {best, narrow} for _, _, pair in tests):
                continue
            t, df, pv = welch([r["loss"] for r in pts[narrow]], [r["loss"] for r in pts[best]])
            tests.append((("extra", group), pv, {best, narrow}))
    adjusted = holm_by_hand([pv for _, pv, _ in tests])
    extra_got = {tuple(e["group"][k] for k in groups): e for e in got["extra_tests"]
                 if not e["same_as_row"]}
    ok_holm = got["holm_family"] == len(tests)
    for (what, point), q in zip([w for w, _, _ in tests], adjusted):
        if what == "row":
            ok_holm &= close(find(rows, point)["holm_p"], q, 1e-7)
        else:
            e = find(extra_got, point)
            ok_holm &= e is not None and close(e["holm_p"], q, 1e-7)
    ok_holm &= len(extra_got) == sum(1 for (w, _), _, _ in tests if w == "extra")
    check(f"{name}: Holm p over exactly the {len(tests)} distinct tests (each counted once)",
          ok_holm, f"family {got['holm_family']}; {[r['holm_p'] for r in got['rows']]} vs "
          f"{adjusted}")
    if all(r["prune"] for r in runs):
        ok, why = True, []
        for point, members in pts.items():
            hn = [run_needed(r) for r in members]
            row = find(rows, point)
            ok &= close(row["heads_needed"]["mean"], np.mean(hn)) \
                and close(row["heads_needed"]["std"], np.std(hn, ddof=1)) \
                and row["heads_needed"]["all_heads"] == members[0]["n_head"] * members[0]["n_layer"]
            why.append(f"{point}: {row['heads_needed']['values']} vs {hn}")
        check(f"{name}: heads needed within max(5%, 0.01 nats) of every row from /prune", ok,
              "; ".join(why))
    if all(r["patching"] is not None for r in runs):
        ok, why = True, []
        for point, members in pts.items():
            hc = [carrying_by_hand(r["patching"]) for r in members]
            row = find(rows, point)
            ok &= close(row["heads_carrying"]["mean"], np.mean(hc)) and row["heads_carrying"]["values"] == hc \
                and (len(hc) < 2 or close(row["heads_carrying"]["std"], np.std(hc, ddof=1)))
            why.append(f"{point}: {row['heads_carrying']['values']} vs {hc}")
        check(f"{name}: heads carrying 80% of the patching effect, every row from /patching/head_out", ok,
              "; ".join(why))
    # the Markdown: the same p values, printed with two significant digits, and the family size
    md = script("compare", *args[:1] + args[2:])
    lines = [[c.strip() for c in l.strip().strip("|").split("|")]
             for l in md.stdout.splitlines() if l.startswith("|")]
    header, body = lines[0], lines[2:]
    # each key once: the key compared along is not repeated (d_head, or a layout naming both)
    shown = [c for c in header if c in ("n_head", "d_head", "layout", by.split(".")[-1])]
    check(f"{name}: compare's table shows each key once ({', '.join(shown)})",
          len(shown) == len(set(shown)) and len(header) == len(set(header))
          and (by != "layout" or shown == ["layout"]), str(header))
    printed = [row[header.index("p")] for row in body if row[header.index("p")]]
    want = [p_text(r["p"]) for r in got["rows"] if r["p"] is not None]
    noun = "test" if len(tests) == 1 else "tests"
    check(f"{name}: compare's table prints those p values (two significant digits) and says "
          f"'over the {len(tests)} distinct {noun}'", printed == want
          and f"over the {len(tests)} distinct {noun}" in md.stdout, f"{printed} vs {want}\n"
          + md.stdout[-600:])
    return got


def first_point_layout(directory):
    """n_head×d_head of the experiment's first point (the default baseline of a layout axis),
    from the frozen experiment.yaml and its base config (d_head 0: d_model / n_head)."""
    import yaml
    with open(os.path.join(directory, "experiment.yaml")) as f:
        exp = yaml.safe_load(f)
    with open(exp["base"]) as f:
        model = yaml.safe_load(f)["model"]
    point = {k.split(".")[-1]: v for k, v in exp["points"][0].items()}
    n_head = point.get("n_head", model["n_head"])
    d_head = point.get("d_head", model.get("d_head", 0)) or model["d_model"] // n_head
    return f"{n_head}×{d_head}"


def runs_grid_first(directory, key):
    """The first value of key in the experiment's grid (the default baseline of a key other than
    n_head), read from the frozen experiment.yaml."""
    import yaml
    with open(os.path.join(directory, "experiment.yaml")) as f:
        exp = yaml.safe_load(f)
    grid = exp.get("grid", {})
    return grid.get(key, grid.get(key.split(".")[-1]))[0]


def check_csvs(name, directory, by, groups, runs):
    """Every figure's CSV against the recomputation (runs never pooled across layouts)."""
    plots = os.path.join(directory, "plots")
    p = script("plot-sweep", directory, "-o", plots)
    check(f"{name}: plot-sweep exit 0", p.returncode == 0, p.stderr[-400:])
    keys = groups + [by]
    pts = points_of(runs, keys)

    def rows_of(stem):
        path = os.path.join(plots, stem + ".csv")
        return read_csv(path) if os.path.exists(path) else None

    rows = rows_of("final_eval_loss")
    ok = rows is not None and len(rows) == len(pts)
    for row in rows or []:
        members = find(pts, csv_point(row, keys)) or []
        losses = [r["final_eval"] for r in members]
        ok &= bool(members) and int(row["n"]) == len(losses) \
            and close(row["final_eval_loss_mean"], np.mean(losses)) \
            and close(row["final_eval_loss_std"], np.std(losses, ddof=1)) \
            and sorted(map(float, row["final_eval_loss_each_seed"].split())) == sorted(losses)
    check(f"{name}: final_eval_loss.csv: mean, std and every seed of each layout", ok,
          str((rows or [])[:2]))

    rows = rows_of("eval_curves")
    ok = rows is not None
    seen = set()
    for row in rows or []:
        point = csv_point(row, keys)
        members = find(pts, point) or []
        step = int(float(row["step"]))
        at = [r["eval"][1][r["eval"][0].index(step)] for r in members]
        seen.add((point, step))
        ok &= bool(members) and int(row["n"]) == len(members) \
            and close(row["eval_loss_mean"], np.mean(at)) \
            and close(row["eval_loss_std"], np.std(at, ddof=1))
    n_steps = len(runs[0]["eval"][0])
    check(f"{name}: eval_curves.csv: mean and std over seeds at every eval step of each layout",
          ok and len(seen) == len(pts) * n_steps, f"{len(seen)} rows for {len(pts)} x {n_steps}")

    rows = rows_of("head_classes")
    ok, why = rows is not None and len(rows) == len(pts), []
    for row in rows or []:
        members = find(pts, csv_point(row, keys)) or []
        total = members[0]["n_head"] * members[0]["n_layer"] if members else -1
        counts = {c: np.mean([r["classes"].count(c) for r in members]) for c in CLASS_NAMES}
        got = {c: float(row[f"count_{c}"]) for c in CLASS_NAMES}
        ok &= bool(members) and all(close(got[c], counts[c]) for c in CLASS_NAMES) \
            and close(sum(got.values()), total) and close(row["all_heads"], total) \
            and all(close(row[f"fraction_{c}"], counts[c] / total) for c in CLASS_NAMES) \
            and not any(k.startswith("count_needed") for k in row)
        why.append(f"{csv_point(row, keys)}: {got} vs {counts} of {total}")
    check(f"{name}: head_classes.csv: class counts (mean over seeds) sum to n_head × n_layer",
          ok, "; ".join(why[:3]))

    rows = rows_of("pruning_curves")
    ok = rows is not None
    n_rows = 0
    for row in rows or []:
        members = find(pts, csv_point(row, keys)) or []
        c = row["criterion"]
        k = list(members[0]["prune"][c][0]).index(int(row["heads_left"])) if members else 0
        at = [r["prune"][c][1][k] for r in members]
        left = members[0]["prune"][c][0] if members else [1]
        ok &= bool(members) and close(row["eval_loss_mean"], np.mean(at)) \
            and close(row["eval_loss_std"], np.std(at, ddof=1)) and int(row["n"]) == len(at) \
            and close(row["fraction_pruned"], 1 - int(row["heads_left"]) / left[0])
        n_rows += 1
    want = sum(len(v[0]["prune"][c][0]) for v in pts.values() for c in v[0]["prune"])
    check(f"{name}: pruning_curves.csv: mean and std of every point of each layout's curves",
          ok and n_rows == want, f"{n_rows} rows, want {want}")

    rows = rows_of("heads_needed")
    ok = rows is not None and len(rows) == len(pts)
    for row in rows or []:
        members = find(pts, csv_point(row, keys)) or []
        hn = [run_needed(r) for r in members]
        ok &= bool(members) and close(row["heads_needed_mean"], np.mean(hn)) \
            and close(row["heads_needed_std"], np.std(hn, ddof=1)) and int(row["n"]) == len(hn) \
            and int(row["all_heads"]) == members[0]["n_head"] * members[0]["n_layer"]
    check(f"{name}: heads_needed.csv: heads needed within max(5%, 0.01 nats) of each layout",
          ok, str((rows or [])[:2]))


def test_sweep(name, browser):
    body, by, groups = SWEEPS[name]
    exp = write(os.path.join(TMP, f"{name}.yaml"), f"base: {TINY}\n" + body)
    p = script("sweep", exp, "-j", "2", "--threads", "1", "--results", RESULTS)
    directory = os.path.join(RESULTS, name)
    if not check(f"{name}: the sweep runs", p.returncode == 0, p.stderr[-600:]):
        return
    runs = read_runs(directory, groups + [by])
    check_compare(name, directory, by, groups, runs)
    check_csvs(name, directory, by, groups, runs)
    if name == "gate":  # the other key: along the gate (text values), per K/V layout
        check_compare(f"{name} --by output_gate", directory, "model.output_gate",
                      ["model.n_kv_head"], runs, by_arg="output_gate")
    if name == "layouts":
        check_layouts(directory, runs)
    if name == "heads":  # the same sweep with its best head count as the baseline
        pts = points_of(runs, [by])
        best = min(pts, key=lambda k: np.mean([r["loss"] for r in pts[k]]))
        check_compare(f"{name} --baseline {best[0]} (the best)", directory, by, groups, runs,
                      str(best[0]))
    if browser is not None:
        check_report(name, directory, browser, groups + [by], runs)


def check_layouts(directory, runs):
    """A points sweep: its summary's layout column, compare --baseline 4x4 (4×8 against 4×4,
    written with an x), plot-sweep's figures with every layout on one x axis."""
    rows = read_csv(os.path.join(directory, "summary.csv"))
    by_name = {r["name"]: r["layout"] for r in runs}
    check("layouts: summary.csv has one layout column, each run's n_head×d_head",
          sorted(r["run"] for r in rows) == sorted(by_name)
          and all(r["layout"] == by_name[r["run"]] for r in rows)
          and list(rows[0]).count("layout") == 1, str(rows[:2]))
    check_compare("layouts --baseline 4x4", directory, "layout", [], runs, baseline="4×4")
    p = script("compare", directory, "--baseline", "4x4", "--json")
    check("layouts: --baseline 4x4 is the layout 4×4", p.returncode == 0
          and json.loads(p.stdout)["baseline"] == "4×4", p.stderr)
    svg_dir = os.path.join(directory, "plots_svg")
    p = script("plot-sweep", directory, "-o", svg_dir, "--format", "svg")
    want = ["1×16", "2×8", "4×4", "4×8"]
    for stem in ("final_eval_loss", "heads_needed"):
        with open(os.path.join(svg_dir, stem + ".svg"), encoding="utf-8") as f:
            texts = re.findall(r"<text>([^<]*)</text>", f.read())
        tics = [t for t in texts if t in want]
        check(f"layouts: {stem}: every layout a tic of one x axis, in the file's order "
              "(E under each)", tics == want and texts.count("E 32") == 1
              and texts.count("E 16") == 3, str(texts[:40]))


def test_docs_layouts():
    """docs/layouts.csv (the numbers of docs/layouts.png, experiments/layouts.yaml's sweep):
    every mean, std, Δ, Welch t, df, p and Holm p recomputed from its seeds with scipy and
    Holm's step-down written out; docs/experiments.md's table prints the same."""
    with open(os.path.join(ROOT, "docs", "layouts.csv"), encoding="utf-8") as f:
        rows = read_csv_lines([l for l in f if not l.startswith("#")])
    seeds = {r["layout"]: [float(r[k]) for k in r if re.fullmatch(r"seed\d+", k) and r[k]] for r in rows}
    base = seeds[rows[0]["layout"]]
    ok, why, pvals = rows[0]["p"] == "", [], []
    for r in rows[1:]:
        t, df, pv = welch(seeds[r["layout"]], base)
        pvals.append(pv)
        good = close(r["mean"], np.mean(seeds[r["layout"]])) and close(r["sample_std"], np.std(
            seeds[r["layout"]], ddof=1)) and close(r["delta_vs_1x64"], np.mean(seeds[r["layout"]])
                                                   - np.mean(base)) \
            and close(r["welch_t"], t) and close(r["welch_df"], df) and close(r["p"], pv, 1e-7)
        ok &= good
        why += [] if good else [f"{r['layout']}: {r['welch_t']} {r['welch_df']} {r['p']} vs {t} {df} {pv}"]
    holm = holm_by_hand(pvals)
    ok &= all(close(r["holm_p"], q, 1e-7) for r, q in zip(rows[1:], holm))
    check("docs/layouts.csv: Welch (scipy) against 1×64 and Holm over the 4 tests, from its seeds",
          ok and [r["layout"] for r in rows] == ["1×64", "2×32", "4×16", "8×8", "4×32"],
          "; ".join(why) + f" holm {holm}")
    with open(os.path.join(ROOT, "docs", "experiments.md"), encoding="utf-8") as f:
        md = f.read()
    printed = {m[0]: (m[1], m[2]) for m in re.findall(
        r"^\| (\d+×\d+) \|.*\| ([0-9.e-]+) \| ([0-9.e-]+) \|$", md, re.M)}
    want = {r["layout"]: (p_text(pv), p_text(q)) for r, pv, q in zip(rows[1:], pvals, holm)}
    check("docs/experiments.md's layouts table: those p and Holm p", printed == want,
          f"{printed} vs {want}")


def read_csv_lines(lines):
    import csv
    return list(csv.DictReader(lines))


def test_known_summary():
    """A summary with known numbers whose best head count (1) is the baseline: narrowest against
    best is the 16-head row's test, counted once; one run below the tolerance's floor warns."""
    from heads.sweep import summary  # only to write the summary.h5 under test
    outdir = os.path.join(RESULTS, "known")
    losses = {1: [0.0040, 0.0050, 0.0045], 4: [0.0061, 0.0066, 0.0058],
              16: [0.0090, 0.0081, 0.0087]}
    rows, experiment = known_summary(outdir, losses, heads_needed=1, prunable_fraction=0.5,
                                     heads_needed_importance=1, heads_needed_delta_loss=1,
                                     tolerance=REL, tolerance_floor=FLOOR)
    summary.write_summary(outdir, rows, experiment)
    p = script("compare", outdir, "--json")
    got = json.loads(p.stdout) if p.returncode == 0 else {}
    pv = {h: welch(losses[h], losses[1])[2] for h in (4, 16)}
    q = holm_by_hand([pv[4], pv[16]])
    rows_got = {r["keys"]["model.n_head"]: r for r in got.get("rows", [])}
    check("best is the baseline: narrowest vs best is the 16-head row, Holm over 2 tests",
          got.get("holm_family") == 2 and close(rows_got[4]["holm_p"], q[0], 1e-7)
          and close(rows_got[16]["holm_p"], q[1], 1e-7)
          and [e["same_as_row"] for e in got["extra_tests"]] == [True]
          and close(got["extra_tests"][0]["holm_p"], q[1], 1e-7), json.dumps(got)[:800])
    md = script("compare", outdir)
    check("compare warns that the runs end below the 0.01-nat floor, and states the tolerance",
          "below the 0.01-nat floor" in md.stdout and "max(5% of the loss, 0.01 nats)" in md.stdout
          and "over the 2 distinct tests" in md.stdout and got.get("warnings"), md.stdout[-700:])


def test_tolerance_c_and_python():
    """prune.h and pruning.py name the same numbers; the harness prints what /prune recomputes."""
    with open(os.path.join(ROOT, "src", "analysis", "prune.h")) as f:
        h = f.read()
    with open(os.path.join(ROOT, "python", "heads", "read", "pruning.py")) as f:
        py = f.read()
    c_rel = re.search(r"#define PRUNE_TOLERANCE_RELATIVE ([0-9.]+)", h)
    c_floor = re.search(r"#define PRUNE_TOLERANCE_FLOOR ([0-9.]+)", h)
    p_rel = re.search(r"^DEFAULT_TOLERANCE = ([0-9.]+)", py, re.M)
    p_floor = re.search(r"^DEFAULT_FLOOR = ([0-9.]+)", py, re.M)
    check("src/analysis/prune.h and python/heads/read/pruning.py: the same tolerance, 0.05 and 0.01 nats",
          all((c_rel, c_floor, p_rel, p_floor)) and float(c_rel[1]) == float(p_rel[1]) == REL
          and float(c_floor[1]) == float(p_floor[1]) == FLOOR, f"{c_rel} {c_floor} {p_rel} {p_floor}")
    out = os.path.join(TMP, "one.h5")
    p = subprocess.run([HARNESS, TINY, "--set", f"output.path={out}", "--force"],
                       capture_output=True, text=True, timeout=120)
    m = re.search(r"heads needed for an eval loss within max\(5% of ([0-9.]+), 0\.01 nats\) of "
                  r"it: (\d+) of (\d+) \(importance\), (\d+) of (\d+) \(delta_loss\)", p.stdout)
    with h5py.File(out, "r") as f:
        want = [needed_by_hand(f[f"prune/{c}/heads_left"][()], f[f"prune/{c}/eval_loss"][()])
                for c in ("importance", "delta_loss")]
    from heads.read import pruning
    with h5py.File(out, "r") as f:
        py_needed = [pruning.heads_needed(f[f"prune/{c}/heads_left"][()],
                                          f[f"prune/{c}/eval_loss"][()])
                     for c in ("importance", "delta_loss")]
    check("the harness's printed heads needed = the recomputation = heads.read.pruning's",
          m is not None and [int(m[2]), int(m[4])] == want == py_needed,
          f"{m and m.group(0)} vs {want} / {py_needed}")
    # the same curves as tests/test_prune.c's near-zero case: 24 heads with 5% alone, 1 with it
    left, loss = np.array([24, 21, 18, 1, 0]), np.array([0.0012, 0.0013, 0.0061, 0.0105, 3.74])
    check("near zero loss (test_prune.c's curve): 1 head needed with the floor, as the C side",
          pruning.heads_needed(left, loss) == needed_by_hand(left, loss) == 1
          and pruning.heads_needed(left, loss, 0.05, 0.0) == 24)


def test_bad_by():
    kv = os.path.join(RESULTS, "kv")
    for args, pattern in (((kv, "--by", "lr"), r"--by lr: not a swept key of .*swept: model\.n_kv_head"),
                          ((kv, "--baseline", "3"), r"--baseline 3: no complete runs with n_kv_head 3"),
                          ((os.path.join(RESULTS, "lr"), "--by", "n_layer"), r"--by n_layer: not a swept key")):
        p = script("compare", *args)
        lines = p.stderr.strip().splitlines()
        check(f"compare {' '.join(args[1:])}: one line, exit 2", p.returncode == 2
              and len(lines) == 1 and re.search(pattern, lines[0]), p.stderr[-300:])
    p = script("compare", os.path.join(RESULTS, "lr"), "--by", "lr", "--json")
    got = json.loads(p.stdout) if p.returncode == 0 else {}
    check("compare --by lr on n_head × train.lr: groups by n_head, baseline lr 0.01",
          got.get("by") == "train.lr" and got.get("groups") == ["model.n_head"]
          and same_value(got.get("baseline"), 0.01) and len(got.get("rows", [])) == 4, p.stderr)


# ------------------------------------------------------------------------------------------------
# the sweep report in a browser


def check_report(name, directory, d, keys, runs):
    p = script("report", directory)
    page = os.path.join(directory, "report.html")
    if not check(f"{name}: report SWEEP_DIR writes the page", p.returncode == 0, p.stderr[-300:]):
        return
    d.get("file://" + page)
    for _ in range(100):
        if d.execute_script("return document.body && document.body.dataset.ready === '1'"):
            break
        time.sleep(0.05)
    errors = [e["message"] for e in d.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
    check(f"{name}: the sweep page opens without console errors", not errors, str(errors))
    shown = d.execute_script("return [...document.querySelectorAll('#compare-table tr')]"
                             ".map(tr => [...tr.children].map(td => td.textContent))")
    md = script("compare", directory)
    want = [[c.strip() for c in l.strip().strip("|").split("|")]
            for l in md.stdout.splitlines() if l.startswith("|") and not l.startswith("|-")]
    check(f"{name}: the page's comparison table is compare's", shown == want,
          f"{shown[:2]} vs {want[:2]}")
    table = d.execute_script("return [...document.querySelectorAll('#class-table tr')]"
                             ".map(tr => [...tr.children].map(td => td.textContent))")
    head, body = table[0], table[1:]
    pts = points_of(runs, keys)
    ok = len(body) == len(pts) and not [h for h in head if h.startswith("needed")]
    for row, point in zip(body, sorted(pts)):  # the page's order: group values, then the by key
        members = pts[point]
        counts = [np.mean([r["classes"].count(c) for r in members]) for c in CLASS_NAMES]
        got = [float(row[head.index(c)]) for c in CLASS_NAMES]
        ok &= all(abs(g - w) <= 0.006 for g, w in zip(got, counts)) \
            and abs(sum(got) - members[0]["n_head"] * members[0]["n_layer"]) <= 0.02
    check(f"{name}: the page's head-class table: the recomputed counts of every layout", ok,
          f"{table[:3]}")


def main():
    t0 = time.time()
    if harness_missing(HARNESS):
        return 1
    os.environ["HARNESS"] = HARNESS
    d, why = browser()
    if d is None:
        print(f"skipped: the report checks ({why})")
    try:
        for name in SWEEPS:
            run_check(f"sweep {name}", lambda: test_sweep(name, d))
        run_check("known summary", test_known_summary)
        run_check("docs/layouts.csv", test_docs_layouts)
        run_check("tolerance", test_tolerance_c_and_python)
        run_check("bad --by", test_bad_by)
    finally:
        if d is not None:
            d.quit()
    return end_suite(TMP, KEEP, t0)


if __name__ == "__main__":
    sys.exit(main())
