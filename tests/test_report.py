#!/usr/bin/python3
# suite: the HTML report in headless Chromium
"""Tests of scripts/report in a real browser (Debian's chromium, chromium-driver, python3-selenium).

usage: /usr/bin/python3 tests/test_report.py [--keep]
       /usr/bin/python3 tests/test_report.py --screenshot RUN.h5 OUT.png [SECTION]
                                                   (the README's picture; docs/report.md's of a section)
  --keep   keep the temporary directory (runs, reports, screenshots) and print its path

Needs a built harness (`make`). Tiny runs (d_model 16, 40 steps) keep it to well under a minute
besides the browser's start. Prints "ok - ..." / "FAIL - ..." per check, then "N passed, M
failed". Where chromium, its driver or selenium is missing (make test installs them through
scripts/install-deps) it prints one line "skipped: no chromium (...)" and runs the browser-free
checks only. Checks:
  page data    8-bit maps within 1/510 of the file's (shown to 4 decimals: checked in the page
               within 1/510 + 0.00005); float32 kept when values leave [0, 1];
               formation steps on hand-made scores; token labels of every task
  run page     opens from disk with no console error; selecting layer, head, probe and step and
               hovering a token shows the file's attention row (to the page's stated 8-bit
               precision), a second token moves the highlighted row (DOM and canvas pixels),
               the switch shows the column; small multiples carry every head's class; the head
               table holds the file's scores, ablation Δloss zeroed and mean-ablated and
               importance and sorts; the screenshot is not blank; the pruning section holds
               every point of both curves, the heads each step removed, heads needed and one
               head per layer as in /prune; the composition matrix every score to 4 decimals,
               the top pair, previous-token and induction heads labelled; the causal section's
               patching, ablation, DLA and copying grids as in the file, the heads carrying 80%
               of the patching effect (NumPy), the DLA parts and their sum, the metric's clean
               and corrupted values, the strongest paths drawn and listed (or why none), the
               head table's DLA, copying and patching columns
  step control a run with weight snapshots and their studies (test_over_training.py's config):
               the control lists /attn's and /study_steps' steps, the final one chosen; at a
               study's step, one in both and one of /attn's alone, the map row is the file's
               (/study_steps' or /attn's), the head table's class, induction score and Δloss and
               the K-composition matrix /study_steps/<step>'s (at /attn's alone: scores, no Δloss,
               and why); the slider's end is /heads; a run without snapshots says what is
               missing and `harness analyze RUN --steps all`
  layouts      a run per attention layout (MHA, GQA, MQA, RoPE, shortformer, no positions,
               output gate, sink, all switches together) and per task (two_source, text,
               tokens): each report opens without console errors, the probe's tokens as text in
               the strip and on the map's axes; pruning curves and composition scores, or the
               reason there are none (V only with rotary, none with the output gate)
  prune later  a run with output.prune_step 0 has no pruning section; `harness prune RUN.h5
               --step 0.1`, then the report shows it
  sweep page   the comparison table and its notes equal scripts/compare's (Welch p, Holm p,
               heads needed); every head count's pruning curve per criterion; heads needed of
               every seed; a link per run opens that run's page
  size         heads12's shapes (13 snapshots, 2 x 12 heads, 8 probes of 32): page under 5 MB
  bad input    a missing path, a file that is not HDF5, a future format_version, a directory
               without summary.h5, an output path that cannot be written: one line, exit 2, no
               page written
"""
import base64
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
import h5py  # noqa: E402
from checks import (browser, check, console_errors, end_suite, harness_missing,  # noqa: E402
                    open_page, run_check)
from heads.core import harness, tokens  # noqa: E402
from heads import results
from heads.read import pruning, textsum
from heads.read import steps as over_training
from heads.report import report_page, report_run

PY = "/usr/bin/python3"
SHOWN = 1 / 510 + 0.5e-4 + 1e-7  # the page's stated precision: 8-bit levels, shown to 4 decimals
TMP = tempfile.mkdtemp(prefix="test_report.")
TINY = """\
model: {vocab_size: 16, d_model: 16, n_head: 3, d_head: 4, n_layer: 2, seq_len: 16}
train: {steps: 40, batch_size: 4, lr: 1.0e-2, warmup_steps: 2, seed: 0, threads: 1}
data: {task: induction, min_period: 2, max_period: 6}
output: {log_every: 5, eval_every: 10, eval_batches: 1, attn_every: 10, probes: 3}
"""


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def harness_run(name, *sets, config=None):
    out = os.path.join(TMP, name + ".h5")
    cfg = config or write(os.path.join(TMP, "tiny.yaml"), TINY)
    cmd = [harness.HARNESS, cfg, "--force", "--set", f"output.path={out}"]
    for s in sets:
        cmd += ["--set", s]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise RuntimeError(f"harness {' '.join(sets)} failed: {p.stderr[-400:]}")
    return out


def report(target, *args):
    return subprocess.run([PY, os.path.join(ROOT, "scripts", "report"), target] + list(args),
                          capture_output=True, text=True, timeout=300)


def with_classes(run):
    """A copy of a tiny run whose /scores/class names a previous-token head in layer 0 and two
    induction heads in layer 1 (40 steps do not grow them), so the labels can be checked."""
    out = os.path.splitext(run)[0] + "_classes.h5"
    shutil.copy(run, out)
    with h5py.File(out, "r+") as f:
        c = f["scores/class"][()].astype(object)
        c[0, 1], c[1, 0], c[1, 2] = b"prev", b"induction", b"induction"
        f["scores/class"][...] = c
    textsum.reseal(out)  # labels set by hand, sealed as the harness seals its own
    return out


def page_of(run, page):
    """What `scripts/report RUN -o PAGE` does, in this process (no interpreter start per page)."""
    report_page.write(page, report_run.read_run(run))
    return page


# ------------------------------------------------------------------------------------------------
# browser-free: the page's data


def test_page_data():
    rng = np.random.default_rng(0)
    maps = rng.random((2, 1, 2, 1, 5, 5)).astype(np.float32)
    maps /= maps.sum(-1, keepdims=True)
    enc, b64, err = report_run.encode_maps(maps)
    q = np.frombuffer(base64.b64decode(b64), np.uint8)
    r, c = np.tril_indices(5)
    check("8-bit maps: lower triangles only, every value within 1/510 of the file's",
          enc == "u8" and q.size == 2 * 2 * 15 and err <= 1 / 510 + 1e-7
          and np.max(np.abs(q.reshape(2, 1, 2, 1, 15) / 255 - maps[..., r, c])) <= 1 / 510 + 1e-7,
          f"{enc} {q.size} {err}")
    maps[0, 0, 0, 0, 2, 1] = 1.5
    enc, b64, _ = report_run.encode_maps(maps)
    check("a value outside [0, 1] keeps the maps as float32",
          enc == "f32" and np.frombuffer(base64.b64decode(b64), "<f4").size == 60, enc)
    s = np.zeros((4, 2, 2))
    s[:, 1, 0] = [0.1, 0.3, 0.6, 0.9]   # crosses 0.5 at the third snapshot
    s[:, 1, 1] = [0.7, 0.8, 0.9, 0.9]   # above from the start: no formation step
    s[:, 0, 0] = [0.1, 0.6, 0.4, 0.3]   # crosses, then falls back: not formed at the end
    f = over_training.formation(np.array([0, 50, 100, 150]), {"induction": s, "prev": s * 0})
    check("formation step: first snapshot at or above 0.5 of heads that end above it, and the one before",
          f == {"induction": {"after": 50, "step": 100, "heads": [[1, 0, 50, 100]]}}, str(f))
    check("no formation steps with a single snapshot",
          over_training.formation(np.array([600]), {"induction": s[:1]}) == {})
    check("token labels: bytes, induction ids, two_source names, tokenizer pieces",
          tokens.token_labels("text", 256, [84, 32, 10]) == ["T", "␣", "↵"]
          and tokens.token_labels("induction", 64, [0, 5]) == ["BOS", "5"]
          and tokens.two_source_symbols(64) == 6
          and tokens.token_labels("two_source", 64, [0, 1, 2, 8, 14 + 6 * 2 + 3])
          == ["BOS", "=", "a0", "b0", "(2,3)"]
          and tokens.token_labels("tokens", 10, [0, 1, 2], ["▁the", "s"]) == ["␣the", "s", "2"],
          str(tokens.token_labels("two_source", 64, [0, 1, 2, 8, 29])))


# ------------------------------------------------------------------------------------------------
# the browser


def select(d, id_, value):
    from selenium.webdriver.support.ui import Select
    Select(d.find_element("id", id_)).select_by_value(str(value))


def hover(d, element):
    from selenium.webdriver.common.action_chains import ActionChains
    ActionChains(d).move_to_element(element).perform()


def token(d, pos):
    return d.find_element("css selector", f"#tokens .tok[data-pos='{pos}']")


def shown_weights(d):
    return d.execute_script(
        "return [...document.querySelectorAll('#tokens .tok')].map(t => "
        "t.dataset.weight === undefined ? null : parseFloat(t.dataset.weight))")


def not_blank(png_path):
    from PIL import Image
    im = Image.open(png_path).convert("RGB")
    colours = im.getcolors(1 << 20) or []
    return im.size[0] > 200 and len(colours) > 50


def test_run_page(d, run):
    page = os.path.join(TMP, "run.html")
    p = report(run, "-o", page)
    check("report RUN.h5 -o page: exit 0, says its size", p.returncode == 0 and "MB" in p.stdout,
          p.stderr)
    check("the page opens from disk and draws", open_page(d, page))
    check("no console error on load", not console_errors(d), str(console_errors(d)))
    with h5py.File(run, "r") as f:
        maps = f["attn/maps"][()]
        steps = f["attn/step"][()]
        scores = {k: f[f"scores/{k}"][()] for k in report_run.PATTERNS}
        delta, imp = f["heads/ablation_delta"][()], f["heads/importance"][()]
        delta_mean = f["heads/ablation_delta_mean"][()]
        classes = results.read_classes(f)
    S, L, H, P, T, _ = maps.shape
    layer, head, probe, si, q = 1, 2, 1, 1, 9
    select(d, "sel-layer", layer)
    select(d, "sel-head", head)
    select(d, "sel-probe", probe)
    select(d, "sel-step", int(steps[si]))  # the page's step control (steps.js), by step
    hover(d, token(d, q))
    got = shown_weights(d)
    want = maps[si, layer, head, probe, q]
    ok = all(got[j] is not None and abs(got[j] - want[j]) <= SHOWN for j in range(q + 1)) \
        and all(g is None for g in got[q + 1:])
    precision = d.find_element("id", "precision").text
    check(f"layer {layer}, head {head}, probe {probe}, step {int(steps[si])}, hover token {q}: the "
          "token strip shows the file's row within 1/510 + 0.00005 (the page's stated "
          "precision: 8-bit levels within 1/510, shown to 4 decimals)",
          ok and "8-bit" in precision and "1/510" in precision and "4 decimals" in precision,
          f"page {got[:q + 1]} file {want[:q + 1].round(4)}")
    canvas = d.find_element("id", "map")
    check("the map canvas says which head, probe, step and row it shows",
          [canvas.get_attribute(f"data-{k}") for k in ("layer", "head", "probe", "step", "focus")]
          == [str(x) for x in (layer, head, probe, int(steps[si]), q)])
    row_px = lambda row: d.execute_script(  # the colour at the left edge of a row of the canvas
        "const c = document.getElementById('map'); const cell = c.height / arguments[1];"
        "const y = Math.floor(arguments[0] * cell + cell / 2);"
        "return Array.from(c.getContext('2d').getImageData(1, y, 1, 1).data);", row, T)
    orange = lambda px: px[0] > 200 and 90 < px[1] < 190 and px[2] < 80
    before = (orange(row_px(q)), orange(row_px(4)))
    hover(d, token(d, 4))
    after = (orange(row_px(q)), orange(row_px(4)))
    check("hovering another token moves the highlighted row (data-focus and the canvas outline)",
          canvas.get_attribute("data-focus") == "4" and before == (True, False)
          and after == (False, True), f"{before} {after}")
    d.find_element("id", "mode").click()
    hover(d, token(d, 3))
    got = shown_weights(d)
    col = maps[si, layer, head, probe, :, 3]
    check("switched: the strip shows the attention token 3 receives (the file's column)",
          all(got[j] is None for j in range(3))
          and all(abs(got[j] - col[j]) <= SHOWN for j in range(3, T)),
          f"{got} {col.round(4)}")
    d.find_element("id", "mode").click()
    caps = [e.text for e in d.find_elements("css selector", "#multiples figcaption")]
    select(d, "sel-step", int(steps[-1]))
    caps = [e.text for e in d.find_elements("css selector", "#multiples figcaption")]
    check("small multiples: every head of the layer, labelled with its class and score",
          len(caps) == H and all(f"head {h}: {classes[layer][h]}" in caps[h] for h in range(H)),
          str(caps))
    cols, cells = head_table(d)
    ok = len(cells) == L * H
    for r in cells if ok else []:
        l, h = int(r[0]), int(r[1])
        ok &= r[cols.index("class")] == classes[l][h]
        ok &= abs(float(r[cols.index("induction")]) - scores["induction"][-1, l, h]) <= 5e-5
        for key, want in (("ablation_delta", delta[l, h]), ("ablation_delta_mean",
                                                             delta_mean[l, h]),
                          ("importance", imp[l, h])):
            ok &= abs(float(r[cols.index(key)]) - want) <= 1e-6 + 1e-5 * abs(want)
    check("head table: class, scores, Δloss zeroed and mean-ablated (side by side), importance "
          "of every head as in the file", ok and cols.index("ablation_delta_mean")
          == cols.index("ablation_delta") + 1, str(cells[:3]))
    th = d.find_element("css selector", "#head-table th[data-key='ablation_delta']")
    th.click()
    th.click()
    first = d.execute_script("return document.querySelector('#head-table tbody tr')"
                             ".children[arguments[0]].dataset.value", cols.index("ablation_delta"))
    check("head table sorts (ablation Δloss, descending: the largest first)",
          th.get_attribute("aria-sort") == "descending"
          and abs(float(first) - delta.max()) <= 1e-6 + 1e-5 * abs(delta.max()))
    check("loss chart: train and eval lines",
          len(d.find_elements("css selector", "#loss-chart polyline")) == 2)
    shot = os.path.join(TMP, "run.png")
    d.save_screenshot(shot)
    check("the screenshot is not blank", not_blank(shot))
    check("no console error after the interactions", not console_errors(d), str(console_errors(d)))
    check_pruning(d, run)
    check_composition(d, run)
    check_causal(d, run)
    check("no console error after the head study's interactions", not console_errors(d),
          str(console_errors(d)))


def check_causal(d, run):
    """The causal section against the file: the patching, ablation, DLA and copying grids cell by
    cell, the heads carrying 80% (a NumPy loop), the DLA parts and their sum, the metric's values,
    the strongest paths drawn and listed (or the note that there are none); the head table's DLA,
    copying and patching columns."""
    with h5py.File(run, "r") as f:
        grids = {"causal-patching": f["patching/head_out"][()], "causal-ablation": f["heads/ablation_delta"][()],
                 "causal-dla": f["dla/head"][()], "causal-copying": f["scores/copying"][()]}
        logit, attrs = float(f["dla/logit"][0]), dict(f["patching"].attrs)
        paths = {k: f[f"patching/{k}"][()] for k in ("path_q", "path_k", "path_v") if f"patching/{k}" in f}
        columns = {"dla": grids["causal-dla"], "copying": grids["causal-copying"],
                   "patching": grids["causal-patching"]}
    worst = 0.0
    for id_, want in grids.items():
        cells = d.execute_script(f"return [...document.querySelectorAll('#{id_} td')].map(td => "
                                 "[td.parentElement.dataset.layer, td.dataset.head, td.dataset.value])")
        ok = len(cells) == want.size
        worst = max([worst] + [abs(float(v) - want[int(l), int(h)]) for l, h, v in cells]) if ok else float("inf")
    check(f"causal: patching, ablation, DLA and copying grids hold the file's values (worst {worst:.1e})",
          worst <= 1e-4)
    a = sorted(np.abs(grids["causal-patching"]).ravel(), reverse=True)
    want = next(k + 1 for k in range(len(a)) if sum(a[:k + 1]) >= 0.8 * sum(a) * (1 - 1e-12))
    got = d.find_element("id", "causal-carrying").get_attribute("data-value")
    check(f"causal: the heads carrying 80% of the patching effect ({got}) = a NumPy count", int(got) == want)
    parts = [float(v[0]) for v in dom_values(d, "#dla-parts td[data-value]")]
    check(f"causal: the DLA parts table adds up to its last row, the file's logit {logit:.4f}",
          abs(sum(parts[:-1]) - parts[-1]) <= 1e-4 and abs(parts[-1] - logit) <= 1e-6, str(parts))
    metric = attrs["metric"].decode() if isinstance(attrs["metric"], bytes) else attrs["metric"]
    shown = [float(v[0]) for v in dom_values(d, "#causal-metric span[data-value]")]
    check(f"causal: the metric ({metric}) with its clean and corrupted values",
          len(shown) == 2 and np.allclose(shown, [attrs[f"clean_{metric}"], attrs[f"corrupt_{metric}"]], atol=1e-6),
          str(shown))
    if paths:
        edges = sorted((abs(float(v)) for a in paths.values() for v in a[np.isfinite(a)]), reverse=True)[:10]
        drawn = d.find_elements("css selector", "#paths-graph line")
        listed = sorted((abs(float(v[0])) for v in dom_values(d, "#paths-table td[data-value]")), reverse=True)
        check(f"causal: the {len(listed)} strongest path-patching edges drawn and listed",
              len(drawn) == len(listed) == len(edges) and np.allclose(listed, edges, atol=1e-6))
    else:
        check("causal: no path patching in the file, and the page says so",
              "Path patching is absent" in d.find_element("id", "paths-absent").text)
    cols, cells = head_table(d)
    ok = all(k in cols for k in columns)
    for r in cells if ok else []:
        l, h = int(r[0]), int(r[1])
        ok &= all(abs(float(r[cols.index(k)]) - v[l, h]) <= 1e-4 for k, v in columns.items())
    check("head table: DLA, copying and patching effect of every head as in the file", ok and len(cells) > 0)


def head_table(d):
    """(column keys, [[data-value of each cell] per row]) of the head table."""
    cells = d.execute_script(
        "return [...document.querySelectorAll('#head-table tbody tr')].map(tr => "
        "[...tr.children].map(td => td.dataset.value))")
    return [th.get_attribute("data-key") for th in d.find_elements("css selector", "#head-table th")], cells


def dom_values(d, selector, attrs=("value",)):
    """[[data-* of each attrs] for every element matching selector]."""
    return d.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map(e => arguments[1].map(a => "
        "e.dataset[a]))", selector, list(attrs))


def hidden_cells(d, selector):
    """The cells matching selector that something else covers once scrolled into view (e.g. a
    sticky header over a table's first row): [their text]."""
    return d.execute_script(
        "return [...document.querySelectorAll(arguments[0])].filter(td => {"
        " td.scrollIntoView({block: 'center'}); const r = td.getBoundingClientRect();"
        " const e = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);"
        " return !(e && (e === td || td.contains(e))); }).map(td => td.textContent)", selector)


def check_pruning(d, run):
    """The pruning section against /prune: every point of both curves, the heads each step
    removed, heads needed, one head per layer."""
    with h5py.File(run, "r") as f:
        curves = pruning.read_curves(f)
        order = {c: f[f"prune/{c}/order"][()] for c in curves}
        H = int(f["config"].attrs["n_head"])
        one = {k: f[f"prune/one_head_per_layer/{k}"][()] for k in
               ("delta_loss", "best_head", "best_delta_loss")}
    ok, why = len(curves) == 2, []
    for c, (left, loss) in curves.items():
        got = [float(v) for (v,) in dom_values(d, f"#prune-table td[data-criterion='{c}'][data-value]")]
        ok &= len(got) == len(loss) and all(abs(g - w) <= 1e-12 * abs(w) for g, w in zip(got, loss))
        chips = dom_values(d, f"#prune-table td.chips[data-criterion='{c}'] .chip",
                           ("layer", "head"))
        removed = [int(l) * H + int(h) for l, h in chips]
        ok &= removed == [int(k) for k in order[c][:len(removed)]] and len(removed) == left[0]
        needed = dom_values(d, f"#prune-needed li[data-criterion='{c}']", ("needed",))
        ok &= needed == [[str(pruning.heads_needed(left, loss))]]
        why.append(f"{c}: page {got[:3]} file {list(loss[:3])}, removed {removed[:4]}, {needed}")
    check("pruning section: every point of both curves (float64, as in the file), the heads "
          "each step removed in the file's order, heads needed within 5%", ok, "; ".join(why))
    check("pruning chart: a line per criterion",
          len(d.find_elements("css selector", "#prune-chart polyline")) == 2)
    rows = dom_values(d, "#one-head-table tr[data-layer] td[data-value]")
    L = len(one["best_head"])
    vals = [float(v) for (v,) in rows]
    best = dom_values(d, "#one-head-table tr[data-layer] .chip", ("layer", "head"))
    check("one head per layer: the best head and its Δloss, every head kept alone, as in the file",
          len(vals) == L * (H + 1) and best == [[str(l), str(int(one["best_head"][l]))]
                                                 for l in range(L)]
          and all(abs(vals[l * (H + 1)] - one["best_delta_loss"][l]) <= 1e-12 for l in range(L))
          and all(abs(vals[l * (H + 1) + 1 + h] - one["delta_loss"][l, h]) <= 1e-6
                  for l in range(L) for h in range(H)), f"{vals} {best}")
    covered = hidden_cells(d, "#one-head-table tr[data-layer] td:first-child")
    check("one head per layer: every layer's row visible (no sticky header over the first row)",
          not covered, f"covered rows: {covered}")


def check_composition(d, run):
    """The composition section against /circuits, for K- and then Q-composition: every cell to the
    page's 4 decimals, the top pair, previous-token and induction heads labelled."""
    with h5py.File(run, "r") as f:
        comp = {k: f[f"circuits/{k}"][()] for k in ("k_composition", "q_composition")}
        base = f["circuits/k_composition"].attrs["random_baseline"]
        classes = results.read_classes(f)
    L, H = comp["k_composition"].shape[:2]
    for kind in ("k_composition", "q_composition"):
        select(d, "sel-composition", kind)
        cells = d.execute_script(
            "return [...document.querySelectorAll('#composition-grid tr[data-later]')].map(tr =>"
            "[tr.dataset.later, [...tr.querySelectorAll('td')].map(td => [td.dataset.earlier, "
            "td.dataset.value])])")
        ok = len(cells) == (L - 1) * H
        for later, row in cells if ok else []:
            b, hb = map(int, later.split(","))
            ok &= len(row) == (L - 1) * H
            for earlier, v in row:
                a, ha = map(int, earlier.split(","))
                want = comp[kind][b, hb, a, ha]
                ok &= (v == "") if a >= b else abs(float(v) - want) <= 5e-5 + 1e-7
        check(f"{kind}: the later × earlier matrix holds the file's scores to 4 decimals (no "
              "score where the earlier head is not earlier)", ok, str(cells[:1]))
    select(d, "sel-composition", "k_composition")
    s = np.where(np.isfinite(comp["k_composition"]), comp["k_composition"], -1)
    b, hb, a, ha = np.unravel_index(np.argmax(s), s.shape)
    top = d.find_element("css selector", "#composition-top tr[data-later]")
    check("the highest K-composition pair first, with the random baseline beside it",
          top.get_attribute("data-later") == f"{b},{hb}"
          and top.get_attribute("data-earlier") == f"{a},{ha}"
          and f"{base:.4f}" in d.find_element("id", "composition-baseline").text,
          f"{top.get_attribute('data-later')} {top.get_attribute('data-earlier')} vs {b},{hb} {a},{ha}")
    names = d.execute_script("return [...document.querySelectorAll('#composition-grid th .chip')]"
                             ".map(c => [c.dataset.layer, c.dataset.head, c.textContent])")
    tags = {"prev": " prev", "induction": " ind"}
    check("composition: every head named, previous-token and induction heads labelled",
          len(names) == 2 * (L - 1) * H and {"L0H1 prev", "L1H0 ind", "L1H2 ind"} <= {
              n[2] for n in names} and all(
              text == f"L{l}H{h}" + tags.get(classes[int(l)][int(h)], "") for l, h, text in names),
          str(names[:6]))
    covered = hidden_cells(d, "#composition-grid tr[data-later] > :first-child")
    check("composition matrix: every row visible (no sticky header over the first row)",
          not covered, f"covered rows: {covered}")


SNAPSHOTS = """\
model: {vocab_size: 16, d_model: 48, n_head: 4, n_layer: 2, seq_len: 24}
train: {steps: 600, batch_size: 16, lr: 3.0e-3, warmup_steps: 10, seed: 0, threads: 1}
data: {task: induction, min_period: 3, max_period: 8}
output: {log_every: 10, eval_every: 10, eval_batches: 2, attn_every: 40, probes: 4,
         snapshots: "log:50", snapshot_study: true, patch_batches: 0, prune_step: 0}
"""  # tests/test_over_training.py's run: its induction heads form between two stored steps


def near(shown, want):
    """A head-table value (data-value text) equals the file's float32 (the page keeps 6 decimals)."""
    return abs(float(shown) - want) <= 1e-6 + 1e-5 * abs(want)


def at_step(d, step):
    """Choose step in the step control: whether the head table then says it shows that step."""
    select(d, "sel-step", step)
    return d.find_element("id", "head-step").get_attribute("data-step") == str(step)


def test_steps(d, tiny):
    """The step control (steps.js) over a run with weight snapshots and their studies: at a step
    the page's map row, head table (class, induction score, Δloss) and K-composition are the
    /study_steps/<step> datasets (maps: /attn's where /attn has the step); at a step /attn has
    alone, the maps and scores follow and the study's columns are empty, saying why; the slider
    returns to the final model. A run without snapshots says what is missing and the command."""
    run = harness_run("snapshots", config=write(os.path.join(TMP, "snapshots.yaml"), SNAPSHOTS))
    page = page_of(run, os.path.join(TMP, "snapshots.html"))
    check("a run with snapshot studies: the page opens without console errors",
          open_page(d, page) and not console_errors(d), str(console_errors(d)))
    with h5py.File(run, "r") as f:
        attn = [int(s) for s in f["attn/step"][()]]
        studied = sorted(int(s) for s in f["study_steps"])
        options = [o.get_attribute("value") for o in d.find_elements("css selector", "#sel-step option")]
        check("the step control lists /attn's and /study_steps' steps, the final one chosen",
              options == [str(s) for s in sorted(set(attn) | set(studied))]
              and d.find_element("id", "sel-step").get_attribute("value") == str(attn[-1])
              and d.find_element("id", "step-what").text == "final model", str(options))
        layer, head, probe, q = 1, 2, 1, 13
        select(d, "sel-layer", layer)
        select(d, "sel-head", head)
        select(d, "sel-probe", probe)
        for step in (100, 200, 560):  # a study's step alone, one in both, one of /attn's alone
            g = f[f"study_steps/{step}"] if step in studied else None
            maps = g["attn/maps"][0] if g is not None else f["attn/maps"][attn.index(step)]
            chosen = at_step(d, step)
            hover(d, token(d, q))
            got, want = shown_weights(d), maps[layer, head, probe, q]
            check(f"step {step}: the map's row (layer {layer}, head {head}, probe {probe}, query {q}) is the "
                  f"file's {'/study_steps' if step not in attn else '/attn'} maps within the page's precision",
                  chosen and d.find_element("id", "map").get_attribute("data-step") == str(step)
                  and all(got[j] is not None and abs(got[j] - want[j]) <= SHOWN for j in range(q + 1)),
                  f"page {got[:q + 1]} file {want[:q + 1].round(4)}")
            cols, cells = head_table(d)
            score = g["scores/induction"][0] if g is not None else f["scores/induction"][attn.index(step)]
            if g is not None:
                delta, classes = g["heads/ablation_delta"][()], results.read_classes(g)
                comp = g["circuits/k_composition"][()]
                ok = len(cells) == delta.size
                for r in cells if ok else []:
                    l, h = int(r[0]), int(r[1])
                    ok &= near(r[cols.index("ablation_delta")], delta[l, h])
                    ok &= r[cols.index("class")] == classes[l][h]
                    ok &= abs(float(r[cols.index("induction")]) - score[l, h]) <= 5e-5
                check(f"step {step}: the head table's Δloss, class and induction score are "
                      f"/study_steps/{step}'s", ok, str(cells[:2]))
                grid = [c for c in d.execute_script(
                    "return [...document.querySelectorAll('#composition-grid td')].map(td => "
                    "[td.parentElement.dataset.later, td.dataset.earlier, td.dataset.value])")
                        if c[2] != ""]
                ok = len(grid) == np.isfinite(comp).sum() and d.find_element(
                    "id", "composition-step").get_attribute("data-step") == str(step)
                for b, e, v in grid if ok else []:
                    (lb, hb), (la, ha) = map(int, b.split(",")), map(int, e.split(","))
                    ok &= abs(float(v) - comp[lb, hb, la, ha]) <= 5e-5 + 1e-7
                check(f"step {step}: the composition matrix is /study_steps/{step}/circuits/"
                      "k_composition to 4 decimals", ok, str(grid[:3]))
            else:
                ok = len(cells) > 0 and all(
                    r[cols.index("ablation_delta")] == ""
                    and abs(float(r[cols.index("induction")]) - score[int(r[0]), int(r[1])]) <= 5e-5
                    for r in cells)
                why = d.find_element("id", "head-step").text, d.find_element("id", "composition-note").text
                check(f"step {step} (/attn's alone): the head table's scores are the file's, no Δloss, "
                      "and the page says why", ok and "no weight snapshot" in why[0]
                      and "No composition at step" in why[1], f"{cells[:2]} {why}")
        d.execute_script("const r = document.getElementById('step-range'); r.value = r.max;"
                         "r.dispatchEvent(new Event('input'))")
        cols, cells = head_table(d)
        delta = f["heads/ablation_delta"][()]
        check("the slider's last position is the final model (/heads, the step control's select follows)",
              d.find_element("id", "sel-step").get_attribute("value") == str(attn[-1])
              and all(near(r[cols.index("ablation_delta")], delta[int(r[0]), int(r[1])]) for r in cells)
              and len(cells) == delta.size)
    check("no console error after moving the step control", not console_errors(d), str(console_errors(d)))
    open_page(d, page_of(tiny, os.path.join(TMP, "no_snapshots.html")))
    options = [o.get_attribute("value") for o in d.find_elements("css selector", "#sel-step option")]
    with h5py.File(tiny, "r") as f:
        attn = [str(int(s)) for s in f["attn/step"][()]]
    missing = d.find_element("id", "steps-missing").text
    check("a run without snapshots: the control over /attn's steps, and the page says what is missing "
          "and how to get it", options == attn and "no weight snapshots" in missing
          and f"harness analyze {os.path.basename(tiny)} --steps all" in missing, f"{options} {missing}")


LAYOUTS = {  # every attention layout of docs/model.md's "Modern attention layouts", one run each
    "MHA": [], "GQA": ["model.n_head=4", "model.n_kv_head=2"], "MQA": ["model.n_kv_head=1"],
    "RoPE": ["model.pos=rope"], "shortformer": ["model.pos=shortformer"],
    "no positions": ["model.pos=none"], "output gate": ["model.output_gate=true"],
    "sink": ["model.sink=true"],
    "all switches (rope, GQA, gate, sink)": ["model.pos=rope", "model.n_head=4",
                                             "model.n_kv_head=2", "model.output_gate=true",
                                             "model.sink=true"]}
TASKS = {"two_source": ["data.task=two_source", "model.vocab_size=24"],
         "text": ["data.task=text", "model.vocab_size=256"], "tokens": ["data.task=tokens"]}


def composition_state(d):
    """(score options, note text, grid cells) of the composition section."""
    opts = [o.get_attribute("value") for o in d.find_elements("css selector",
                                                               "#sel-composition option")]
    note = d.find_elements("id", "composition-note")
    return opts, note[0].text if note else "", len(d.find_elements(
        "css selector", "#composition-grid td"))


def test_layouts(d):
    ids = os.path.join(TMP, "ids.bin")  # the tokens task: uint16 ids, no tokenizer
    np.random.default_rng(0).integers(0, 16, 4000).astype("<u2").tofile(ids)
    TASKS["tokens"].append(f"data.path={ids}")
    for name, sets in list(LAYOUTS.items()) + list(TASKS.items()):
        run = harness_run(re.sub(r"\W", "_", name), *sets)
        page = page_of(run, os.path.join(TMP, re.sub(r"\W", "_", name) + ".html"))
        ok = open_page(d, page)
        errors = console_errors(d)
        with h5py.File(run, "r") as f:
            want = results.token_labels(f, 0)
        labels = d.execute_script("return [...document.querySelectorAll('#tokens .tok .t')]"
                                  ".map(e => e.textContent)") if ok else []
        check(f"{name}: the report opens without console errors, the probe's tokens as text",
              ok and not errors and labels == want and labels,
              f"{errors} {labels[:5]} {want[:5]}")
        axes = d.execute_script("return ['#map-xlabels', '#map-ylabels'].map(a => [...document"
                                ".querySelectorAll(a + ' span')].map(s => [+s.dataset.pos, "
                                "s.textContent]))") if ok else [[], []]
        check(f"{name}: the map's axes carry the probe's tokens (keys and queries)",
              all(ax and ax[0][0] == 0 and len(ax) >= len(want) // 2
                  and all(text == want[pos] for pos, text in ax) for ax in axes),
              str(axes[1][:6]))
        opts, note, cells = composition_state(d)
        n_curves = len(d.find_elements("css selector", "#prune-chart polyline"))
        gate, rope = "model.output_gate=true" in sets, "model.pos=rope" in sets
        want_opts = [] if gate else ["v_composition"] if rope else [
            "q_composition", "k_composition", "v_composition"]
        check(f"{name}: pruning curves, and composition scores "
              + ("refused with the reason (output gate)" if gate else "V only, with the reason "
                 "(rotary)" if rope else "Q, K, V"),
              n_curves == 2 and opts == want_opts and (cells > 0) == (not gate)
              and (("output_gate" in note) if gate else ("rope" in note) if rope else not note),
              f"{n_curves} curves, {opts}, note {note!r}, {cells} cells")
        if name == "two_source":
            check("two_source: tokens named BOS, a, b, =, (a,b)", len(labels) > 4
                  and labels[0] == "BOS" and labels[1][0] == "a" and labels[2][0] == "b"
                  and labels[3] == "=" and labels[4][0] == "(", str(labels[:6]))


def test_prune_later(d):
    """A run without /prune (output.prune_step 0): no pruning section; `harness prune RUN.h5
    --step 0.1` adds it, and the report shows it."""
    run = harness_run("no_prune", "output.prune_step=0")
    page = page_of(run, os.path.join(TMP, "no_prune.html"))
    ok = open_page(d, page)
    before = [a.text for a in d.find_elements("css selector", "nav a")]
    check("output.prune_step 0: the page has no pruning section, and no console error",
          ok and "Pruning curves" not in before and not d.find_elements("id", "prune-table")
          and not console_errors(d), str(before))
    p = subprocess.run([harness.HARNESS, "prune", run, "--step", "0.1"], capture_output=True,
                       text=True, timeout=300)
    page = page_of(run, page)
    ok = open_page(d, page)
    check("after `harness prune RUN.h5 --step 0.1` the report has the pruning curves",
          p.returncode == 0 and ok and not console_errors(d)
          and len(d.find_elements("css selector", "#prune-chart polyline")) == 2,
          p.stderr[-300:])


def test_sweep(d):
    exp = write(os.path.join(TMP, "sw.yaml"), f"base: {os.path.join(TMP, 'tiny.yaml')}\n"
                "grid: {n_head: [1, 2]}\nseeds: [0, 1]\nwidth: fixed_width\n")
    res = os.path.join(TMP, "results")
    p = subprocess.run([PY, os.path.join(ROOT, "scripts", "sweep"), exp, "-j", "2", "--results",
                        res], capture_output=True, text=True, timeout=600)
    sweep_dir = os.path.join(res, "sw")
    check("a 4-run sweep to report on", p.returncode == 0, p.stderr[-400:])
    p = report(sweep_dir)
    page = os.path.join(sweep_dir, "report.html")
    check("report SWEEP_DIR: exit 0, the page and one page per run",
          p.returncode == 0 and os.path.exists(page)
          and len(os.listdir(os.path.join(sweep_dir, "report"))) == 4, p.stdout + p.stderr)
    check("the sweep page opens with no console error",
          open_page(d, page) and not console_errors(d), str(console_errors(d)))
    rows = d.execute_script("return [...document.querySelectorAll('#compare-table tr')].slice(1)"
                            ".map(tr => [...tr.children].map(td => td.textContent))")
    q = subprocess.run([PY, os.path.join(ROOT, "scripts", "compare"), sweep_dir],
                       capture_output=True, text=True)
    want = [[c.strip() for c in l.strip().strip("|").split("|")] for l in q.stdout.splitlines()
            if re.match(r"\| \d", l)]
    header = d.execute_script("return [...document.querySelectorAll('#compare-table th')]"
                              ".map(th => th.textContent)")
    want_header = [c.strip() for c in q.stdout.splitlines()[0].strip().strip("|").split("|")]
    check("the comparison table is scripts/compare's (Welch p, Holm p, heads needed)",
          rows == want and len(rows) == 2 and header == want_header
          and {"p", "Holm p", "heads needed", "prunable"} <= set(header), f"{rows} vs {want}")
    notes = [e.text for e in d.find_elements("css selector", "#compare p.note")]
    check("with compare's notes (the narrowest against the best, Holm p)",
          [n for n in q.stdout.splitlines()[len(want) + 3:] if n] == notes, str(notes))
    s = results.Summary(sweep_dir)
    ok = True
    for c in pruning.CRITERIA:
        names = [g.get_attribute("data-name") for g in d.find_elements(
            "css selector", f"#sweep-prune-{c} g.series")]
        seeds = {h: sum(1 for i in range(s.n) if s["n_head"][i] == h) for h in (1, 2)}
        ok &= names == [f"{h} head{'s' if h != 1 else ''} ({seeds[h]} seeds)" for h in (1, 2)]
    check("pruning curves of every head count on one axis, per criterion", ok)
    dots = d.find_elements("css selector", "#sweep-heads-needed g.series circle title")
    shown = sorted(tuple(float(v) for v in x.get_attribute("textContent").split(": ")[1]
                         .split(", ")) for x in dots
                   if x.get_attribute("textContent").startswith("heads needed, each seed"))
    heads = sorted(set(int(h) for h in s["n_head"]))  # the chart's x: a head count's position
    want = sorted((float(heads.index(int(s["n_head"][i]))), float(s["heads_needed"][i]))
                  for i in range(s.n))
    check("heads needed against n_head: every seed's summary value", shown == want,
          f"{shown} vs {want}")
    check("loss against head count: mean ± std bars and every seed",
          len(d.find_elements("css selector", "#sweep-loss g.series circle")) == 2 + 4)
    links = d.find_elements("css selector", "#runs-table a")
    check("a row and a link per run", len(links) == 4)
    links[0].click()
    check("a run's link opens its report without console errors",
          open_page(d, d.current_url[len("file://"):]) and not console_errors(d)
          and d.find_elements("id", "map"), d.current_url)


def test_size():
    run = harness_run("heads12_shapes", "train.steps=60", "output.attn_every=5",
                      "output.log_every=1", "output.eval_every=5", "train.batch_size=4",
                      "output.eval_batches=1", config=os.path.join(ROOT, "configs", "heads12.yaml"))
    with h5py.File(run, "r") as f:
        shape = f["attn/maps"].shape
    page = page_of(run, os.path.join(TMP, "heads12.html"))
    size = os.path.getsize(page)
    check(f"heads12 shapes {shape}: page {size / 1e6:.2f} MB < 5 MB",
          shape == (13, 2, 12, 8, 32, 32) and 0 < size < 5e6)
    return page


def test_bad_input():
    notes = write(os.path.join(TMP, "notes.h5"), "not hdf5")
    empty = os.path.join(TMP, "empty_dir")
    os.makedirs(empty, exist_ok=True)
    for target, pattern in ((os.path.join(TMP, "missing.h5"), r"missing\.h5: no such results file"),
                            (notes, r"notes\.h5: not an HDF5 results file"),
                            (empty, r"summary\.h5: not found")):
        out = os.path.join(TMP, "bad.html")
        p = report(target, "-o", out)
        lines = p.stderr.strip().splitlines()
        check(f"bad input {os.path.basename(target)}: one line, exit 2, no page",
              p.returncode == 2 and len(lines) == 1 and re.search(pattern, lines[0])
              and not os.path.exists(out), p.stderr)
    run = harness_run("tiny")
    future = os.path.join(TMP, "future.h5")
    shutil.copy(run, future)
    with h5py.File(future, "r+") as f:
        f.attrs["format_version"] = "2.0"
    textsum.reseal(future)
    p = report(future, "-o", os.path.join(TMP, "future.html"))
    check("a results file of a future format_version: one line, exit 2, no page",
          p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "format 2.0" in p.stderr
          and not os.path.exists(os.path.join(TMP, "future.html")), p.stderr)
    p = report(run, "-o", os.path.join(notes, "x.html"))
    check("an output path that cannot be written: one line naming it, exit 2",
          p.returncode == 2 and p.stderr.strip().splitlines() == [
              f"{os.path.join(notes, 'x.html')}: cannot write the report there ({notes} is not a "
              "directory)"],
          p.stderr)


def screenshot(run, png, section=None):
    """The README's picture: the report of RUN in the test's browser, hovering token 20; with a
    section (its id, e.g. causal: docs/report.md's picture of it), that section scrolled to."""
    d, why = browser()
    if d is None:
        print(f"skipped: no chromium ({why})")
        return 1
    page = page_of(run, os.path.join(TMP, "shot.html"))
    d.set_window_size(1300, 1250)
    open_page(d, page)
    if section:
        d.execute_script("const e = document.getElementById(arguments[0]);"  # clear of the sticky menu
                         "window.scrollTo(0, e.getBoundingClientRect().top + window.scrollY - 40)", section)
        time.sleep(0.2)
    else:
        hover(d, token(d, 20))
    d.save_screenshot(png)
    d.quit()
    print(png)
    return 0


def main():
    if sys.argv[1:2] == ["--screenshot"]:
        return screenshot(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None)
    keep = "--keep" in sys.argv[1:]
    if harness_missing(harness.HARNESS):
        return 1
    t0 = time.time()
    run_check("page data", test_page_data)
    run_check("bad input", test_bad_input)
    d, why = browser()
    if d is None:
        print(f"skipped: no chromium ({why}); the browser checks did not run")
    else:
        try:
            run = with_classes(harness_run("tiny"))
            run_check("run page", lambda: test_run_page(d, run))
            run_check("step control", lambda: test_steps(d, run))
            run_check("layouts", lambda: test_layouts(d))
            run_check("harness prune, then the report", lambda: test_prune_later(d))
            run_check("sweep page", lambda: test_sweep(d))
            run_check("size", lambda: open_page(d, test_size()) and check(
                "the heads12-sized page opens without console errors", not console_errors(d)))
        finally:
            d.quit()
    return end_suite(TMP, keep, t0)


if __name__ == "__main__":
    sys.exit(main())
