#!/usr/bin/python3
# suite: every figure's titles and labels fit (scripts/plot, plot-sweep, the report; long names, E > D)
"""No clipped title or label in any figure, at the default sizes, for long run and experiment
names and for layouts wider than d_model: measured on the figures themselves (tests/
figurecheck.py: a PNG's edges, the SVG's texts with DejaVu Sans's own metrics, the report's
charts by the browser), not by the code that laid them out.

usage: /usr/bin/python3 tests/test_figures.py [--keep]
  --keep   keep the temporary directory (runs, figures) and print its path

Needs a built harness (`make`, or $HARNESS), gnuplot and PIL; the report's checks need chromium,
chromium-driver and python3-selenium (else "skipped" for them). Tiny runs (d_model 16): about
half a minute. Checks, one line each:
  the check itself   a title cut by the canvas is found (PNG edge and SVG text), and one that
                     fits is not; heads.plots.gnuplot.text_px never under-measures DejaVu Sans
  scripts/plot       every figure of a long-named run of 4 heads of 8 over d_model 16 (E 32, 2
                     layers, patching) and of a 1-layer run of 2 heads of 16, in PNG and SVG;
                     scores_over_steps's x axis ends at the last snapshot
  plot-sweep         every figure of a long-named points sweep (layouts by a grid key, so
                     every label carries a group) and of a train.head_l0 sweep (l0_curve)
  the report         every chart of the sweep's page and of a run's page: texts inside the
                     chart, none on another
"""
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.join(ROOT, "python"))
import figurecheck  # noqa: E402
from checks import script, write, browser, check, end_suite, harness_missing, open_page, run_check  # noqa: E402

PY = "/usr/bin/python3"
HARNESS = os.environ.get("HARNESS", os.path.join(ROOT, "build", "harness"))
KEEP = "--keep" in sys.argv
TMP = tempfile.mkdtemp(prefix="test_figures.")
LONG = "h4_dh8_E32_over_d16_lr0.03_wd0.1_warmup4_posrope_and_more_words_s12345"


TINY = write(os.path.join(TMP, "tiny.yaml"), """\
model: {vocab_size: 16, d_model: 16, n_head: 4, d_head: 8, n_layer: 2, seq_len: 16}
train: {steps: 40, batch_size: 8, lr: 3.0e-2, warmup_steps: 4, seed: 0, threads: 1}
data: {task: induction, min_period: 2, max_period: 6}
output: {log_every: 10, eval_every: 10, eval_batches: 2, attn_every: 20, probes: 2}
""")
TEXT = write(os.path.join(TMP, "text.yaml"), """\
model: {vocab_size: 256, d_model: 16, n_head: 2, d_head: 16, n_layer: 1, seq_len: 24}
train: {steps: 30, batch_size: 4, lr: 1.0e-2, warmup_steps: 2, threads: 1}
data: {task: text, path: /usr/share/common-licenses/GPL-3}
output: {log_every: 5, eval_every: 10, eval_batches: 1, attn_every: 10, probes: 1,
         probe_text: ["The cat sat on the mat because it was tired"]}
""")


def train(config, name, *sets):
    out = os.path.join(TMP, name + ".h5")
    cmd = [HARNESS, config, "--set", f"output.path={out}", "--overwrite"]
    for s in sets:
        cmd += ["--set", s]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    check(f"{name[:40]}…: trained", p.returncode == 0, p.stderr[-400:])
    return out


def check_figures(what, png_dir, svg_dir, expect=()):
    """figurecheck.problems of every PNG in png_dir with its SVG in svg_dir: one check each."""
    names = sorted(n[:-4] for n in os.listdir(png_dir) if n.endswith(".png"))
    missing = [e for e in expect if e not in names]
    check(f"{what}: the figures are there ({', '.join(names)})", names and not missing,
          f"missing {missing}")
    for stem in names:
        svg = os.path.join(svg_dir, stem + ".svg")
        problems = figurecheck.problems(os.path.join(png_dir, stem + ".png"),
                                        svg if os.path.exists(svg) else None)
        check(f"{what}: {stem}: every title and label inside the figure, none on another",
              not problems and os.path.exists(svg), "; ".join(problems[:6]) or f"no {svg}")


def test_the_check():
    """figurecheck finds a cut title (so its passes below mean something), and text_px, the
    measure the figures are laid out with, never says a text is narrower than it is."""
    from PIL import ImageFont
    from heads.plots import gnuplot
    for fits, title in ((False, "a title far too long for a figure of 300 pixels, cut at both ends"),
                        (True, "short")):
        paths = {}
        for fmt in ("png", "svg"):
            paths[fmt] = os.path.join(TMP, f"probe_{fits}.{fmt}")
            gnuplot.run_gnuplot(f"{gnuplot.terminal_for(paths[fmt], 300, 200)}\n"
                                f"set output {gnuplot.gp_string(paths[fmt])}\n"
                                f"set title {gnuplot.gp_string(title)} font ',12'\n"
                                "plot x notitle\n", paths[fmt], TMP)
        png, svg = figurecheck.png_edges(paths["png"]), figurecheck.text_problems(paths["svg"])
        check(f"figurecheck: a title that {'fits' if fits else 'is cut by the canvas'} is "
              f"{'passed' if fits else 'found, in the PNG and in the SVG'}",
              (not png and not svg) if fits else (png and svg), f"{png} {svg}")
    font = ImageFont.truetype(figurecheck.FONT, size=40)
    texts = ["h4_dh32_lr0.003_n_kv_head2: pattern scores", "Δloss ± 0.05 × ∂L/∂gate …",
             "WWWMMM iiilll 1234567890", "induction: attention to the token after an earlier copy"]
    ratios = [gnuplot.text_px(t, 30) / font.getlength(t) for t in texts]  # 30 pt = 40 px
    check("heads.plots.gnuplot.text_px: never narrower than FreeType's DejaVu Sans, at most 8% wider",
          all(1.0 <= r <= 1.08 for r in ratios), str(ratios))


def test_run_figures(d):
    wide = train(TINY, LONG)
    one = train(TEXT, "h2_dh16_E32_L1_text_run_with_a_long_name_too_s0")
    for path, expect in ((wide, ["loss", "attn_layer0", "attn_layer1", "scores", "heads",
                                 "pruning", "composition", "patching", "dla", "copying"]),
                         (one, ["loss", "attn_layer0", "scores", "scores_over_steps", "heads"])):
        stem = os.path.basename(path)[:-3]
        png, svg = os.path.join(TMP, stem + "_png"), os.path.join(TMP, stem + "_svg")
        p = script("plot", path, "-o", png)
        q = script("plot", path, "-o", svg, "--format", "svg")
        check(f"plot {stem[:30]}…: exit 0 in PNG and SVG", p.returncode == q.returncode == 0,
              p.stderr[-300:] + q.stderr[-300:])
        check_figures(f"plot {stem[:24]}…", png, svg, expect)
        if "scores_over_steps" in expect:  # its x axis: the steps of the snapshots, no further
            import h5py
            with h5py.File(path, "r") as f:
                last = int(f["attn/step"][-1])
            texts, _ = figurecheck.svg_texts(os.path.join(svg, "scores_over_steps.svg"))
            tics = [int(t) for t, _ in texts if t.isdigit()]
            check(f"plot {stem[:24]}…: scores_over_steps's x axis ends at the last snapshot (step {last})",
                  tics and max(tics) == last, f"tics up to {max(tics or [0])}")
    if d is not None:
        p = script("report", wide)
        page = wide[:-3] + ".html"
        if check("report RUN.h5: the page", p.returncode == 0 and open_page(d, page), p.stderr[-300:]):
            problems = d.execute_script(figurecheck.REPORT_TEXTS_JS)
            check("report of the long-named run: every chart's texts inside it, none on another",
                  not problems, "; ".join(problems[:6]))


def test_sweep_figures(d):
    res = os.path.join(TMP, "results")
    name = "layouts_of_attention_heads_with_a_rather_long_experiment_name"
    exp = write(os.path.join(TMP, name + ".yaml"), f"base: {TINY}\n"
                "points: [{n_head: 1, d_head: 0}, {n_head: 2, d_head: 0}, {n_head: 4, d_head: 0}, "
                "{n_head: 4, d_head: 8}]\ngrid: {train.warmup_steps: [2, 4]}\nseeds: 2\n")
    p = script("sweep", exp, "-j", "2", "--threads", "1", "--results", res)
    if not check("a long-named points sweep runs", p.returncode == 0, p.stderr[-400:]):
        return
    directory = os.path.join(res, name)
    png, svg = os.path.join(TMP, "sweep_png"), os.path.join(TMP, "sweep_svg")
    p = script("plot-sweep", directory, "-o", png)
    q = script("plot-sweep", directory, "-o", svg, "--format", "svg")
    check("plot-sweep: exit 0 in PNG and SVG", p.returncode == q.returncode == 0,
          p.stderr[-300:] + q.stderr[-300:])
    check_figures("plot-sweep", png, svg, ["final_eval_loss", "eval_curves", "head_classes",
                                           "pruning_curves", "heads_needed"])
    if d is not None:
        p = script("report", directory)
        page = os.path.join(directory, "report.html")
        if check("report SWEEP_DIR: the page", p.returncode == 0 and open_page(d, page),
                 p.stderr[-300:]):
            problems = d.execute_script(figurecheck.REPORT_TEXTS_JS)
            check("the sweep's report: every chart's texts inside it, none on another",
                  not problems, "; ".join(problems[:6]))

    name = "learned_gates_of_the_heads_with_another_long_experiment_name"
    exp = write(os.path.join(TMP, name + ".yaml"), f"base: {TINY}\n"
                "grid: {train.head_l0: [0, 0.01]}\nseeds: 2\n")
    p = script("sweep", exp, "-j", "2", "--threads", "1", "--results", res)
    if check("a train.head_l0 sweep runs", p.returncode == 0, p.stderr[-400:]):
        png, svg = os.path.join(TMP, "l0_png"), os.path.join(TMP, "l0_svg")
        directory = os.path.join(res, name)
        p = script("plot-sweep", directory, "-o", png)
        q = script("plot-sweep", directory, "-o", svg, "--format", "svg")
        check("plot-sweep of the gates: exit 0 in PNG and SVG", p.returncode == q.returncode == 0,
              p.stderr[-300:] + q.stderr[-300:])
        check_figures("plot-sweep (gates)", png, svg, ["l0_curve"])


def main():
    t0 = time.time()
    if harness_missing(HARNESS):
        return 1
    os.environ["HARNESS"] = HARNESS
    try:
        import PIL  # noqa: F401
    except ImportError:
        print("skipped: PIL (python3-pil) is not installed: the figures cannot be measured")
        print("0 passed, 0 failed")
        return 0
    d, why = browser()
    if d is None:
        print(f"skipped: the report's checks ({why})")
    try:
        run_check("the check itself", test_the_check)
        run_check("scripts/plot", lambda: test_run_figures(d))
        run_check("plot-sweep", lambda: test_sweep_figures(d))
    finally:
        if d is not None:
            d.quit()
    return end_suite(TMP, KEEP, t0)


if __name__ == "__main__":
    sys.exit(main())
