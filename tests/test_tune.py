#!/usr/bin/python3
# suite: tune: in experiments (each arm at its best validation value, reported on the test split) and compare --equivalence recomputed
"""Every number compare prints for a tuned experiment, recomputed here with NumPy and scipy (none
of the package's functions): the selection (per arm the tuned value with the lowest mean
validation loss over seeds), the arms' test metric, Welch's t, df and p, Holm over the table's
tests, Welch's 95% interval of every Δ, and the seeds per arm for 80% power (the noncentral t
written out as an integral over the chi-square variable, not scipy.stats.nct); that the
selection never reads the test split (new test figures move only the reported metric; a summary
whose test columns cannot be read still selects); experiment files whose tune: is wrong (a key
also in grid:, set: or points:, an empty list, the seed) fail with file:line:col and exit 2; and a
real tiny tuned sweep: run names carry the tuned values, --list, --status and a second sweep
(nothing reruns) work as for any sweep, the summary records the tuned keys, compare's choice is
the recomputed one from the run files (/heldout when they have it, else the last evaluation),
plot-sweep writes tuning.png with tuning.csv holding the numbers.

usage: /usr/bin/python3 tests/test_tune.py [--keep]
Needs a built harness (`make`, or $HARNESS) and gnuplot. Tiny runs (d_model 16, 20 steps).
"""
import json
import math
import os
import re
import sys
import tempfile
import time

import h5py
import numpy as np
from scipy import integrate, stats as sps

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.join(ROOT, "python"))  # heads: only to write summaries under test
from checks import (check, end_suite, harness_missing, holm_by_hand, read_csv,  # noqa: E402
                    run_check, script, write)

HARNESS = os.environ.get("HARNESS", os.path.join(ROOT, "build", "harness"))
KEEP = "--keep" in sys.argv
TMP = tempfile.mkdtemp(prefix="test_tune.")
RESULTS = os.path.join(TMP, "results")
LRS = [0.001, 0.003, 0.01]
HEADS = [1, 4, 16]


def close(a, b, rtol=1e-9, atol=1e-12):
    return a is not None and b is not None and abs(a - b) <= atol + rtol * abs(b)


# ------------------------------------------------------------------------------------------------
# the independent recomputation


def welch(a, b):
    """(Δ, t, df, p, (lo, hi)) of mean(a) - mean(b): scipy's Welch test, df and the interval by
    the Welch-Satterthwaite formula written out."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    r = sps.ttest_ind(a, b, equal_var=False)
    delta = a.mean() - b.mean()
    half = sps.t.ppf(0.975, df) * math.sqrt(va + vb)
    return delta, float(r.statistic), df, float(r.pvalue), (delta - half, delta + half)


def power(n, d):
    """Power of a two-sided two-sample t test (n per arm, α 0.05) at standardized effect d:
    T = (Z + d·sqrt(n/2)) / sqrt(V/df), integrated over V ~ chi2(df)."""
    df, nc = 2 * n - 2, d * math.sqrt(n / 2)
    c = sps.t.ppf(0.975, df)
    f = lambda v: (sps.norm.sf(c * math.sqrt(v / df) - nc) + sps.norm.cdf(-c * math.sqrt(v / df) - nc)) \
        * sps.chi2.pdf(v, df)
    return integrate.quad(f, sps.chi2.ppf(1e-12, df), sps.chi2.ppf(1 - 1e-12, df))[0]


def seeds_for(delta, sa, sb, cap=100000):
    """The fewest seeds per arm (n >= 2) with power >= 0.8, by bisection (power rises with n);
    cap + 1 beyond cap."""
    d = abs(delta) / math.sqrt((sa * sa + sb * sb) / 2)
    if power(cap, d) < 0.8:
        return cap + 1
    lo, hi = 1, cap
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if power(mid, d) >= 0.8 else (mid, hi)
    return hi


def choose(val):
    """{arm: chosen lr} from {(arm, lr): [val losses]}: the lowest mean."""
    out = {}
    for (arm, lr), v in val.items():
        if arm not in out or np.mean(v) < np.mean(val[(arm, out[arm])]):
            out[arm] = lr
    return out


# ------------------------------------------------------------------------------------------------
# a tuned summary with known numbers


def known_tuned(name, val, test, tokens=(13824, 13760)):
    """summary.h5 of a tuned n_head x train.lr sweep with the given {(n_head, lr): [per seed]}
    validation and test losses (through heads.sweep.summary, the writer)."""
    from heads.sweep import summary

    class Experiment:
        text, path, base, width, description = "", "-", "-", "fixed_width", ""
        tuned = ["train.lr"]

        def swept_keys(self):
            return ["model.n_head", "train.lr", "train.seed"]
    e = Experiment()
    e.name = name
    rows = []
    for (h, lr), values in val.items():
        for seed, v in enumerate(values):
            rows.append({"run": f"h{h}_dh{64 // h}_lr{lr}_s{seed}", "status": "complete",
                         "model.n_head": h, "train.lr": lr, "train.seed": seed, "seed": seed,
                         "n_head": h, "d_head": 64 // h, "d_model": 64, "n_layer": 2, "E": 64,
                         "params": 70528, "flops_per_token": 131072, "final_step": 100,
                         "final_train_loss": v, "final_eval_loss": v, "min_eval_loss": v - 0.01,
                         "val_loss": v, "val_tokens": tokens[0], "test_loss": test[(h, lr)][seed],
                         "test_tokens": tokens[1], "train_seconds": 1.0, "heads_mixed": 2 * h})
    outdir = os.path.join(RESULTS, name)
    os.makedirs(outdir, exist_ok=True)
    summary.write_summary(outdir, rows, e)
    return outdir


def numbers(seed):
    rng = np.random.RandomState(seed)
    best = {1: 0.001, 4: 0.003, 16: 0.01}  # 16 heads: the edge of the tried range
    val, test = {}, {}
    for h in HEADS:
        for lr in LRS:
            base = 2.3 - 0.05 * math.log2(h) / 2 + (0 if lr == best[h] else 0.06)
            val[(h, lr)] = list(base + rng.normal(0, 0.02, 4))
            test[(h, lr)] = list(base + 0.01 + rng.normal(0, 0.03, 4))
    return val, test


def check_known(outdir, val, test, what):
    """compare --json and its Markdown against the recomputation; returns the JSON."""
    p = script("compare", outdir, "--json")
    got = json.loads(p.stdout) if p.returncode == 0 else {}
    if not check(f"{what}: compare --json runs", bool(got), p.stderr[-500:]):
        return {}
    chosen = choose(val)
    tn = got.get("tuning") or {}
    arms = {a["keys"]["model.n_head"]: a for a in tn.get("arms", [])}
    check(f"{what}: the chosen lr per arm is the lowest mean val_loss",
          {h: arms[h]["chosen"]["train.lr"] for h in arms} == chosen, str(arms)[:400])
    ok = True
    for h, a in arms.items():
        for t in a["tried"]:
            v = val[(h, t["value"]["train.lr"])]
            ok &= close(t["mean"], np.mean(v)) and close(t["std"], np.std(v, ddof=1)) \
                and t["n"] == len(v) and t["tokens"] == [13824]
    check(f"{what}: the validation mean, std and n at every tried value", ok)
    check(f"{what}: chosen on validation, reported on test",
          tn.get("selection_split") == "validation" and tn.get("selection_metric") == "val_loss"
          and tn.get("report_split") == "test" and got.get("metric") == "test_loss")
    edge = [h for h in HEADS if chosen[h] in (min(LRS), max(LRS))]
    check(f"{what}: the edge of the tried range warned for {edge} only",
          sorted(h for h in arms if arms[h]["edge"]) == edge
          and sum("edge of the tried range" in w for w in got["warnings"]) == len(edge))
    rows = {r["keys"]["model.n_head"]: r for r in got["rows"]}
    arm = {h: test[(h, chosen[h])] for h in HEADS}
    ok, ps = True, []
    for h in HEADS:
        r = rows[h]
        ok &= close(r["mean"], np.mean(arm[h])) and close(r["std"], np.std(arm[h], ddof=1)) \
            and r["chosen"] == {"train.lr": chosen[h]} and r["tokens"] == [13760]
        if h == 1:
            continue
        delta, t, df, pv, (lo, hi) = welch(arm[h], arm[1])
        ps.append(pv)
        ok &= close(r["delta"], delta) and close(r["t"], t, 1e-7) and close(r["df"], df) \
            and close(r["p"], pv, 1e-6) and close(r["ci95"][0], lo, 1e-7) \
            and close(r["ci95"][1], hi, 1e-7) \
            and r["seeds_needed"] == seeds_for(delta, np.std(arm[h], ddof=1),
                                               np.std(arm[1], ddof=1))
    check(f"{what}: per arm the test mean and std, Δ, Welch t, df, p, 95% CI, seeds for 80% "
          "power", ok, json.dumps(got["rows"])[:600])
    means = {h: np.mean(val[(h, chosen[h])]) for h in HEADS}  # "the best": on validation
    best = min(HEADS, key=means.get)
    if best != 1 and best != 16:  # narrowest against best: a test of its own
        ps.append(welch(arm[16], arm[best])[3])
    q = holm_by_hand(ps)
    check(f"{what}: Holm over the {len(ps)} distinct tests",
          got["holm_family"] == len(ps) and close(rows[4]["holm_p"], q[0], 1e-7)
          and close(rows[16]["holm_p"], q[1], 1e-7), f"{got['holm_family']} {q}")
    md = script("compare", outdir).stdout
    lines = [[c.strip() for c in l.strip().strip("|").split("|")] for l in md.splitlines()
             if l.startswith("|")]
    tune_header, main_at = lines[0], next(i for i, l in enumerate(lines) if "seeds" in l)
    header, body = lines[main_at], lines[main_at + 2:]
    shown = {int(r[0]): r for r in body}
    p_text = lambda x: f"{x:.1e}" if x < 1e-3 else f"{float(f'{x:.2g}'):.{max(0, 1 - math.floor(math.log10(float(f'{x:.2g}'))))}f}"
    ok = all(shown[h][header.index("chosen lr")] == f"{chosen[h]:g}" for h in HEADS)
    for h in (4, 16):
        delta, _, _, pv, (lo, hi) = welch(arm[h], arm[1])
        ok &= shown[h][header.index("p")] == p_text(pv) \
            and shown[h][header.index("95% CI of Δ")] == f"[{lo:+.4f}, {hi:+.4f}]" \
            and shown[h][header.index("seeds for 80% power")] == str(
                seeds_for(delta, np.std(arm[h], ddof=1), np.std(arm[1], ddof=1))) \
            and shown[h][header.index("tokens/run")] == "13,760"
    check(f"{what}: the Markdown prints the chosen lr, p, the interval, the seeds and the tokens",
          ok and "chosen lr" in tune_header and "tuned over lr" in md
          and "chosen on the validation split" in md and "reported on the test split" in md
          and "noncentral t" in md and "Welch–Satterthwaite" in md, md[-1500:])
    return got


def test_known():
    val, test = numbers(3)
    a = check_known(known_tuned("tunedk", val, test), val, test, "known tuned summary")
    # new test figures (as from another test stream), each arm's other values flattered: only
    # the reported metric moves
    rng = np.random.RandomState(9)
    test2 = {k: list(np.asarray(v) - 0.5 * (k[1] != choose(val)[k[0]]) + rng.normal(0, 0.05, 4))
             for k, v in test.items()}
    b = check_known(known_tuned("tunedk2", val, test2), val, test2, "new test figures")
    check("selection never reads the test split: new test figures leave every choice, move only "
          "the reported metric", a and b and a["tuning"]["arms"] == b["tuning"]["arms"]
          and [r["mean"] for r in a["rows"]] != [r["mean"] for r in b["rows"]])

    from heads.sweep import sweepread
    from heads.answers import tuning
    s = sweepread.Summary(os.path.join(RESULTS, "tunedk"))

    class NoTest(dict):
        def __getitem__(self, k):
            if k.startswith("test"):
                raise AssertionError(f"selection read {k}")
            return dict.__getitem__(self, k)
    s.data = NoTest(s.data)
    try:
        sel = tuning.select(s)
        ok = {arm[0]: a["chosen"][0] for arm, a in sel.arms.items()} == choose(val)
    except AssertionError as e:
        ok = False
        print(f"# {e}")
    check("selection never reads the test split: select() on a summary whose test columns "
          "cannot be read", ok)

    md = script("compare", os.path.join(RESULTS, "tunedk"), "--metric", "min_eval_loss").stdout
    check("--metric min_eval_loss says it is a selection on the validation split, not held out",
          "a selection, not a held-out figure" in md and "the validation split" in md
          and "optimistic" in md, md[-900:])


def test_bad_files():
    base = os.path.join(ROOT, "configs", "sweep_text.yaml")
    cases = {
        "in grid": ("grid: {train.lr: [0.01]}\ntune: {train.lr: [0.001, 0.01]}\n",
                    r":2:8: train\.lr is both in tune: and swept in grid:"),
        "empty": ("tune: {train.lr: []}\n", r":1:18: train\.lr: expected a non-empty list"),
        "in set": ("set: {train.lr: 0.01}\ntune: {train.lr: [0.001, 0.01]}\n",
                   r":1:7: train\.lr is both set here and swept in tune:"),
        "in points": ("points: [{lr: 0.01}]\ntune: {train.lr: [0.001, 0.01]}\n",
                      r":1:11: train\.lr is both in points: and swept in tune:"),
        "seed": ("tune: {seed: [0, 1]}\n", r":1:8: train\.seed in tune:"),
    }
    for name, (body, want) in cases.items():
        path = write(os.path.join(TMP, f"bad_{name.replace(' ', '_')}.yaml"),
                     f"base: {base}\n" + body)
        p = script("sweep", path, "--list")
        line = (p.stderr.strip().splitlines() or [""])[-1]
        shifted = re.sub(r":(\d+):", lambda m: f":{int(m.group(1)) - 1}:", line, count=1)
        check(f"tune: {name}: file:line:col, exit 2", p.returncode == 2
              and line.startswith(path + ":") and re.search(want, shifted), line or p.stdout[-300:])


def test_real_sweep():
    tiny = write(os.path.join(TMP, "tiny.yaml"), """\
model: {vocab_size: 256, d_model: 16, n_head: 4, n_layer: 1, seq_len: 16}
train: {steps: 20, batch_size: 4, lr: 3.0e-2, warmup_steps: 2, seed: 0, threads: 1}
data: {task: text, path: /usr/share/common-licenses/GPL-3}
output: {log_every: 10, eval_every: 10, eval_batches: 2, attn_every: 20, probes: 1,
         probe_text: ["The cat sat on the mat"]}
""")
    exp = write(os.path.join(TMP, "tuned.yaml"), f"base: {tiny}\ngrid: {{n_head: [1, 4]}}\n"
                "tune: {lr: [1.0e-3, 3.0e-2]}\nwidth: fixed_width\nseeds: 2\n")
    p = script("sweep", exp, "--list", "--results", RESULTS)
    names = re.findall(r"h\d+_dh\d+_lr[0-9.e-]+_s\d", p.stdout)
    check("tuned sweep --list: 8 runs named with their lr", p.returncode == 0
          and len(set(names)) == 8, p.stdout[-600:])
    p = script("sweep", exp, "-j", "2", "--threads", "1", "--results", RESULTS)
    directory = os.path.join(RESULTS, "tuned")
    if not check("the tuned sweep runs", p.returncode == 0, p.stderr[-600:]):
        return
    again = script("sweep", exp, "-j", "2", "--threads", "1", "--results", RESULTS)
    check("the sweep says what it tunes; a second sweep reruns nothing",
          "2 lr (tuned)" in p.stdout and again.returncode == 0
          and "0 ran, 0 failed, 8 skipped (complete)" in again.stdout,
          (p.stdout + again.stdout + again.stderr)[-600:])
    st = script("sweep", "--status", directory)
    check("--status: the 8 tuned runs complete", st.returncode == 0
          and "8 runs in" in st.stdout and "8 complete" in st.stdout, st.stdout[-600:])
    with h5py.File(os.path.join(directory, "summary.h5"), "r") as f:
        tuned = [x.decode() if isinstance(x, bytes) else str(x) for x in f.attrs.get("tuned", [])]
        cols = [x.decode() if isinstance(x, bytes) else str(x) for x in f.attrs["columns"]]
    check("summary.h5 records the tuned key and the held-out columns",
          tuned == ["train.lr"] and {"val_loss", "val_tokens", "test_loss", "test_tokens"} <= set(cols),
          f"{tuned} {cols}")
    runs = {}
    for name in os.listdir(directory):
        if not name.endswith(".h5") or name == "summary.h5":
            continue
        with h5py.File(os.path.join(directory, name), "r") as f:
            cfg = f["config"].attrs
            split = [x.decode() if isinstance(x, bytes) else str(x)
                     for x in f["heldout/split"][()]] if "heldout/split" in f else []
            loss = f["heldout/loss"][()] if split else None
            v = float(loss[split.index("validation")]) if "validation" in split \
                else float(f["eval/loss"][-1])
            t = float(loss[split.index("test")]) if "test" in split else None
            runs.setdefault((int(cfg["n_head"]), float(cfg["lr"])), []).append((v, t))
    chosen = choose({k: [v for v, _ in r] for k, r in runs.items()})
    got = json.loads(script("compare", directory, "--json").stdout)
    arms = {a["keys"]["model.n_head"]: a["chosen"]["train.lr"] for a in got["tuning"]["arms"]}
    has_test = all(t is not None for r in runs.values() for _, t in r)
    want = {h: np.mean([t if has_test else v for v, t in runs[(h, chosen[h])]]) for h in (1, 4)}
    rows = {r["keys"]["model.n_head"]: r["mean"] for r in got["rows"]}
    check("the real sweep: compare's choice and reported means are the run files' "
          f"({'test' if has_test else 'no test split: validation'})",
          arms == chosen and all(close(rows[h], want[h], 1e-7) for h in (1, 4)),
          f"{arms} {chosen} {rows} {want}")
    p = script("plot-sweep", directory)
    csv_path = os.path.join(directory, "plots", "tuning.csv")
    ok = p.returncode == 0 and os.path.exists(os.path.join(directory, "plots", "tuning.png")) \
        and os.path.exists(csv_path)
    if ok:
        for row in read_csv(csv_path):
            v = [x for x, _ in runs[(int(row["model.n_head"]), float(row["train.lr"]))]]
            metric = got["tuning"]["selection_metric"]
            ok &= close(float(row[f"{metric}_mean"]), np.mean(v), 1e-9) \
                and int(row["n"]) == len(v) \
                and (row["chosen"] == "1") == (chosen[int(row["model.n_head"])] == float(row["train.lr"]))
    check("plot-sweep: tuning.png and tuning.csv with the validation means and the choice", ok,
          p.stderr[-400:])


def tost(a, b, margin):
    """Schuirmann's two one-sided Welch tests written out with scipy.stats.t: the larger p of
    H0 Δ <= -margin and H0 Δ >= margin."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    se, delta = math.sqrt(va + vb), a.mean() - b.mean()
    return max(sps.t.sf((delta + margin) / se, df), sps.t.cdf((delta - margin) / se, df)), \
        delta - sps.t.ppf(0.95, df) * se, delta + sps.t.ppf(0.95, df) * se


def test_equivalence():
    val, test = numbers(5)
    outdir = known_tuned("tunede", val, test)
    chosen = choose(val)
    arm = {h: test[(h, chosen[h])] for h in HEADS}
    # baseline 1 head: the others lower (Δ < 0); baseline 16: some higher (Δ > 0)
    for spec, base in (("spread", 1), ("0.05", 1), ("spread", 16), ("0.05", 16)):
        p = script("compare", outdir, "--json", "--equivalence", spec, "--baseline", str(base))
        got = json.loads(p.stdout) if p.returncode == 0 else {"rows": []}
        rows = {r["keys"]["model.n_head"]: r for r in got["rows"]}
        ok = bool(rows) and rows[base]["tost_p"] is None
        for h in (h for h in HEADS if h != base):
            margin = np.std(arm[base], ddof=1) if spec == "spread" else 0.05
            pv, lo, hi = tost(arm[h], arm[base], margin)
            ok &= close(rows[h]["equivalence_margin"], margin) and close(rows[h]["tost_p"], pv, 1e-7)
            ok &= (pv < 0.05) == (-margin < lo and hi < margin)  # the 90% interval's reading
        check(f"--equivalence {spec}, baseline {base}: each row's margin and TOST p are the written-out two "
              "one-sided Welch tests", ok, p.stderr[-400:] + json.dumps(got["rows"])[:400])
    md = script("compare", outdir, "--equivalence", "spread").stdout
    check("--equivalence: the Markdown has the columns and says what the test is",
          "| TOST p |" in md and "Schuirmann" in md and "sample std over its seeds" in md, md[-800:])
    for bad in ("0", "-1", "wide"):
        p = script("compare", outdir, "--equivalence", bad)
        check(f"--equivalence {bad}: refused with exit 2", p.returncode == 2
              and "--equivalence" in p.stderr, p.stderr[-300:])


def main():
    t0 = time.time()
    run_check("known tuned summary", test_known)
    run_check("compare --equivalence (TOST)", test_equivalence)
    run_check("bad tune: in experiment files", test_bad_files)
    if not harness_missing(HARNESS):
        os.environ["HARNESS"] = HARNESS
        run_check("a real tuned sweep", test_real_sweep)
    return end_suite(TMP, KEEP, t0)


if __name__ == "__main__":
    sys.exit(main())
