#!/usr/bin/python3
# suite: causal evidence in results files (direct logit attribution against PyTorch, figures, summary)
# suite-args: {harness}
"""Which heads cause the behaviour, as the results file, scripts/plot, the report's data and
scripts/compare say it, checked against independent computations:

1. Direct logit attribution (/dla) of small trained induction runs (multi-head; grouped K/V with
   rotary positions, 3 layers): the parts (embedding, each layer's b_o, every head, the final
   LayerNorm's bias) add up to /dla/logit to 1e-5; every part equals tests/reference.py's
   PyTorch float64 computation from /params and the stored clean tokens, answers and positions
   (/patching/clean_tokens, clean_answer, positions) to 1e-4; the positions attribute is their
   count.
2. scripts/plot writes patching.png, patching_atp.png (and patching_kv.png, the K and V panels
   and their estimates, under grouped K/V), dla.png and copying.png, each with a CSV beside it
   holding the file's numbers (every kind and its AtP estimate).
3. heads.read.causal.heads_carrying on hand-worked examples (ties, negative effects, NaN, all zero)
   and on the runs' /patching/head_out against a NumPy loop; the report's causal data holds it,
   the DLA parts and the head table's DLA, copying and patching columns as in the file.
   The end-of-run head table on the terminal prints the copying, patching and DLA columns as in
   the file; `harness check` passes the run and finds a DLA part moved by 0.01 and a copying
   score of 1.5.
4. The sweep summary's patching_heads_80 column and scripts/compare's "heads carrying 80% of
   patching" column (mean ± std per head count, and its JSON) against NumPy.
usage: tests/test_causal.py [HARNESS]
"""
import csv
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

import h5py
import numpy as np
import torch

from checks import check, finish, heads12_run, known_summary

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HARNESS = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(ROOT, "harness")
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference  # noqa: E402
from heads.read import causal  # noqa: E402
from heads.report import report_run
from heads.sweep import summary

PY = "/usr/bin/python3"
TINY = ["--set", "model.vocab_size=16", "--set", "model.d_model=16", "--set", "model.seq_len=16",
        "--set", "train.steps=60", "--set", "train.batch_size=8", "--set", "train.threads=1",
        "--set", "output.eval_every=30", "--set", "output.attn_every=0", "--set", "output.probes=2",
        "--set", "output.probe_len=0", "--set", "data.max_period=6", "--set", "output.prune_step=0"]


def train(tmp, name, *sets):
    out, run = heads12_run(HARNESS, ROOT, tmp, name, TINY, sets, "tiny run with patching completes")
    check_head_table(name, out, run.stdout)
    return out


def check_head_table(name, path, stdout):
    """The end-of-run head table's copying, patching and DLA columns: the file's values as printed
    (3, 4 and 3 decimals)."""
    lines = stdout.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith("layer  head")), None)
    ok = start is not None and lines[start].split()[-3:] == ["copying", "patching", "DLA"]
    with h5py.File(path, "r") as f:
        want = (f["scores/copying"][()], f["patching/head_out"][()], f["dla/head"][()])
    L, H = want[0].shape
    for row in lines[start + 1:start + 1 + L * H] if ok else []:
        cells = row.split()
        l, h = int(cells[0]), int(cells[1])
        ok &= all(abs(float(cells[-3 + k]) - w[l, h]) <= 0.5 * 10 ** -d + 1e-9
                  for k, (w, d) in enumerate(zip(want, (3, 4, 3))))
    check(f"{name}: the end-of-run head table's copying, patching and DLA columns hold the file's values", ok,
          "\n".join(lines[start:start + 3]) if start is not None else stdout[-300:])


def check_dla(name, path):
    cfg, params = reference.load_params(path)
    with h5py.File(path, "r") as f:
        d = causal.dla(f)
        tokens = torch.from_numpy(f["patching/clean_tokens"][()].astype(np.int64))
        answer = torch.from_numpy(f["patching/clean_answer"][()].astype(np.int64))
        positions = torch.from_numpy(f["patching/positions"][()].astype(np.float64))
    parts = d["embed"] + d["ln_bias"] + d["bias_o"].sum() + d["head"].sum()
    check(f"{name}: the DLA parts add up to /dla/logit ({parts:.7f} vs {d['logit']:.7f})",
          abs(parts - d["logit"]) <= 1e-5)
    ref = reference.direct_logit_attribution(params, cfg, tokens, answer, positions)
    err = max(float(np.max(np.abs(d["head"] - ref["head"]))), float(np.max(np.abs(d["bias_o"] - ref["bias_o"]))),
              *(abs(d[k] - ref[k]) for k in ("embed", "ln_bias", "logit")))
    check(f"{name}: /dla = PyTorch float64 from /params and the stored clean tokens, answers and "
          f"positions (max error {err:.1e}; heads {d['head'].min():+.3f} .. {d['head'].max():+.3f}, "
          f"logit {d['logit']:.3f})", err <= 1e-4 and d["head"].shape == ref["head"].shape)
    check(f"{name}: /dla positions = the marked positions' count ({d['positions']:.0f})",
          d["positions"] == float(positions.sum()) and d["positions"] > 0)


def check_harness_check(tmp, name, path):
    """harness check: the run is ok; a copy with one DLA part moved by 0.01 and a copying score of
    1.5 has exactly those two problems, exit 1."""
    ok = subprocess.run([HARNESS, "check", path], capture_output=True, text=True, timeout=120)
    bad = os.path.join(tmp, name + "_tampered.h5")
    shutil.copy(path, bad)
    with h5py.File(bad, "r+") as f:
        f["dla/head"][0, 0] += 0.01
        f["scores/copying"][0, 0] = 1.5
    p = subprocess.run([HARNESS, "check", bad], capture_output=True, text=True, timeout=120)
    lines = p.stdout.strip().splitlines()
    check(f"{name}: harness check passes the run and finds a DLA part moved by 0.01 and a copying score "
          "of 1.5 in a copy", ok.returncode == 0 and p.returncode == 1 and len(lines) == 3
          and "/dla: the parts add up to" in lines[0] and "/scores/copying layer 0 head 0: 1.5" in lines[1],
          ok.stdout + p.stdout)


def read_csv_columns(path):
    with open(path) as f:
        rows = list(csv.DictReader(f))
    return rows


def check_plots(tmp, name, path, grouped):
    out = os.path.join(tmp, name + "_plots")
    p = subprocess.run([PY, os.path.join(ROOT, "scripts", "plot"), path, "-o", out], capture_output=True,
                       text=True, timeout=300)
    want = ["patching", "patching_atp", "dla", "copying"] + (["patching_kv"] if grouped else [])
    have = [s for s in want if os.path.exists(os.path.join(out, s + ".png"))
            and os.path.exists(os.path.join(out, s + ".csv"))]
    check(f"{name}: scripts/plot draws {', '.join(want)} with a CSV beside each", have == want,
          f"{have}; {p.stderr[-300:]}")
    if have != want:
        return
    with h5py.File(path, "r") as f:
        expected = {"dla": {"dla": f["dla/head"][()]}, "copying": {"copying": f["scores/copying"][()]},
                    "patching": {}, "patching_atp": {}, "patching_kv": {}}
        for kind in ("head_out", "q", "k", "v", "pattern"):
            per_kv = grouped and kind in ("k", "v")
            expected["patching_kv" if per_kv else "patching"][kind] = f[f"patching/{kind}"][()]
            expected["patching_kv" if per_kv else "patching_atp"]["atp_" + kind] = f[f"patching/atp_{kind}"][()]
        if not grouped:
            del expected["patching_kv"]
    worst = 0.0
    for stem, columns in expected.items():
        rows = read_csv_columns(os.path.join(out, stem + ".csv"))
        for col, values in columns.items():
            for r in rows:
                l, h = int(r["layer"]), int(r["head"])
                if h < values.shape[1]:
                    worst = max(worst, abs(float(r[col]) - float(values[l, h])))
    check(f"{name}: the CSVs beside the figures hold the file's values (worst {worst:.1e})", worst <= 1e-6)


def numpy_carrying(effect, share=0.8):
    a = sorted((abs(v) for v in np.ravel(effect) if math.isfinite(v)), reverse=True)
    total, run = sum(a), 0.0
    if total == 0:
        return None
    for k, v in enumerate(a):
        run += v
        if run >= share * total - 1e-12 * total:
            return k + 1
    return len(a)


def check_carrying(runs):
    cases = [([0.5, 0.3, 0.1, 0.1], 2), ([[-0.6, 0.2], [0.2, 0.0]], 2), ([0.4, 0.4, 0.2], 2),
             ([0.1] * 10, 8), ([float("nan"), 0.9, 0.1], 1), ([0.0, 0.0], None)]
    got = [causal.heads_carrying(np.array(e, float)) for e, _ in cases]
    check(f"heads_carrying on hand-worked cases: {got}", got == [w for _, w in cases])
    for name, path in runs.items():
        with h5py.File(path, "r") as f:
            effect = f["patching/head_out"][()]
        page = report_run.read_run(path)
        c = page["causal"]
        want = numpy_carrying(effect)
        with h5py.File(path, "r") as f:
            same_columns = (np.allclose(np.array(page["heads"]["dla"]["values"], float), f["dla/head"][()], atol=1e-4)
                            and np.allclose(np.array(page["heads"]["copying"]["values"], float),
                                            f["scores/copying"][()], atol=1e-4)
                            and np.allclose(np.array(page["heads"]["patching"]["values"], float),
                                            f["patching/head_out"][()], atol=1e-4))
            logit = float(f["dla/logit"][0])
        check(f"{name}: heads carrying 80% of the patching effect = a NumPy loop over /patching/head_out "
              f"({c['carrying']} of {effect.size}); the report's data has it, the DLA logit and the head "
              "table's DLA, copying and patching columns",
              c["carrying"] == want and abs(c["dla"]["logit"] - logit) < 1e-5 and same_columns)


def check_compare(tmp):
    outdir = os.path.join(tmp, "known")
    losses = {1: [2.50, 2.55, 2.47], 4: [2.31, 2.35, 2.29]}
    carrying = {1: [2, 2, 2], 4: [3, 5, 4]}
    rows, experiment = known_summary(outdir, losses)
    for r in rows:
        r[causal.CARRY_COLUMN] = carrying[r["n_head"]][r["seed"]]
    summary.write_summary(outdir, rows, experiment)
    p = subprocess.run([PY, os.path.join(ROOT, "scripts", "compare"), outdir], capture_output=True, text=True,
                       timeout=120)
    header = next((l for l in p.stdout.splitlines() if l.startswith("| n_head") or "heads carrying" in l), "")
    cols = [c.strip() for c in header.split("|")[1:-1]]
    cells = {l.split("|")[1].strip(): [c.strip() for c in l.split("|")[1:-1]]
             for l in p.stdout.splitlines() if l.startswith("| ") and l.split("|")[1].strip().isdigit()}
    name = "heads carrying 80% of patching"
    ok = p.returncode == 0 and name in cols and set(cells) == {"1", "4"}
    if ok:
        i = cols.index(name)
        want = {h: f"{np.mean(v):.1f} ± {np.std(v, ddof=1):.1f} of {2 * h}" for h, v in carrying.items()}
        ok = all(cells[str(h)][i] == want[h] for h in carrying)
    check("compare: the 'heads carrying 80% of patching' column is mean ± std over seeds (NumPy) of "
          "the summary's patching_heads_80", ok, p.stdout[-600:] + p.stderr[-300:])
    p = subprocess.run([PY, os.path.join(ROOT, "scripts", "compare"), outdir, "--json"], capture_output=True,
                       text=True, timeout=120)
    j = json.loads(p.stdout) if p.returncode == 0 else {"rows": []}
    got = {r["n_head"][0]: r.get("heads_carrying", {}) for r in j["rows"]}
    check("compare --json: heads_carrying {mean, std, values} per head count",
          all(math.isclose(got[h]["mean"], np.mean(v)) and math.isclose(got[h]["std"], np.std(v, ddof=1))
              and got[h]["values"] == v for h, v in carrying.items()), str(got))


def main():
    tmp = tempfile.mkdtemp(prefix="test_causal.")
    try:
        mha = train(tmp, "mha", "model.n_head=4", "model.d_head=4")
        gqa = train(tmp, "gqa_rope", "model.n_head=4", "model.d_head=4", "model.n_kv_head=2",
                    "model.pos=rope", "model.n_layer=3")
        check_dla("4 heads, 2 layers", mha)
        check_dla("grouped K/V (4 query, 2 K/V heads), rotary, 3 layers", gqa)
        check_harness_check(tmp, "mha", mha)
        check_plots(tmp, "mha", mha, grouped=False)
        check_plots(tmp, "gqa_rope", gqa, grouped=True)
        check_carrying({"mha": mha, "gqa_rope": gqa})
        check_compare(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
