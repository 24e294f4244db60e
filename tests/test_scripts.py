#!/usr/bin/python3
# suite: sweep, plot and compare scripts
"""Tests of the experiment tooling: scripts/sweep, plot, plot-sweep, compare, bench and the heads package (python/heads).

usage: /usr/bin/python3 tests/test_scripts.py [--keep]
  --keep   keep the temporary directory (configs, experiments, results, PNGs) and print its path

Needs a built harness (`make`) and gnuplot. Uses tiny configs (d_model 16, 20 steps) so the whole
file runs in well under a minute. Checks, one line each ("ok - ..." or "FAIL - ...: details"),
then "N passed, M failed"; exit status 1 if anything failed:
  grid expansion   fixed_width, fixed_d_head, arbitrary keys (train.lr, n_layer), seeds, run names,
                   YAML 1.1 numbers such as 3e-3, and the file:line:col errors of bad experiments;
                   points (a list of layouts crossed with grid and seeds: names, labels, errors;
                   experiments/layouts.yaml's 15 runs); a derived key written out (d_head 0
                   under fixed_width, train.threads 0) as if left out, a value against its rule
                   refused with the key, the rule and the value it gives
  keys and --set   the key list comes from `harness --keys` (bare n_kv_head, sink in a grid);
                   sweep --set reaches every run, and its errors; a missing numpy is one line
  sweep            runs, logs and summary; skips complete results; reruns results whose config
                   changed; overwrites a stale .tmp; a failing run is reported with its log tail
                   and does not stop the others (exit 1); bad input stops before training (exit 2)
  resume           kill -9 a sweep after its first run completed, rerun it: only the missing runs
                   run (the first file's mtime is unchanged); SIGINT: exit 130, the running
                   harness saves status "interrupted", the next sweep completes it
  summary          one row per run; params and FLOPs equal `harness --shapes` and the docs/model.md
                   formulas; losses equal the results files; class counts sum to layers x heads
  statistics       Welch's t, df, p against a hand computation and scipy.stats.ttest_ind
                   (equal_var=False), with scipy and with our own incomplete beta; compare's
                   table on a summary with known numbers
  plots            plot (induction and text runs), plot-sweep: every PNG exists, is a PNG and
                   is not trivially small, the head study's figures (heads, pruning, composition;
                   pruning curves and heads needed of the sweep) in PNG, SVG and PDF; the probe's
                   tokens as text on the map axes of an induction, text, two_source and tokens run
  bench            scripts/bench --quick on one config against one PyTorch variant: both sides
                   measured, the printed ratio is the ratio of the printed times, the header
                   and JSON name the ISA path, CPU, caches and OpenBLAS kernels (not those of an
                   OPENBLAS_CORETYPE left in the shell), the one-thread column
  bench scaling table  the scaling tables' ratio, MiB ratio and load-average columns, from a
                   made-up entry
"""
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = os.path.join(ROOT, "scripts")
sys.path.insert(0, os.path.join(ROOT, "python"))
from heads.core import cli, harness, stats  # noqa: E402
from heads.sweep import experiments, pool, summary
from heads import results
from checks import (check, end_suite, harness_missing, known_summary, read_csv,  # noqa: E402
                    run_check, statuses)
import numpy as np  # noqa: E402

PY = "/usr/bin/python3"


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def script(name, *args, env=None, timeout=120):
    return subprocess.run([PY, os.path.join(SCRIPTS, name)] + [str(a) for a in args],
                          capture_output=True, text=True, timeout=timeout, env=env)


TMP = tempfile.mkdtemp(prefix="test_scripts.")
TINY = write(os.path.join(TMP, "tiny.yaml"), """\
model: {vocab_size: 16, d_model: 16, n_head: 2, n_layer: 2, seq_len: 16}
train: {steps: 20, batch_size: 4, lr: 1.0e-2, warmup_steps: 2, seed: 0}
data: {task: induction, min_period: 2, max_period: 6}
output: {log_every: 5, eval_every: 10, eval_batches: 1, attn_every: 10, probes: 2}
""")
TINY_TEXT = write(os.path.join(TMP, "tiny_text.yaml"), """\
model: {vocab_size: 256, d_model: 16, n_head: 2, n_layer: 1, seq_len: 24}
train: {steps: 20, batch_size: 4, lr: 1.0e-2, warmup_steps: 2}
data: {task: text, path: /usr/share/common-licenses/GPL-3}
output: {log_every: 5, eval_every: 10, eval_batches: 1, attn_every: 10, probes: 2,
         probe_text: ["The cat sat on the mat"]}
""")


def p_text(p):
    """A p value as docs/sweeps.md says compare prints it: two significant digits, scientific
    below 1e-3."""
    if p < 1e-3:
        return "%.1e" % p
    two = float("%.2g" % p)
    return "%.*f" % (max(0, 1 - math.floor(math.log10(two))), two)


def experiment(name, body):
    return write(os.path.join(TMP, name + ".yaml"), f"base: {TINY}\n" + body)


def expect_error(body, pattern, name):
    path = experiment("bad", body)
    try:
        experiments.Experiment(path)
    except cli.UserError as e:
        return check(name, re.match(pattern, str(e)) is not None, f"message: {e}")
    return check(name, False, "no error raised")


# ------------------------------------------------------------------------------------------------
# grid expansion


def test_grid():
    exp = experiments.Experiment(experiment("fw", "grid: {n_head: [1, 2, 4]}\nseeds: [0, 1]\n"
                                         "width: fixed_width\n"))
    names = [r.name for r in exp.runs]
    check("fixed_width: 3 head counts x 2 seeds = 6 runs with readable names",
          names == ["h1_dh16_s0", "h1_dh16_s1", "h2_dh8_s0", "h2_dh8_s1", "h4_dh4_s0", "h4_dh4_s1"],
          str(names))
    check("fixed_width: d_head = d_model / n_head for every run",
          all(r.overrides["model.d_head"] * r.overrides["model.n_head"] == 16 for r in exp.runs),
          str([r.overrides for r in exp.runs]))
    check("seeds become train.seed; a run's point leaves the seed out",
          [r.overrides["train.seed"] for r in exp.runs] == [0, 1] * 3
          and exp.runs[0].point == exp.runs[1].point == (("model.n_head", 1),))

    exp = experiments.Experiment(experiment("fdh", "set: {model.d_head: 8}\ngrid: {model.n_head: [1, 2, 4]}\n"
                                          "width: fixed_d_head\nseeds: 2\n"))
    check("fixed_d_head: d_head stays 8, so E = 8, 16, 32 grows with the heads",
          [(r.name, r.overrides["model.d_head"]) for r in exp.runs][::2]
          == [("h1_dh8_s0", 8), ("h2_dh8_s0", 8), ("h4_dh8_s0", 8)], str([r.name for r in exp.runs]))
    ok, params, flops, width, msg = harness.run_shapes(exp.base_path, exp.runs[-1].overrides)
    check("fixed_d_head: the harness accepts E != d_model (E = 32 for 4 heads of 8)",
          ok and width == 32, msg or str(width))

    exp = experiments.Experiment(experiment("keys", "grid:\n  train.lr: [1.0e-2, 3e-3]\n  n_layer: [1, 2]\n"
                                           "seeds: [7]\n"))
    names = [r.name for r in exp.runs]
    check("arbitrary keys: train.lr x n_layer (bare key -> model.n_layer), 3e-3 read as a number",
          names == ["lr0.01_L1_s7", "lr0.01_L2_s7", "lr0.003_L1_s7", "lr0.003_L2_s7"]
          and exp.runs[2].overrides["train.lr"] == 0.003
          and exp.runs[1].overrides["model.n_layer"] == 2, str(names))
    exp = experiments.Experiment(experiment("nested", "set:\n  train: {steps: 5}\n  data.max_period: 5\n"
                                             "grid: {model.n_head: [1, 2]}\n"))
    check("set: accepts section: {key: v} and section.key: v; free width keeps d_head implicit",
          exp.runs[0].overrides == {"train.steps": 5, "data.max_period": 5, "model.n_head": 1}
          and exp.runs[1].name == "h2_dh8_s0", str(exp.runs[0].overrides))

    expect_error("grid: {n_head: [1, 3]}\nwidth: fixed_width\n",
                 r".*bad\.yaml:2:8: width: fixed_width needs d_model divisible by n_head",
                 "error: fixed_width with a head count that does not divide d_model, at its line")
    expect_error("grid: {n_haed: [1, 2]}\n", r".*bad\.yaml:2:8: unknown config key 'n_haed' "
                 r"\(did you mean 'n_head'\?\)", "error: misspelt key, with a suggestion")
    expect_error("grid: {n_head: [1, 2]}\nwidht: fixed_width\n",
                 r".*bad\.yaml:3:1: unknown key 'widht' \(did you mean 'width'\?\)",
                 "error: unknown top-level key, with a suggestion")
    expect_error("grid: {train.seed: [1, 2]}\nseeds: [0]\n", r".*bad\.yaml:3:1: seeds: and grid",
                 "error: seeds and grid train.seed together")
    expect_error("grid: {n_head: [1, 2, 2]}\n", r".*bad\.yaml:2:23: .*listed twice",
                 "error: a value listed twice points at the repeat")
    expect_error("grid: {n_head: [1, 2]}\nwidth: fixed_d_head\n",
                 r".*fixed_d_head keeps model.d_head fixed",
                 "error: fixed_d_head without a d_head")
    expect_error("set: {output.path: x.h5}\n", r".*bad\.yaml:2:7: output.path is chosen by the sweep: "
                 r"each run writes <results>/<experiment>/<run>\.h5 .*; remove it$",
                 "error: output.path is the sweep's, and the message is about the path only")
    test_defaults_written_out()
    test_points()


def test_points():
    """points: a list of layouts (any key values) crossed with grid: and seeds:, named as a
    grid's runs, one value each of the swept key 'layout'; the mistakes one can make."""
    exp = experiments.Experiment(experiment("pts", "points: [{n_head: 1}, {n_head: 4, d_head: 8}, "
                                            "{model: {n_head: 2, n_kv_head: 1}}]\n"
                                            "grid: {train.lr: [1.0e-2, 3e-3]}\nseeds: 2\n"))
    names = [r.name for r in exp.runs]
    check("points x grid x seeds: 3 x 2 x 2 runs, points slowest, seeds fastest, named as a "
          "grid's", names == ["h1_dh16_lr0.01_s0", "h1_dh16_lr0.01_s1", "h1_dh16_lr0.003_s0",
                              "h1_dh16_lr0.003_s1", "h4_dh8_lr0.01_s0", "h4_dh8_lr0.01_s1",
                              "h4_dh8_lr0.003_s0", "h4_dh8_lr0.003_s1", "h2_dh8_n_kv_head1_lr0.01_s0",
                              "h2_dh8_n_kv_head1_lr0.01_s1", "h2_dh8_n_kv_head1_lr0.003_s0",
                              "h2_dh8_n_kv_head1_lr0.003_s1"], str(names))
    check("points: the swept keys are layout, the grid's and the seed; each point one label",
          exp.swept_keys() == ["layout", "train.lr", "train.seed"]
          and [r.swept["layout"] for r in exp.runs[::4]] == ["1×16", "4×8", "2×8, n_kv_head 1"]
          and exp.shape_text() == "3 layouts x 2 lr x 2 seed", f"{exp.swept_keys()} "
          f"{[r.swept for r in exp.runs[::4]]}")
    check("points: a point's keys reach its runs only (the others keep the base's)",
          exp.runs[4].overrides == {"model.n_head": 4, "model.d_head": 8, "train.lr": 0.01,
                                    "train.seed": 0}
          and "model.n_kv_head" not in exp.runs[0].overrides
          and exp.runs[8].overrides["model.n_kv_head"] == 1, str(exp.runs[4].overrides))
    again = experiments.Experiment(experiment("pts2", "points: [{n_head: 4, d_head: 8}, "
                                              "{n_head: 1}]\nseeds: 2\n"))
    check("points: a point's run names do not depend on its place in the list",
          {r.name for r in again.runs} == {"h4_dh8_s0", "h4_dh8_s1", "h1_dh16_s0", "h1_dh16_s1"},
          str([r.name for r in again.runs]))
    exp = experiments.Experiment(experiment("ptsfw", "points: [{n_head: 1}, {n_head: 4, d_head: 0}, "
                                            "{n_head: 2, d_head: 8}]\nwidth: fixed_width\n"))
    check("points under width: fixed_width: d_head derived (0 or the value it takes accepted)",
          [(r.name, r.swept["layout"]) for r in exp.runs] == [("h1_dh16_s0", "1×16"),
                                                               ("h4_dh4_s0", "4×4"),
                                                               ("h2_dh8_s0", "2×8")],
          str([(r.name, r.swept) for r in exp.runs]))
    expect_error("points: [{n_head: 4, d_head: 8}]\nwidth: fixed_width\n",
                 r".*bad\.yaml:2:22: model\.d_head 8: width: fixed_width derives model\.d_head = "
                 r"d_model / n_head, 16 / 4 = 4 here", "error: a point's d_head against fixed_width, at the point")
    expect_error("points: [{n_head: 4}, {n_head: 4, d_head: 4}]\n",
                 r".*bad\.yaml:2:23: points 1 and 2 are the same layout", "error: two points alike")
    expect_error("points: [{n_head: 4}]\ngrid: {n_head: [1]}\n",
                 r".*bad\.yaml:2:11: model\.n_head is both in points: and swept in grid:",
                 "error: a key in points and grid")
    expect_error("set: {n_head: 2}\npoints: [{n_head: 4}]\n",
                 r".*bad\.yaml:3:11: model\.n_head is both set in set: and given in points:",
                 "error: a key in points and set")
    expect_error("points: [{n_head: 4, seed: 1}]\nseeds: 2\n",
                 r".*bad\.yaml:2:22: train\.seed in a point: seeds: crosses every point",
                 "error: a seed in a point")
    expect_error("points: {n_head: 4}\n", r".*bad\.yaml:2:9: points: expected a non-empty list",
                 "error: points not a list")
    expect_error("points: [4]\n", r".*bad\.yaml:2:10: point 1: expected a mapping",
                 "error: a point not a mapping")
    expect_error("points: [{n_haed: 4}]\n", r".*bad\.yaml:2:11: unknown config key 'n_haed'",
                 "error: a misspelt key in a point, at it")
    try:
        experiments.Experiment(experiment("ptsset", "points: [{n_head: 4}]\n"), ["n_head=2"])
        check("sweep --set on a key of the points: an error", False, "no error")
    except cli.UserError as e:
        check("sweep --set on a key of the points: an error", "given in points:" in str(e), str(e))
    exp = experiments.Experiment(os.path.join(ROOT, "experiments", "layouts.yaml"))
    check("experiments/layouts.yaml: 1×64, 2×32, 4×16, 8×8 and 4×32, 3 seeds each (15 runs)",
          [r.swept["layout"] for r in exp.runs[::3]] == ["1×64", "2×32", "4×16", "8×8", "4×32"]
          and len(exp.runs) == 15 and exp.runs[-1].name == "h4_dh32_s2"
          and exp.runs[-1].overrides == {"model.n_head": 4, "model.d_head": 32, "train.seed": 2},
          str([r.name for r in exp.runs]))


def test_defaults_written_out():
    """A key a rule derives (width: fixed_width's d_head, the sweep's threads) takes the value
    that means "derive it" as if it were left out; a value against the rule is refused with the
    key, the rule and the value the rule gives; a value equal to it is not against it."""
    plain = experiments.Experiment(experiment("dflt0", "grid: {n_head: [1, 2, 4]}\nwidth: fixed_width\n"))
    for body, what in (("set: {model.d_head: 0}\n", "set: model.d_head: 0"),
                       ("set: {d_head: 0, train.threads: 0}\n", "set: d_head: 0, train.threads: 0"),
                       ("set: {train: {threads: 0}}\n", "set: train: {threads: 0}")):
        exp = experiments.Experiment(experiment("dflt", body + "grid: {n_head: [1, 2, 4]}\n"
                                                "width: fixed_width\n"))
        check(f"fixed_width with {what}: the runs of the experiment without it",
              [(r.name, r.overrides, r.swept) for r in exp.runs]
              == [(r.name, r.overrides, r.swept) for r in plain.runs],
              str([r.overrides for r in exp.runs]))
    exp = experiments.Experiment(experiment("dflt", "grid: {n_head: [1, 2, 4], d_head: [0]}\n"
                                            "width: fixed_width\n"))
    check("fixed_width with grid: d_head: [0]: not a swept key, the same runs",
          exp.swept_keys() == ["model.n_head"] and [r.name for r in exp.runs]
          == [r.name for r in plain.runs], f"{exp.swept_keys()} {[r.name for r in exp.runs]}")
    exp = experiments.Experiment(experiment("dflt", "set: {d_head: 4}\ngrid: {n_head: [4]}\n"
                                            "width: fixed_width\n"))
    check("fixed_width with d_head equal to d_model / n_head: accepted",
          [r.name for r in exp.runs] == ["h4_dh4_s0"], str([r.name for r in exp.runs]))
    exp = experiments.Experiment(experiment("dflt", "grid: {n_head: [1, 2]}\n"), ["train.threads=0"])
    check("sweep --set train.threads=0: as if not given",
          all("train.threads" not in r.overrides for r in exp.runs), str(exp.runs[0].overrides))
    expect_error("set: {model.d_head: 8}\ngrid: {n_head: [1, 2]}\nwidth: fixed_width\n",
                 r".*bad\.yaml:2:7: model\.d_head 8: width: fixed_width derives model\.d_head = "
                 r"d_model / n_head, 16 / 1 = 16 here; write 0 \(or 16\) or remove it",
                 "error: fixed_width and a d_head against it: the key, the rule, the value it would take")
    expect_error("grid: {n_head: [1, 2], d_head: [8, 16]}\nwidth: fixed_width\n",
                 r".*bad\.yaml:2:24: model\.d_head 8: width: fixed_width derives model\.d_head",
                 "error: fixed_width and a swept d_head: the same message, at the grid key")
    nproc = len(os.sched_getaffinity(0))
    for body, where in (("set: {train.threads: 2}\n", "2:7"), ("grid: {train.threads: [0, 1]}\n", "2:8")):
        expect_error(body, rf".*bad\.yaml:{where}: train\.threads (1|2): the sweep gives each run "
                     rf"max\(1, nproc // -j\) threads \({nproc} at -j 1, {max(1, nproc // 2)} at -j 2 "
                     rf"with nproc {nproc} here\); write 0 \(the sweep's choice\) or remove it, "
                     r"or give scripts/sweep --threads (1|2)$",
                     f"error: {body.strip()}: the threads rule and what it gives, no results path")


def test_keys_and_set():
    """The key list is the harness's (--keys), sweep --set, and friendly missing-module lines."""
    sections = harness.key_sections()
    check("the scripts' config keys are `harness --keys`'s (n_kv_head, sink, pos included)",
          {"n_kv_head", "sink", "pos", "rope_dims"} <= set(sections["model"])
          and sum(map(len, sections.values())) == len(harness.config_keys()) > 40, str(sections))
    exp = experiments.Experiment(experiment("kv", "grid: {n_kv_head: [1, 2], sink: [false, true]}\n"))
    check("a grid with bare n_kv_head and sink keys expands (model.n_kv_head, model.sink)",
          [(r.overrides["model.n_kv_head"], r.overrides["model.sink"]) for r in exp.runs]
          == [(1, False), (1, True), (2, False), (2, True)], str([r.overrides for r in exp.runs]))
    expect_error("grid: {model.n_haed: [1, 2]}\n", r".*bad\.yaml:2:8: unknown key 'n_haed' in section 'model' "
                 r"\(did you mean 'n_head'\? known: ", "error: misspelt section.key, with a suggestion")
    expect_error("grid: {path: [a.txt, b.txt]}\n", r".*bad\.yaml:2:8: 'path' is in several sections "
                 r"\(data\.path, output\.path\); write section\.key$", "error: an ambiguous bare key lists its sections")
    path = experiment("cliset", "set: {train.steps: 5}\ngrid: {n_head: [1, 2]}\n")
    exp = experiments.Experiment(path, ["n_layer=1", "train.steps=7", "train.lr=5e-3"])
    check("Experiment(sets): --set values reach every run, replace set:, YAML-typed",
          all(r.overrides["model.n_layer"] == 1 and r.overrides["train.steps"] == 7
              and r.overrides["train.lr"] == 0.005 for r in exp.runs), str(exp.runs[0].overrides))
    for sets, pattern in ((["model.n_head=4"], r"--set:1:1: 'model.n_head=4': model.n_head is swept"),
                          (["output.path=x.h5"], r"--set:1:1: .*output.path is chosen by the sweep"),
                          (["n_layer"], r"--set:1:1: 'n_layer': expected key=value, e\.g\. model\.n_head=4 or n_head=4$"),
                          (["path=x"], r"--set:1:1: 'path=x': 'path' is in several sections \(data\.path, output\.path\)"),
                          (["n_heads=2"], r"--set:1:1: 'n_heads=2': unknown config key 'n_heads' "
                                          r"\(did you mean 'n_head'\?\)")):
        try:
            experiments.Experiment(path, sets)
            check(f"sweep --set {sets[0]}: an error", False, "no error")
        except cli.UserError as e:
            check(f"sweep --set {sets[0]}: {e}", re.match(pattern, str(e)) is not None, str(e))
    for bad in ("path=x", "n_heads=2", "modl.n_head=2", "model.n_heads=2", "n_layer"):
        h = subprocess.run([harness.HARNESS, "--shapes", "configs/heads12.yaml", "--set", bad], cwd=ROOT,
                           capture_output=True, text=True)
        try:
            experiments.Experiment(path, [bad])
            mine = "no error"
        except cli.UserError as e:
            mine = str(e)
        check(f"sweep --set {bad} and harness --set {bad}: the same message", h.returncode == 2 and
              h.stderr.strip() == mine, f"harness: {h.stderr.strip()!r}; sweep: {mine!r}")
    p = script("sweep", path, "--set", "n_layer=1", "--list")
    check("scripts/sweep --set model.n_layer=1 --list shows it in every run",
          p.returncode == 0 and p.stdout.count("model.n_layer=1") == 2, p.stdout + p.stderr)
    p = script("sweep", path, "--set", "model.n_head=3")
    check("scripts/sweep --set on a swept key: exit 2, one line",
          p.returncode == 2 and p.stderr.count("\n") == 1 and "is swept in grid" in p.stderr, p.stderr)
    for name in ("plot", "plot-sweep", "compare", "sweep", "report"):  # -S: no site-packages
        p = subprocess.run([PY, "-S", os.path.join(SCRIPTS, name), "x"], capture_output=True, text=True)
        check(f"{name} without numpy: one line naming python3-numpy and pip install numpy, exit 2",
              p.returncode == 2 and p.stderr.count("\n") == 1 and "python3-numpy" in p.stderr
              and "pip install numpy" in p.stderr and "Traceback" not in p.stderr, p.stderr[-300:])


# ------------------------------------------------------------------------------------------------
# sweeps


def test_sweep_and_summary():
    res = os.path.join(TMP, "results")
    exp_path = experiment("small", "grid: {n_head: [1, 2, 4]}\nseeds: [0, 1]\nwidth: fixed_width\n")
    stale = os.path.join(res, "small", "h2_dh8_s0.h5.tmp")
    os.makedirs(os.path.dirname(stale), exist_ok=True)
    write(stale, "garbage left by a killed harness")
    p = script("sweep", exp_path, "-j", "2", "--results", res)
    outdir = os.path.join(res, "small")
    st = statuses(outdir)
    check("sweep -j 2: exit 0 and six complete results", p.returncode == 0 and len(st) == 6
          and set(st.values()) == {"complete"}, p.stdout[-500:] + p.stderr[-500:])
    check("sweep: a stale .tmp is overwritten, not left behind", not os.path.exists(stale))
    log = open(os.path.join(outdir, "h1_dh16_s0.log")).read()
    check("sweep: each run's log holds the command (threads = nproc // 2) and the harness output",
          log.startswith("# ") and f"train.threads={max(1, len(os.sched_getaffinity(0)) // 2)}"
          in log.splitlines()[0] and ": complete" in log, log[:300])
    check("sweep: prints progress with an ETA", re.search(r"\d+/6 runs done.*ETA", p.stdout)
          is not None or "done   h4_dh4_s1" in p.stdout, p.stdout[-300:])

    rows = read_csv(os.path.join(outdir, "summary.csv"))
    check("summary.csv: one row per run, all complete, with the swept values",
          [r["run"] for r in rows] == ["h1_dh16_s0", "h1_dh16_s1", "h2_dh8_s0", "h2_dh8_s1",
                                       "h4_dh4_s0", "h4_dh4_s1"]
          and all(r["status"] == "complete" for r in rows)
          and [r["model.n_head"] for r in rows] == ["1", "1", "2", "2", "4", "4"]
          and [r["train.seed"] for r in rows] == ["0", "1"] * 3, str(rows[:1]))
    ok, params, flops, _, _ = harness.run_shapes(TINY, {"model.n_head": 2, "model.d_head": 8})
    cfg = dict(vocab_size=16, d_model=16, n_head=2, d_head=8, n_layer=2, seq_len=16)
    check("summary: params and FLOPs/token equal `harness --shapes` and the docs/model.md formulas",
          all(int(r["params"]) == params and int(r["flops_per_token"]) == flops for r in rows)
          and harness.shapes_formula(cfg) == (params, flops), f"{rows[0]['params']} {params} "
          f"{harness.shapes_formula(cfg)} {flops}")
    bad = []
    for r in rows:
        result = results.RunResult(os.path.join(outdir, r["run"] + ".h5"))
        heads = sum(int(r[f"heads_{c}"]) for c in results.CLASSES)
        if not (math.isclose(float(r["final_eval_loss"]), result.eval_loss[-1], rel_tol=1e-8)
                and math.isclose(float(r["final_train_loss"]), result.train_loss[-1], rel_tol=1e-8)
                and heads == 2 * int(r["n_head"]) and int(r["params"]) == result.n_params):
            bad.append(r["run"])
    check("summary: final losses equal the files; class counts sum to layers x heads; params "
          "equal the size of /params", not bad, str(bad))
    s = results.Summary(outdir)
    check("summary.h5: the same rows as columns, with the swept keys and width rule",
          list(s["run"]) == [r["run"] for r in rows] and s.swept == ["model.n_head", "train.seed"]
          and s.width == "fixed_width" and np.allclose(s["final_eval_loss"],
                                                       [float(r["final_eval_loss"]) for r in rows]))

    mtimes = {n: os.path.getmtime(os.path.join(outdir, n + ".h5")) for n in st}
    p = script("sweep", exp_path, "--threads", "1", "--results", res)
    check("sweep again: everything complete is skipped (no file rewritten)",
          p.returncode == 0 and "6 complete already, 0 to run" in p.stdout
          and all(os.path.getmtime(os.path.join(outdir, n + ".h5")) == t
                  for n, t in mtimes.items()), p.stdout[-400:])

    exp_path = experiment("small", "set: {train.steps: 22}\ngrid: {n_head: [1, 2, 4]}\n"
                                   "seeds: [0, 1]\nwidth: fixed_width\n")
    p = script("sweep", exp_path, "--results", res, "--list")
    check("sweep --list: names, states (stale: made with another train.steps, named) and overrides",
          p.returncode == 0 and re.search(r"h2_dh8_s1\s+stale\s+train.steps=22 model.n_head=2", p.stdout)
          and "train.steps 20 -> 22" in p.stdout, p.stdout[:400])
    p = script("sweep", exp_path, "-j", "2", "--results", res)
    check("sweep: complete results made with other config values are rerun, saying which",
          p.returncode == 0 and p.stdout.count("train.steps 20 -> 22") == 6
          and results.RunResult(os.path.join(outdir, "h1_dh16_s0.h5")).train_step[-1] == 21,
          p.stdout[-600:])
    return outdir


def test_failures():
    res = os.path.join(TMP, "results")
    # A harness that fails for seed 1 (after printing a message), and runs normally otherwise.
    wrapper = write(os.path.join(TMP, "flaky-harness"), f"""#!/bin/sh
case "$*" in
  *--shapes*) ;;
  *train.seed=1*) echo "step 1/20  loss 9.9"; echo "flaky: simulated failure for seed 1" >&2; exit 5 ;;
esac
exec {harness.HARNESS} "$@"
""")
    os.chmod(wrapper, 0o755)
    env = dict(os.environ, HARNESS=wrapper)
    exp_path = experiment("flaky", "grid: {n_head: [1, 2]}\nseeds: [0, 1]\nwidth: fixed_width\n")
    p = script("sweep", exp_path, "-j", "2", "--results", res, env=env)
    outdir = os.path.join(res, "flaky")
    st = statuses(outdir)
    check("failing runs: exit 1, the other runs complete",
          p.returncode == 1 and st == {"h1_dh16_s0": "complete", "h2_dh8_s0": "complete"},
          f"rc {p.returncode} {st}")
    check("failing runs: reported with exit status and the tail of the log",
          "FAILED h1_dh16_s1: exit status 5" in p.stdout
          and "flaky: simulated failure for seed 1" in p.stdout
          and "failed h2_dh8_s1" in p.stdout, p.stdout[-800:])
    rows = {r["run"]: r for r in read_csv(os.path.join(outdir, "summary.csv"))}
    check("failing runs: summary rows with status failed and no loss",
          rows["h1_dh16_s1"]["status"] == "failed" and rows["h1_dh16_s1"]["final_eval_loss"] == ""
          and rows["h1_dh16_s0"]["status"] == "complete", str(rows.get("h1_dh16_s1")))

    # ./harness relinked while a sweep runs: for a moment it cannot be executed. The wrapper makes
    # itself so after seed 0 trains, for 1.5 s (a relink) or for good (removed, left broken).
    for name, restore in (("relinked", "(sleep 1.5; chmod +x \"$0\") &"), ("unexecutable", "")):
        wrapper = write(os.path.join(TMP, f"{name}-harness"), f"""#!/bin/sh
case "$*" in
  *--shapes*) ;;
  *train.seed=0*) {harness.HARNESS} "$@"; rc=$?; chmod -x "$0"; {restore}
    exit $rc ;;
esac
exec {harness.HARNESS} "$@"
""")
        os.chmod(wrapper, 0o755)
        exp_path = experiment(name, "grid: {n_head: [1]}\nseeds: [0, 1]\nwidth: fixed_width\n")
        t0 = time.time()
        p = script("sweep", exp_path, "--results", res, env=dict(os.environ, HARNESS=wrapper))
        st = statuses(os.path.join(res, name))
        if restore:
            check("harness relinked mid-sweep (not executable for 1.5 s): the next run waits for it "
                  "and completes, no traceback",
                  p.returncode == 0 and st == {"h1_dh16_s0": "complete", "h1_dh16_s1": "complete"}
                  and "Traceback" not in p.stdout + p.stderr,
                  f"rc {p.returncode} {st}\n{p.stdout[-600:]}{p.stderr[-600:]}")
        else:
            log = open(os.path.join(res, name, "h1_dh16_s1.log")).read()
            check("harness left unexecutable mid-sweep: that run FAILED with the reason after "
                  f"{pool.START_RETRY_SECONDS:.0f} s of retries (in its log too), exit 1, no traceback",
                  p.returncode == 1 and st == {"h1_dh16_s0": "complete"}
                  and "FAILED h1_dh16_s1: cannot start" in p.stdout and "Permission denied" in p.stdout
                  and "cannot start" in log and "Traceback" not in p.stdout + p.stderr
                  and time.time() - t0 >= pool.START_RETRY_SECONDS,
                  f"rc {p.returncode} {st}\n{p.stdout[-600:]}{p.stderr[-600:]}")

    exp_path = experiment("badlr", "grid: {train.lr: [0.01, -1]}\n")
    p = script("sweep", exp_path, "--results", res)
    check("bad values: exit 2 before anything trains, the harness's message at the grid's line",
          p.returncode == 2 and re.search(r"badlr\.yaml:2:8: run lr-1_s0: .*train\.lr", p.stderr)
          and not os.path.exists(os.path.join(res, "badlr", "lr0.01_s0.h5")), p.stderr)


def harness_pids(path_fragment):
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if path_fragment in cmd and "harness" in cmd and "sweep" not in cmd:
            pids.append(int(pid))
    return pids


def wait_for(condition, timeout):
    end = time.time() + timeout
    while time.time() < end:
        if condition():
            return True
        time.sleep(0.02)
    return False


def test_resume():
    res = os.path.join(TMP, "results")
    # Runs long enough (a fraction of a second each) to kill the sweep between them; one thread
    # each, as a 2-thread OpenMP run can stall for seconds when other jobs hold the cores.
    exp_path = experiment("resume", "set: {train.steps: 2000, output.attn_every: 0}\n"
                                    "grid: {n_head: [1, 2, 4]}\nwidth: fixed_width\n")
    outdir = os.path.join(res, "resume")
    proc = subprocess.Popen([PY, os.path.join(SCRIPTS, "sweep"), exp_path, "-j", "1",
                             "--threads", "1", "--results", res], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    first = os.path.join(outdir, "h1_dh16_s0.h5")
    second = os.path.join(outdir, "h2_dh8_s0.h5")
    started = wait_for(lambda: results.read_status(first) == "complete", 60)
    proc.kill()  # SIGKILL: no chance to clean up
    proc.wait()
    gone = wait_for(lambda: not harness_pids(outdir), 20)
    check("kill -9 of a sweep: its running harness stops too (parent-death signal)",
          started and gone, f"first complete: {started}, harnesses left: {harness_pids(outdir)}")
    before = statuses(outdir)
    check("after the kill: the first run is complete, the rest is not",
          before.get("h1_dh16_s0") == "complete" and before.get("h4_dh4_s0") is None
          and before.get("h2_dh8_s0") in (None, "interrupted"), str(before))
    t_first = os.path.getmtime(first)
    time.sleep(0.05)
    p = script("sweep", exp_path, "-j", "1", "--threads", "1", "--results", res)
    after = statuses(outdir)
    check("resume: only the missing runs ran; the complete one was not touched",
          p.returncode == 0 and "1 complete already, 2 to run" in p.stdout
          and os.path.getmtime(first) == t_first and os.path.getmtime(second) > t_first
          and set(after.values()) == {"complete"} and len(after) == 3,
          p.stdout[-500:] + str(after))

    # SIGINT: stop launching, forward it; the running harness saves "interrupted"; exit 130.
    # Sent once the second run is training (its log shows a step line).
    exp_path = experiment("sigint", "set: {train.steps: 2000, output.attn_every: 0}\n"
                                    "grid: {n_head: [1, 2, 4]}\nwidth: fixed_width\n")
    outdir = os.path.join(res, "sigint")
    proc = subprocess.Popen([PY, os.path.join(SCRIPTS, "sweep"), exp_path, "-j", "1",
                             "--threads", "1", "--results", res], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)

    def second_is_training():
        try:
            with open(os.path.join(outdir, "h2_dh8_s0.log")) as f:
                return re.search(r"^step \d+/", f.read(), re.M) is not None
        except OSError:
            return False

    wait_for(second_is_training, 60)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    st = statuses(outdir)
    check("SIGINT: exit 130, the running run saved as interrupted, nothing more launched",
          proc.returncode == 130 and st == {"h1_dh16_s0": "complete", "h2_dh8_s0": "interrupted"}
          and "stopped h2_dh8_s0" in out, f"rc {proc.returncode} {st} {out[-400:]}")
    p = script("sweep", exp_path, "-j", "2", "--results", res)
    check("after SIGINT: the next sweep reruns the interrupted run and finishes",
          p.returncode == 0 and "1 complete already, 2 to run" in p.stdout
          and set(statuses(outdir).values()) == {"complete"}, p.stdout[-400:])


# ------------------------------------------------------------------------------------------------
# statistics


def test_statistics():
    a, b = [1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0]
    # By hand: var(a)/3 = 1/3, var(b)/4 = (5/3)/4 = 5/12, se^2 = 3/4, t = -3.5/sqrt(0.75),
    # df = 0.75^2 / ((1/3)^2/2 + (5/12)^2/3) = 0.5625 / (1/18 + 25/432) = 4.9592...
    t, df, p = stats.welch_t_test(a, b)
    check("Welch t and df against the hand computation",
          math.isclose(t, -3.5 / math.sqrt(0.75), rel_tol=1e-12)
          and math.isclose(df, 0.5625 / (1 / 18 + 25 / 432), rel_tol=1e-12), f"t {t} df {df}")
    data = [([2.31, 2.35, 2.29], [2.41, 2.47, 2.38, 2.44]),
            ([1.0, 1.1, 0.9, 1.05, 0.95], [1.5, 1.2, 1.9]),
            ([3.2, 3.3], [3.25, 3.26, 3.24, 3.3, 3.31, 3.22]),
            ([0.5, 0.7, 0.6], [0.5, 0.71, 0.61])]
    try:
        from scipy import stats as scipy_stats
        worst = 0.0
        for x, y in data + [(a, b)]:
            ref = scipy_stats.ttest_ind(x, y, equal_var=False)
            for use_scipy in (True, False):
                t, df, p = stats.welch_t_test(x, y, use_scipy=use_scipy)
                worst = max(worst, abs(t - ref.statistic) / abs(ref.statistic),
                            abs(p - ref.pvalue) / ref.pvalue)
        check("Welch t and p equal scipy.stats.ttest_ind(equal_var=False), with scipy's t "
              "distribution and with our own incomplete beta", worst < 1e-9, f"worst rel {worst}")
    except ImportError:
        print("skip - scipy not installed: comparison with scipy.stats.ttest_ind")
        # p of the hand example from tables: t(4.959) = 4.0415 -> two-sided p ~ 0.0101
        t, df, p = stats.welch_t_test(a, b, use_scipy=False)
        check("Welch p (own incomplete beta) near the tabled value", abs(p - 0.0101) < 5e-4, str(p))
    check("incomplete beta: I_x(a, b) at known points (I_0.5(2, 2) = 0.5, I_0.25(1, 1) = 0.25, "
          "I_x(1, b) = 1 - (1-x)^b)",
          math.isclose(stats.betainc_regularized(2, 2, 0.5), 0.5, rel_tol=1e-12)
          and math.isclose(stats.betainc_regularized(1, 1, 0.25), 0.25, rel_tol=1e-12)
          and math.isclose(stats.betainc_regularized(1, 3.5, 0.3), 1 - 0.7 ** 3.5, rel_tol=1e-12))
    t, df, p = stats.welch_t_test([1.0], [2.0, 3.0])
    m, sd, n = stats.mean_std([1.0, 2.0, 4.0])
    check("one seed gives no p-value (nan); mean_std uses the sample std",
          math.isnan(p) and math.isclose(sd, math.sqrt(7 / 3)) and n == 3)

    # compare on a summary with known numbers
    outdir = os.path.join(TMP, "results", "known")
    os.makedirs(outdir, exist_ok=True)

    losses = {1: [2.50, 2.55, 2.47], 4: [2.31, 2.35, 2.29], 16: [2.41, 2.47, 2.38]}
    rows, known = known_summary(outdir, losses)
    rows.append(dict(rows[-1], run="h16_dh4_s3", status="failed", final_eval_loss=float("nan")))
    summary.write_summary(outdir, rows, known)
    p = script("compare", outdir)
    lines = {l.split("|")[1].strip(): [c.strip() for c in l.split("|")[1:-1]]
             for l in p.stdout.splitlines() if re.match(r"\| \d", l)}
    ok = p.returncode == 0 and set(lines) == {"1", "4", "16"}
    if ok:
        from_row = lines["4"]
        t, df, pv = stats.welch_t_test(losses[4], losses[1])
        delta = np.mean(losses[4]) - np.mean(losses[1])
        m, sd, _ = stats.mean_std(losses[4])
        ok = (from_row[:5] == ["4", "16", "70,528", "131,072", "3"]
              and from_row[5] == f"{m:.4f} ± {sd:.4f}" and from_row[6] == f"{delta:+.4f}"
              and from_row[8] == f"{t:+.2f} ({df:.1f})" and from_row[9] == p_text(pv)
              and lines["1"][6] == "(baseline)" and lines["16"][4] == "3")
    check("compare: Markdown table with mean ± std, Δ against 1 head and Welch p (failed runs "
          "left out)", ok, p.stdout + p.stderr)
    # Holm over the family: 4 and 16 heads against 1, and the narrowest (16) against the best (4)
    family = [stats.welch_t_test(losses[4], losses[1])[2],
              stats.welch_t_test(losses[16], losses[1])[2],
              stats.welch_t_test(losses[16], losses[4])[2]]
    ranked = sorted(range(3), key=lambda i: family[i])
    holm, running = [0.0] * 3, 0.0
    for rank, i in enumerate(ranked):  # by hand: max over the smaller ones of min(1, (3 - rank) p)
        running = max(running, min(1.0, (3 - rank) * family[i]))
        holm[i] = running
    fmt = p_text
    check("compare: Holm p over the 3 tests (4 and 16 heads vs 1; narrowest 16 vs best 4, in the "
          "notes)", ok and lines["4"][10] == fmt(holm[0]) and lines["16"][10] == fmt(holm[1])
          and "narrowest (16 heads) against the best by final_eval_loss, the split it reports on: "
              "optimistic (4 heads)" in p.stdout
          and f"p = {fmt(family[2])}, Holm p = {fmt(holm[2])}." in p.stdout, p.stdout)


# ------------------------------------------------------------------------------------------------
# plots


def is_png(path, min_bytes=2000):
    try:
        with open(path, "rb") as f:
            head = f.read(8)
        return head == b"\x89PNG\r\n\x1a\n" and os.path.getsize(path) >= min_bytes
    except OSError:
        return False


def svg_texts(path):
    """Every <text> element of an SVG file as a list of strings (None if it is not SVG)."""
    import xml.etree.ElementTree as ET
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return None
    return ["".join(e.itertext()) for e in root.iter() if e.tag.endswith("text")] \
        if root.tag.endswith("svg") else None


def svg_text(path):
    """The text of an SVG file's <text> elements, joined (None if it is not SVG)."""
    texts = svg_texts(path)
    return None if texts is None else " ".join(texts)


def pdf_text(path):
    """The text of a PDF (pdftotext, from poppler-utils), or None if it is not a PDF."""
    with open(path, "rb") as f:
        if f.read(5) != b"%PDF-":
            return None
    p = subprocess.run(["pdftotext", path, "-"], capture_output=True, text=True)
    return p.stdout if p.returncode == 0 else None


def test_vector_plots(run, sweep_dir):
    """--format svg and pdf: every figure, in that format, with its symbols and labels as text."""
    out = os.path.join(TMP, "plots_svg")
    p = script("plot", run, "-o", out, "--format", "svg")
    names = ["loss", "attn_layer0", "attn_layer1", "scores", "scores_over_steps", "ablation",
             "importance", "heads", "pruning", "composition"]
    texts = {n: svg_text(os.path.join(out, n + ".svg")) for n in names}
    check("plot --format svg: every figure is an SVG", p.returncode == 0
          and all(texts.values()), f"{[n for n in names if not texts[n]]} {p.stderr[-300:]}")
    with results.h5py.File(run, "r") as f:
        classes = results.read_classes(f)
        bos_first = int(f["probe/tokens"][0][0]) == 0
    legend = [f"h{h} {classes[l][h]}" for l in range(len(classes)) for h in range(len(classes[l]))]
    check("scores_over_steps: a legend naming every head of every layer with its class",
          all(x in (texts["scores_over_steps"] or "") for x in legend), str(legend))
    check("ablation and importance heatmaps say Δloss and |∂loss/∂gate| (UTF-8 symbols)",
          "Δloss" in (texts["ablation"] or "") and "|∂loss/∂gate|" in (texts["importance"] or ""))
    check("induction maps: the probe's tokens on the axes (BOS first)",
          bos_first and "BOS" in (texts["attn_layer0"] or ""))
    check("the head study in SVG: heads (Δloss zeroed and mean-ablated, ∂L/∂gate), pruning "
          "(heads needed), composition (K-composition, random baseline, head names)",
          "mean over the held-out tokens" in (texts["heads"] or "") and "∂L/∂gate" in
          (texts["heads"] or "") and "heads needed" in (texts["pruning"] or "")
          and "K-composition (random matrices:" in (texts["composition"] or "")
          and "L1H0" in (texts["composition"] or ""), str({n: (texts[n] or "")[:80] for n in
                                                           ("heads", "pruning", "composition")}))
    out = os.path.join(TMP, "plots_pdf")
    p = script("plot-sweep", sweep_dir, "-o", out, "--format", "pdf")
    texts = [pdf_text(os.path.join(out, n + ".pdf")) for n in
             ("final_eval_loss", "eval_curves", "head_classes", "pruning_curves", "heads_needed")]
    check("plot-sweep --format pdf: five PDFs (pruning curves, heads needed), ± and × as text",
          p.returncode == 0 and all(texts) and "±" in texts[0] and "×" in texts[2]
          and "fraction of all heads pruned" in texts[3] and "mean ± std" in texts[4]
          and "n_head × n_layer" in texts[4], f"{p.stderr[-300:]}")
    p = script("plot", run, "-o", out, "--format", "gif")
    check("plot --format gif: one line, exit 2", p.returncode == 2
          and p.stderr.strip() == "--format gif: use one of png, svg, pdf", p.stderr)


def test_axis_tokens(induction_run, text_run):
    """The probe's tokens as text on the map axes for every task: induction, text, two_source,
    tokens (ids, no tokenizer)."""
    ids = os.path.join(TMP, "ids.bin")
    np.random.default_rng(0).integers(0, 16, 4000).astype("<u2").tofile(ids)
    runs = {"induction": induction_run, "text": text_run}
    for task, sets in (("two_source", ["data.task=two_source", "model.vocab_size=24"]),
                       ("tokens", ["data.task=tokens", f"data.path={ids}"])):
        runs[task] = os.path.join(TMP, f"axis_{task}.h5")
        cmd = [harness.HARNESS, TINY, "--force", "--set", f"output.path={runs[task]}"]
        subprocess.run(cmd + [x for s in sets for x in ("--set", s)], capture_output=True,
                       timeout=120)
    for task, run in runs.items():
        out = os.path.join(TMP, f"axis_{task}")
        p = script("plot", run, "-o", out, "--format", "svg")
        with results.h5py.File(run, "r") as f:
            labels = results.token_labels(f, 0)
        texts = (svg_texts(os.path.join(out, "attn_layer0.svg")) or []) if p.returncode == 0 else []
        shown = set(labels) & set(texts)
        check(f"{task}: the probe's tokens on the map axes ({', '.join(labels[:4])}, …)",
              labels and labels[0] in texts and len(shown) >= min(5, len(set(labels))),
              f"{labels[:8]} {p.stderr[-200:]}")


def test_plots(sweep_dir):
    run = os.path.join(sweep_dir, "h4_dh4_s0.h5")
    out = os.path.join(TMP, "plots_run")
    p = script("plot", run, "-o", out)
    want = ["loss.png", "attn_layer0.png", "attn_layer1.png", "scores.png", "scores_over_steps.png",
            "ablation.png", "importance.png", "heads.png", "pruning.png", "composition.png"]
    missing = [w for w in want if not is_png(os.path.join(out, w))]
    check("plot: loss, attention maps per layer, score, ablation and importance heatmaps, scores "
          "over steps, head study (induction)", p.returncode == 0 and not missing,
          f"missing {missing}; {p.stderr[-400:]}")
    test_vector_plots(run, sweep_dir)

    text_run = os.path.join(TMP, "text.h5")
    subprocess.run([harness.HARNESS, TINY_TEXT, "--set", f"output.path={text_run}", "--force"],
                   capture_output=True, timeout=60)
    out = os.path.join(TMP, "plots_text")
    p = script("plot", text_run, "-o", out)
    missing = [w for w in want[:2] + want[3:-1] if not is_png(os.path.join(out, w))]
    check("plot: a text run (token labels from /probe/labels) gives every PNG (one layer: no "
          "composition)", p.returncode == 0 and not missing
          and not os.path.exists(os.path.join(out, "composition.png")),
          f"missing {missing}; {p.stderr[-400:]}")
    test_axis_tokens(run, text_run)

    out = os.path.join(TMP, "plots_sweep")
    p = script("plot-sweep", sweep_dir, "-o", out)
    want = ["final_eval_loss.png", "eval_curves.png", "head_classes.png", "pruning_curves.png",
            "heads_needed.png"]
    missing = [w for w in want if not is_png(os.path.join(out, w))]
    check("plot-sweep: final loss vs heads, eval curves, head classes, pruning curves, heads "
          "needed",
          p.returncode == 0 and not missing, f"missing {missing}; {p.stderr[-400:]}")
    p = script("compare", sweep_dir)
    check("compare on a real sweep: a row per head count", p.returncode == 0
          and len(re.findall(r"^\| (1|2|4) \|", p.stdout, re.M)) == 3, p.stdout + p.stderr)
    # --tolerance: heads needed recomputed from every run's /prune curves, by hand here
    p = script("compare", sweep_dir, "--tolerance", "0.02")
    rows = [[c.strip() for c in l.strip().strip("|").split("|")] for l in p.stdout.splitlines()
            if re.match(r"\| \d", l)]
    header = [c.strip() for c in p.stdout.splitlines()[0].strip().strip("|").split("|")]
    ok = p.returncode == 0 and "heads needed" in header and len(rows) == 3
    for row in rows if ok else []:
        needed, total = [], None
        for run in sorted(os.listdir(sweep_dir)):
            if run.startswith(f"h{row[0]}_") and run.endswith(".h5"):
                with results.h5py.File(os.path.join(sweep_dir, run), "r") as f:
                    total = int(f["prune/delta_loss/heads_left"][0])
                    per = []
                    for c in ("importance", "delta_loss"):
                        left, loss = f[f"prune/{c}/heads_left"][()], f[f"prune/{c}/eval_loss"][()]
                        k = 0  # the first point beyond 2% of the unpruned loss
                        while k + 1 < len(loss) and loss[k + 1] <= loss[0] * 1.02:
                            k += 1
                        per.append(int(left[k]))
                    needed.append(min(per))
        want = f"{np.mean(needed):.1f} ± {np.std(needed, ddof=1):.1f} of {total}"
        ok &= row[header.index("heads needed")] == want
    check("compare --tolerance 0.02: heads needed recomputed from each run's pruning curves "
          "(mean ± std over seeds)", ok, p.stdout + p.stderr)


# ------------------------------------------------------------------------------------------------
# bench: one quick config end to end (the timings themselves are not tested: shared machines)


def test_bench():
    import json
    gemm_peak = os.path.join(os.path.dirname(os.path.realpath(harness.HARNESS)), "gemm_peak")
    variant = "openblas" if os.path.exists("/usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3") else "default"
    md, js = os.path.join(TMP, "bench.md"), os.path.join(TMP, "bench.json")
    # a core type left in the caller's shell must not reach PyTorch's OpenBLAS
    env = dict(os.environ, OPENBLAS_CORETYPE="Prescott", OPENBLAS_L2_SIZE="64")
    p = script("bench", "--harness", harness.HARNESS, "--gemm-peak", gemm_peak, "--quick", "--only", "D128 H1",
               "--torch", variant, "--markdown", md, "--json", js, env=env, timeout=600)
    check(f"bench --quick --only 'D128 H1' --torch {variant}: exit 0", p.returncode == 0, p.stdout[-800:] + p.stderr[-800:])
    if p.returncode != 0:
        return
    with open(js) as f:
        record = json.load(f)
    runs = record["runs"]
    ok = len(runs) == 1 and runs[0]["config"] == "D128 H1 T64 B32"
    check("bench: one run, the selected config", ok, str([r.get("config") for r in runs]))
    if not ok:
        return
    h, t = runs[0]["harness"]["median_s"], runs[0][f"torch_{variant}"]["median_s"]
    check("bench: both sides measured (median step > 0, max RSS > 0)",
          h > 0 and t > 0 and runs[0]["harness"]["max_rss_kib"] > 0 and runs[0][f"torch_{variant}"]["max_rss_kib"] > 0,
          json.dumps(runs[0])[:400])
    hrun = runs[0]["harness"]["runs"][0]
    check("bench: the harness's MiB is its training peak (the run's `memory:` line), at most the whole "
          "run's max RSS", 0 < hrun["max_rss_kib"] <= hrun["run_max_rss_kib"], json.dumps(hrun)[:400])
    want_malloc = "jemalloc" if os.path.exists("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2") else "glibc"
    loaded = [r.get("malloc") for r in runs[0][f"torch_{variant}"]["runs"]]
    with open(md) as f:
        text = f.read()
    check(f"bench: PyTorch ran on the allocator the header names ({want_malloc} here)",
          record.get("torch_malloc") == want_malloc and loaded and all(m == want_malloc for m in loaded)
          and f"PyTorch's allocator (--torch-malloc): {want_malloc}" in text, str(loaded) + text[:1500])
    row = re.search(r"^\| D128 H1 T64 B32 +\| +" + variant + r" +\| +([\d.]+) +\| +([\d.]+) +\| +([\d.]+)x \|", text, re.M)
    check("bench: the table row's ratio is PyTorch ms / harness ms, as printed",
          row is not None and abs(float(row.group(3)) - float(row.group(1)) / float(row.group(2))) < 0.02 * float(row.group(3)) + 0.01,
          text[-1500:])
    isa = subprocess.run([harness.HARNESS, "--version"], capture_output=True, text=True).stdout
    isa = re.search(r"^kernels: (\S+)", isa, re.M)
    check("bench: the header and the JSON name the ISA path that `harness --version` reports",
          isa is not None and record.get("isa") == isa.group(1) and f"**{isa.group(1)}**" in text
          and record["cpu"]["name"] in text and "L2 " in text, text[:1200])
    blas = record.get("blas", {}).get(variant, {})
    if "openblas" in variant:
        want = {"AVX2": "Haswell", "portable": "Nehalem"}.get(record.get("isa")) if record.get("blas_pin") else None
        check("bench: OpenBLAS's kernels are reported, not those of OPENBLAS_CORETYPE in the caller's shell"
              + (f" (pinned to {want}: a {record.get('isa')} harness on a CPU with wider vectors)" if want else ""),
              blas.get("corename") not in (None, "Prescott") and (want is None or blas["corename"] == want)
              and blas.get("config", "") in text, json.dumps(blas))
    one = runs[0].get("harness_1t", {}).get("median_s")
    check("bench: a one-thread column (harness at 1 thread, speed-up = 1-thread time / 2-thread time)",
          one is not None and one > 0 and re.search(r"^\| D128 H1 T64 B32 .*\| +[\d.]+ \| +([\d.]+)x \|$", text, re.M)
          is not None, text[:2000])
    check("bench: the GEMM peak, GFLOP/s and % peak are reported",
          "FP32 GEMM peak" in text and re.search(r"^\| D128 H1 T64 B32 +\| +[\d.]+ \| +\d+k \| +\d+ \| +\d+% \|", text, re.M) is not None,
          text[:1500])


def test_bench_scaling_table():
    """The scaling tables' columns from a made-up entry (no run): the speed ratio, PyTorch's max RSS
    over the harness's, and the load average beside the figures."""
    import contextlib
    import io
    from heads.bench import bench_report
    entry = {"config": "T1024 B8", "B": 8, "T": 1024, "flops": 4e9,
             "harness": {"median_s": 0.5, "max_rss_kib": 200 * 1024},
             "torch_openblas512": {"median_s": 2.0, "max_rss_kib": 900 * 1024}, "load": [3.04, 12.5]}
    rep = bench_report.Report()
    with contextlib.redirect_stdout(io.StringIO()):
        bench_report.report_scaling(rep, [entry], ["openblas512"], 100.0)
    header = next((line for line in rep.md if line.startswith("| config")), "")
    row = next((line for line in rep.md if line.startswith("| T1024 B8")), "")
    cells = [c.strip() for c in row.strip("|").split("|")]
    names = [c.strip() for c in header.strip("|").split("|")]
    got = dict(zip(names, cells))
    check("bench scaling table: ratio 4.0x (PyTorch ms / harness ms), MiB ratio 4.5x (900 / 200 MiB), "
          "load avg 3.0 -> 12.5 beside them",
          got.get("ratio") == "4.0x" and got.get("MiB ratio") == "4.5x" and got.get("load avg") == "3.0 -> 12.5"
          and got.get("harness MiB") == "200" and got.get("torch[openblas512] MiB") == "900", "\n".join(rep.md))


def main():
    keep = "--keep" in sys.argv[1:]
    if harness_missing(harness.HARNESS):
        return 1
    t0 = time.time()
    run_check("grid expansion", test_grid)
    run_check("config keys from the harness, sweep --set", test_keys_and_set)
    sweep_dir = []
    run_check("sweep and summary", lambda: sweep_dir.append(test_sweep_and_summary()))
    run_check("failing runs", test_failures)
    run_check("resume after kill", test_resume)
    run_check("statistics", test_statistics)
    run_check("bench", test_bench)
    run_check("bench scaling table", test_bench_scaling_table)
    if sweep_dir:
        run_check("plots", lambda: test_plots(sweep_dir[0]))
    else:
        check("plots", False, "no sweep to plot")
    return end_suite(TMP, keep, t0)


if __name__ == "__main__":
    sys.exit(main())
