#!/usr/bin/python3
# suite: head study in results files (composition against NumPy, harness prune, bad input)
# suite-args: {harness}
"""The head study in results files: composition scores against NumPy, `harness prune`, bad input.

1. Composition scores (/circuits) of small trained runs equal a NumPy computation from /params
   with the documented definition (LayerNorm gain folded into W_Q, W_K, W_V, reading and writing
   weights centred over d_model; Frobenius ratio), for multi-head, grouped K/V heads and 3
   layers, to 1e-4 relative; pairs not from an earlier to a later layer are NaN; rotary runs have
   only V-composition (with a note), output-gate runs no /circuits (and say why). The copying
   scores (/scores/copying) equal numpy.linalg.eigvals of the whole V x V OV circuit, weights
   processed as TransformerLens does, for the same layouts and rotary; none with the gate.
2. The pruning curves: first point = the run's last /eval/loss bit for bit, heads_left from all
   heads down to 0 by output.prune_step, order a permutation; /heads/ablation_delta_mean there.
3. `harness prune RUN.h5 --step F` rewrites only the study's groups (params, logs, maps bit for
   bit the same), keeps the file complete, leaves no temporary file.
4. `harness prune` on an interrupted, diverged, truncated or non-results file: one line naming
   the file, exit status 2, the file byte for byte unchanged, no temporary file left.
5. heads.read.pruning: Holm's adjustment on a hand-worked example; heads needed on a made-up curve.
6. scripts/plot's head-study figures per layout (SVG text): heads and pruning for every run;
   Q-, K-, V-composition with the heads named (3 layers too), V only with rotary, none with the
   output gate.
7. The run's last lines (time:, memory:) say what ran, each with the key that controls it:
   pruning curves (output.prune_step), patching (output.patch_batches, path_patch_heads), the
   circuits (one layer, rotary, the output gate), "no patching" when there was none.
usage: tests/test_headstudy.py [HARNESS]
"""
import hashlib
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile

import h5py
import numpy as np

from checks import check, finish, heads12_run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HARNESS = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(ROOT, "harness")
sys.path.insert(0, os.path.join(ROOT, "python"))
from heads.read import pruning, textsum  # noqa: E402

TINY = ["--set", "model.vocab_size=16", "--set", "model.d_model=16", "--set", "model.seq_len=16",
        "--set", "train.steps=40", "--set", "train.batch_size=8", "--set", "train.threads=1",
        "--set", "output.eval_every=20", "--set", "output.attn_every=0", "--set", "output.probes=2",
        "--set", "output.probe_len=0", "--set", "data.max_period=6"]


def train(tmp, name, *sets):
    return heads12_run(HARNESS, ROOT, tmp, name, TINY, sets)


def numpy_composition(f):
    """{q,k,v}_composition [L, H, L, H] from /params, as circuits.h defines them (float64)."""
    c = f["config"].attrs
    L, H, dh, D = int(c["n_layer"]), int(c["n_head"]), int(c["d_head"]), int(c["d_model"])
    Hkv = int(c["n_kv_head"]) if int(c["n_kv_head"]) else H
    P = np.eye(D) - 1.0 / D
    heads = {}
    for l in range(L):
        w = f[f"params/layer{l}/w_qkv"][()].astype(np.float64)
        g = f[f"params/layer{l}/ln_g"][()].astype(np.float64)
        wo = f[f"params/layer{l}/w_o"][()].astype(np.float64)
        R, O = P @ np.diag(g) @ w, wo @ P
        for h in range(H):
            kv = h // (H // Hkv)
            q = R[:, h * dh:(h + 1) * dh]
            k = R[:, (H + kv) * dh:(H + kv + 1) * dh]
            v = R[:, (H + Hkv + kv) * dh:(H + Hkv + kv + 1) * dh]
            heads[l, h] = (v @ O[h * dh:(h + 1) * dh], q @ k.T)  # W_OV, W_QK
    out = {n: np.full((L, H, L, H), np.nan) for n in ("q", "k", "v")}
    fro = np.linalg.norm
    for (lb, hb), (ov_b, qk_b) in heads.items():
        for (la, ha), (ov_a, _) in heads.items():
            if la >= lb:
                continue
            out["q"][lb, hb, la, ha] = fro(ov_a @ qk_b) / (fro(ov_a) * fro(qk_b))
            out["k"][lb, hb, la, ha] = fro(ov_a @ qk_b.T) / (fro(ov_a) * fro(qk_b))
            out["v"][lb, hb, la, ha] = fro(ov_a @ ov_b) / (fro(ov_a) * fro(ov_b))
    return out


def check_composition(name, path):
    with h5py.File(path, "r") as f:
        want = numpy_composition(f)
        for kind in ("q", "k", "v"):
            got = f[f"circuits/{kind}_composition"][()].astype(np.float64)
            valid = ~np.isnan(want[kind])
            same_nan = np.array_equal(np.isnan(got), ~valid)
            err = np.max(np.abs(got[valid] - want[kind][valid]) / np.abs(want[kind][valid]))
            base = float(f[f"circuits/{kind}_composition"].attrs["random_baseline"])
            check(f"{name}: {kind.upper()}-composition = NumPy from /params (max rel. error "
                  f"{err:.1e}), NaN exactly off the earlier -> later pairs; random baseline "
                  f"{base:.3f}", err < 1e-4 and same_nan and 0 < base < 1)


def numpy_copying(f):
    """/scores/copying [L, H] from /params: TransformerLens's eigenvalue copying score of the
    whole V x V OV circuit W_E W_V W_O W_U, after its from_pretrained weight processing (fold_ln,
    center_writing_weights, center_unembed), eigenvalues by numpy.linalg.eigvals (float64)."""
    c = f["config"].attrs
    L, H, dh = int(c["n_layer"]), int(c["n_head"]), int(c["d_head"])
    Hkv = int(c["n_kv_head"]) if int(c["n_kv_head"]) else H
    w_e = f["params/tok_emb"][()].astype(np.float64)
    w_e = w_e - w_e.mean(-1, keepdims=True)                         # center_writing_weights
    w_u = f["params/lnf_g"][()].astype(np.float64)[:, None] * f["params/w_unembed"][()]
    w_u = w_u - w_u.mean(0, keepdims=True)                          # fold_ln, centred reading
    w_u = w_u - w_u.mean(-1, keepdims=True)                         # center_unembed
    out = np.zeros((L, H))
    for l in range(L):
        w = f[f"params/layer{l}/ln_g"][()].astype(np.float64)[:, None] * f[f"params/layer{l}/w_qkv"][()]
        w = w - w.mean(0, keepdims=True)
        wo = f[f"params/layer{l}/w_o"][()].astype(np.float64)
        wo = wo - wo.mean(-1, keepdims=True)
        for h in range(H):
            kv = h // (H // Hkv)
            w_v = w[:, (H + Hkv + kv) * dh:(H + Hkv + kv + 1) * dh]
            lam = np.linalg.eigvals(w_e @ w_v @ wo[h * dh:(h + 1) * dh] @ w_u)
            out[l, h] = lam.sum().real / np.abs(lam).sum()
    return out


def check_copying(name, path):
    with h5py.File(path, "r") as f:
        want = numpy_copying(f)
        got = f["scores/copying"][()].astype(np.float64)
        err = np.max(np.abs(got - want))
        check(f"{name}: /scores/copying = numpy.linalg.eigvals of the V x V OV circuit from /params "
              f"(max error {err:.1e}; scores {got.min():+.3f} .. {got.max():+.3f})",
              got.shape == want.shape and err < 1e-5 and np.all(np.abs(got) <= 1))


def check_curves(name, path):
    with h5py.File(path, "r") as f:
        c = f["config"].attrs
        LH = int(c["n_layer"]) * int(c["n_head"])
        step = max(1, round(float(c["prune_step"]) * LH))
        run_loss = float(f["eval/loss"][-1])
        for crit in pruning.CRITERIA:
            left = f[f"prune/{crit}/heads_left"][()]
            loss = f[f"prune/{crit}/eval_loss"][()]
            order = f[f"prune/{crit}/order"][()]
            want_left = list(range(LH, 0, -step)) + [0]
            check(f"{name}: /prune/{crit}: first point = the run's eval loss bit for bit, "
                  f"heads_left {LH} .. 0 by {step}, order a permutation",
                  loss[0] == run_loss and list(left) == want_left
                  and sorted(order.tolist()) == list(range(LH)) and len(loss) == len(left),
                  f"{loss[0]!r} vs {run_loss!r}, left {list(left)}")
        check(f"{name}: /heads/ablation_delta_mean and /prune/one_head_per_layer written",
              f["heads/ablation_delta_mean"].shape == f["heads/ablation_delta"].shape
              and f["prune/one_head_per_layer/delta_loss"].shape == f["heads/ablation_delta"].shape)


def plot_texts(tmp, run):
    """scripts/plot RUN --format svg: {figure stem: the text of its SVG} of the head study's
    figures that were written."""
    import xml.etree.ElementTree as ET
    out = os.path.join(tmp, os.path.basename(run) + "_plots")
    subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "scripts", "plot"), run, "-o", out,
                    "--format", "svg"], capture_output=True, text=True, timeout=300)
    texts = {}
    for stem in ("heads", "pruning", "composition"):
        path = os.path.join(out, stem + ".svg")
        if os.path.exists(path):
            texts[stem] = " ".join("".join(e.itertext()) for e in ET.parse(path).getroot().iter()
                                   if e.tag.endswith("text"))
    return texts


def check_plots(tmp, mha, gqa, rope, gate):
    """The head study's figures per layout (scripts/plot, SVG): composition panels Q, K, V with
    the later and earlier heads named (3 layers: layers 1-2 read, 0-1 write), V only with rotary
    positions (and why), none with an output gate; heads and pruning figures for every run."""
    got = {name: plot_texts(tmp, run) for name, run in
           (("mha", mha), ("gqa", gqa), ("rope", rope), ("gate", gate))}
    comp = {n: t.get("composition", "") for n, t in got.items()}
    check("plot: heads and pruning figures for every layout (SVG)",
          all("heads" in t and "pruning" in t and "heads needed" in t["pruning"]
              for t in got.values()), str({n: sorted(t) for n, t in got.items()}))
    check("plot: composition of every later <- earlier pair, Q, K and V, heads named",
          all(f"{k}-composition (random matrices:" in comp["mha"] for k in "QKV")
          and "L1H3" in comp["mha"] and "L0H3" in comp["mha"] and "L2H3" in comp["gqa"]
          and "L1H0" in comp["gqa"] and "L0H0" in comp["gqa"],
          comp["gqa"][:300])
    check("plot: rotary runs draw V-composition only and say why; output-gate runs none",
          "V-composition (random" in comp["rope"] and "K-composition (random" not in comp["rope"]
          and "no Q- or K-composition" in comp["rope"] and "composition" not in got["gate"],
          comp["rope"][:300])


def digest(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def check_refused(name, path, expect):
    before, listing = digest(path), sorted(os.listdir(os.path.dirname(path)))
    run = subprocess.run([HARNESS, "prune", path], capture_output=True, text=True, timeout=120)
    lines = run.stderr.strip().splitlines()
    check(f"prune on {name}: exit 2, one line naming the file ('{lines[0] if lines else ''}')",
          run.returncode == 2 and len(lines) == 1 and path in lines[0] and expect in lines[0],
          f"exit {run.returncode}: {run.stderr.strip()}")
    check(f"prune on {name}: the file is unchanged and no temporary file is left",
          digest(path) == before and sorted(os.listdir(os.path.dirname(path))) == listing)


def check_last_lines(name, run, patterns):
    """The run's last lines (stderr) say what ran, with the keys: every pattern matches one of
    the lines that start with time: or memory:, and none says patching ran when it did not."""
    lines = [line for line in run.stderr.splitlines() if line.startswith(("time:", "memory:"))]
    missing = [p for p in patterns if not any(re.match(p, line) for line in lines)]
    check(f"{name}: the last lines say what ran, with the key that controls each", not missing,
          f"not matched: {missing}; lines: {lines}")


def main():
    tmp = tempfile.mkdtemp()
    try:
        mha, run = train(tmp, "mha", "model.n_head=4", "model.d_head=4")
        check("the end-of-run output reports heads needed, one head per layer and K-composition",
              "heads needed" in run.stdout and "one head per layer" in run.stdout
              and "highest K-composition" in run.stdout and "Δloss mean-ablated" in run.stdout)
        check("the time line shows the analysis against the steps",
              "after training" in run.stderr and "% of the steps'" in run.stderr, run.stderr[-300:])
        check_last_lines("4 heads, 2 layers, patching on", run, [
            r"^time: 40 steps in .*, evaluation [\d.]+ s \(output\.eval_every 20, output\.eval_batches 4: \d+ of "
            r"the \d+ validation windows\), "
            r"after training [\d.]+ s \(the study, patching, writing\), its CPU time [\d.]+% of the steps'$",
            r"^time: study [\d.]+ s: single-head ablations and importance; pruning curves, 1 of 8 heads a "
            r"step \(output\.prune_step 0\.1; 0 = none\); copying and composition$",
            r"^time: patching [\d.]+ s of CPU, [\d.]+% of the steps' CPU time: 8 clean/corrupted pairs "
            r"\(output\.patch_batches 1 × train\.batch_size 8; 0 = none\), path patching among all 8 heads "
            r"\(output\.path_patch_heads 0 = every head\)$",
            r"^memory: peak \d+ MiB in training, \d+ MiB at the end \(with the study and patching\), "
            r"set by (training|keeping the trained state|the study \(.+\)|patching \(.+\)|writing the results)$"])
        check_composition("4 heads, 2 layers", mha)
        check_copying("4 heads, 2 layers", mha)
        check_curves("4 heads, 2 layers", mha)
        gqa, _ = train(tmp, "gqa", "model.n_head=4", "model.d_head=4", "model.n_kv_head=2",
                       "model.n_layer=3")
        check_composition("grouped K/V (4 query, 2 K/V heads), 3 layers", gqa)
        check_copying("grouped K/V (4 query, 2 K/V heads), 3 layers", gqa)
        check_curves("grouped K/V, 3 layers", gqa)
        rope, run = train(tmp, "rope", "model.n_head=2", "model.d_head=8", "model.pos=rope")
        with h5py.File(rope, "r") as f:
            check("rotary: only V-composition, with a note why",
                  "circuits/v_composition" in f and "circuits/q_composition" not in f
                  and "rope" in f["circuits/v_composition"].attrs["note"] and "rope" in run.stdout)
        check_copying("rotary", rope)
        gate, run = train(tmp, "gate", "model.n_head=2", "model.d_head=8", "model.output_gate=true")
        with h5py.File(gate, "r") as f:
            check("output gate: no /circuits and no /scores/copying, and the run says why",
                  "circuits" not in f and "scores/copying" not in f and "output_gate" in run.stdout
                  and "prune" in f)
        check_plots(tmp, mha, gqa, rope, gate)

        # harness prune on a complete file: only the study's groups change
        copy = os.path.join(tmp, "again.h5")
        shutil.copy(mha, copy)
        run = subprocess.run([HARNESS, "prune", copy, "--step", "0.5", "--threads", "1"],
                             capture_output=True, text=True, timeout=300)
        with h5py.File(mha, "r") as a, h5py.File(copy, "r") as b:
            same = all(np.array_equal(a[p][()], b[p][()], equal_nan=True) for p in
                       ("params/layer0/w_qkv", "eval/loss", "attn/maps", "heads/ablation_delta",
                        "heads/ablation_delta_mean", "circuits/k_composition"))
            check("prune --step 0.5: exit 0, heads_left 8, 4, 0; params, logs, maps and the "
                  "ablations bit for bit the same; status complete; no temporary file",
                  run.returncode == 0 and list(b["prune/delta_loss/heads_left"][()]) == [8, 4, 0]
                  and same and b.attrs["status"] == "complete"
                  and a.attrs["config_yaml"] == b.attrs["config_yaml"]
                  and sorted(os.listdir(tmp)) == sorted(set(os.listdir(tmp))),
                  run.stderr[-300:])
        check("prune leaves only the results files in the directory",
              not [n for n in os.listdir(tmp) if ".h5." in n])

        # a run that skipped its curves (output.prune_step 0): prune without --step draws them
        # with the key's default step, not the run's 0
        noprune, _ = train(tmp, "noprune", "model.n_head=4", "model.d_head=4",
                           "output.prune_step=0")
        with h5py.File(noprune, "r") as f:
            had = "prune" in f
        one, run = train(tmp, "one", "model.n_head=4", "model.d_head=4", "model.n_layer=1",
                         "output.patch_batches=2", "output.path_patch_heads=2")
        check_last_lines("1 layer, 2 patching batches", run, [
            r"^time: study .*; pruning curves, 1 of 4 heads a step \(output\.prune_step 0\.1; 0 = none\); "
            r"copying \(no composition: one layer\)$",
            r"^time: patching .*: 16 clean/corrupted pairs \(output\.patch_batches 2 × train\.batch_size 8; "
            r"0 = none\), path patching none \(one layer: no earlier heads\)$"])
        _, run = train(tmp, "nopatch", "model.n_head=4", "model.d_head=4", "output.prune_step=0",
                       "output.patch_batches=0", "model.pos=rope", "output.path_patch_heads=2")
        check_last_lines("no pruning curves, no patching, rotary", run, [
            r"^time: .*after training [\d.]+ s \(the study, writing\), its CPU",
            r"^time: study [\d.]+ s: single-head ablations and importance; no pruning curves "
            r"\(output\.prune_step 0\); copying and V-composition \(model\.pos rope: no Q or K\)$",
            r"^time: no patching \(output\.patch_batches 0\)$",
            r"^memory: .* at the end \(with the study, no patching\), "
            r"set by (training|keeping the trained state|the study \(.+\)|writing the results)$"])
        _, run = train(tmp, "few", "model.n_head=4", "model.d_head=4", "output.path_patch_heads=2",
                       "model.output_gate=true")
        check_last_lines("path patching among 2 heads a layer, output gate", run, [
            r"^time: study .*; no copying or composition scores \(model\.output_gate\)$",
            r"^time: patching .*, path patching among 4 of 8 heads \(output\.path_patch_heads 2 a layer\)$"])
        run = subprocess.run([HARNESS, "prune", noprune, "--threads", "1"], capture_output=True,
                             text=True, timeout=300)
        with h5py.File(noprune, "r") as f:
            left = list(f["prune/delta_loss/heads_left"][()]) if "prune" in f else None
        check("output.prune_step 0, then prune without --step: curves at the default step "
              "(8 heads, 1 a step: 8, 7, …, 0)", not had and run.returncode == 0
              and left == list(range(8, -1, -1)), f"had /prune {had}; {left}; {run.stderr[-300:]}")

        # bad input
        for status in ("interrupted", "diverged"):
            bad = os.path.join(tmp, f"{status}.h5")
            shutil.copy(mha, bad)
            with h5py.File(bad, "r+") as f:
                f.attrs["status"] = status
            textsum.reseal(bad)  # as a harness that ended so would have sealed it
            check_refused(f"an {status} run" if status[0] == "i" else "a diverged run", bad, status)
        truncated = os.path.join(tmp, "truncated.h5")
        data = open(mha, "rb").read()
        open(truncated, "wb").write(data[:len(data) // 2])
        check_refused("a truncated file", truncated, "not a harness results file")
        text = os.path.join(tmp, "notes.h5")
        open(text, "w").write("not HDF5\n")
        check_refused("a text file", text, "not a harness results file")
        plain = os.path.join(tmp, "plain.h5")
        with h5py.File(plain, "w") as f:
            f["x"] = np.zeros(3)
        check_refused("an HDF5 file that is not a results file", plain, "not a harness results file")
        run = subprocess.run([HARNESS, "prune", os.path.join(tmp, "missing.h5")],
                             capture_output=True, text=True)
        check("prune on a missing file: exit 2, says so",
              run.returncode == 2 and "No such file" in run.stderr, run.stderr)
        run = subprocess.run([HARNESS, "prune", mha, "--step", "2"], capture_output=True, text=True)
        check("prune --step 2: exit 2, a fraction in (0, 1] expected",
              run.returncode == 2 and "(0, 1]" in run.stderr, run.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    # heads.read.pruning
    adjusted = pruning.holm([0.01, 0.04, 0.03, 0.005, float("nan")])
    want = [0.03, 0.06, 0.06, 0.02]
    check("Holm: [0.01, 0.04, 0.03, 0.005] -> [0.03, 0.06, 0.06, 0.02] (nan kept, not counted)",
          all(math.isclose(a, b) for a, b in zip(adjusted, want)) and math.isnan(adjusted[4]),
          str(adjusted))
    left, loss = np.array([8, 6, 4, 2, 0]), np.array([2.0, 2.05, 2.09, 2.2, 3.0])
    check("heads needed: 4 within 5% (2.09 <= 2.1 < 2.2), 8 within 1%, 0 within 60%",
          pruning.heads_needed(left, loss, 0.05) == 4 and pruning.heads_needed(left, loss, 0.01) == 8
          and pruning.heads_needed(left, loss, 0.6) == 0)
    return finish()


sys.exit(main())
