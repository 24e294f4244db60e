#!/usr/bin/python3
# suite: path patching in results files (PyTorch recomputation, the top-heads limit)
# suite-args: {harness}
"""Path patching (/patching/path_q, path_k, path_v) of small trained runs, recomputed independently.

1. From the stored clean and corrupted tokens, positions and answers and the stored /params, the
   PyTorch forward of tests/reference.py (float64, written from docs/model.md and the method in
   docs/analyses.md): for every sender head A and every receiver B in a later layer and every
   input (Q, K, V), the corrupted input run with (z_A,clean − z_A,corrupt) · W_O^A added to B's
   input of that kind alone gives the normalised effect, equal to the stored entry to 1e-4. Runs:
   heads12's layout (induction, logit difference, 2 layers) and a 3-layer GQA + RoPE +
   output-gate layout on two_source (K/V receivers are K/V heads; receivers in layer 1 have a
   layer after them that reruns).
2. The entries where the sender is not in an earlier layer are NaN, all others finite; path_k
   and path_v have one receiver per K/V head; harness check passes the files.
3. output.path_patch_heads = 5: /patching/path_heads marks the 5 heads of each layer with the
   largest |/patching/head_out| in it, the entries between them are the every-head run's bit for
   bit, all the others NaN, and the attributes say so.
usage: tests/test_path_reference.py [HARNESS]
"""
import os
import shutil
import subprocess
import sys
import tempfile

import h5py
import numpy as np
import torch

from checks import check, finish

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HARNESS = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(ROOT, "harness")
sys.path.insert(0, os.path.join(ROOT, "tests"))
import reference  # noqa: E402
from test_patch_reference import TINY, metrics, stored, train  # noqa: E402

KINDS = ("q", "k", "v")
TOL = 1e-4
TOP = 5  # heads per layer of path_patch_heads' check (of heads12's 12)
RUNS = [
    ("heads12", TINY),
    ("gqa_rope_gate_3_layers",
     TINY + ["data.task=two_source", "model.vocab_size=30", "model.d_model=16", "model.n_head=4",
             "model.n_kv_head=2", "model.n_layer=3", "model.pos=rope", "model.rope_dims=2",
             "model.output_gate=true"]),
]


def reference_paths(params, cfg, data, attrs):
    """{kind: [L, receivers, L, H]} of every path's normalised effect, NaN where undefined."""
    work = reference.cast(params, torch.float64)
    metric = 1 if attrs["metric"] == "logit_diff" else 0
    x_clean = torch.tensor(data["clean_tokens"], dtype=torch.long)
    x_corrupt = torch.tensor(data["corrupt_tokens"], dtype=torch.long)

    def run(x, **kw):
        out = []
        reference.forward(work, cfg, x, logits_out=out, **kw)
        return float(metrics(out[0], data)[metric])

    rec_clean, rec_corrupt = {}, {}
    m_clean, m_corrupt = run(x_clean, record=rec_clean), run(x_corrupt, record=rec_corrupt)
    _, _, H, dh, L, _ = reference.dims(cfg)
    n_kv = reference.layout(cfg)[0]
    out = {}
    for kind in KINDS:
        R = H if kind == "q" else n_kv
        ref = np.full((L, R, L, H), np.nan)
        for la in range(L):
            w_o = work[f"layer{la}/w_o"]
            for a in range(H):
                diff = rec_clean["z"][la][:, :, a, :] - rec_corrupt["z"][la][:, :, a, :]   # [B,T,dh]
                delta = diff @ w_o[a * dh:(a + 1) * dh, :]                                # [B,T,D]
                for lb in range(la + 1, L):
                    for b in range(R):
                        m = run(x_corrupt, path=(lb, kind, b, delta))
                        ref[lb, b, la, a] = (m - m_corrupt) / (m_clean - m_corrupt)
        out[kind] = ref
    return out


def check_run(name, path):
    data, attrs, _ = stored(path)
    cfg, params = reference.load_params(path)
    _, _, H, _, L, _ = reference.dims(cfg)
    n_kv = reference.layout(cfg)[0]
    ref = reference_paths(params, cfg, data, attrs)
    for kind in KINDS:
        got = data["path_" + kind].astype(np.float64)
        R = H if kind == "q" else n_kv
        check(f"{name}: /patching/path_{kind} is [L, {'H' if kind == 'q' else 'H_kv'}, L, H] = "
              f"{[L, R, L, H]}", list(got.shape) == [L, R, L, H], str(got.shape))
        if list(got.shape) != [L, R, L, H]:
            continue
        later = np.zeros(got.shape, bool)
        for lb in range(L):
            later[lb, :, :lb, :] = True
        check(f"{name}: path_{kind} is finite exactly where the sender's layer is earlier",
              np.array_equal(np.isfinite(got), later), f"{np.isfinite(got).sum()} finite of {later.sum()}")
        err, scale = np.nanmax(np.abs(got - ref[kind])), np.nanmax(np.abs(ref[kind]))
        top = np.unravel_index(np.nanargmax(got), got.shape)
        # the effects of one path are small (about 1e-3 here): the error is also held to 1% of the
        # largest, so that a path read from the wrong head could not pass
        check(f"{name}: every entry of path_{kind} ({int(later.sum())}) is the reference's recomputation to "
              f"1e-4 and to 1% of the largest |entry| {scale:.2g} (strongest L{top[2]}H{top[3]} -> "
              f"L{top[0]} head {top[1]} {np.nanmax(got):+.4f}; worst error {err:.2g})",
              err <= TOL and err <= 0.01 * scale, f"worst {err:.3g}")
    chk = subprocess.run([HARNESS, "check", path], capture_output=True, text=True, timeout=300)
    check(f"{name}: harness check passes (the path datasets described)", chk.returncode == 0,
          chk.stdout[-300:] + chk.stderr[-300:])
    return data


def check_top_heads(tmp, every):
    path, run = train(tmp, f"top{TOP}", "configs/heads12.yaml", TINY + [f"output.path_patch_heads={TOP}"])
    if run.returncode != 0:
        return
    data, attrs, _ = stored(path)
    head_out = np.abs(data["head_out"].astype(np.float64))
    L, H = head_out.shape
    want = np.zeros((L, H), np.int32)
    for layer in range(L):
        want[layer, np.argsort(-head_out[layer], kind="stable")[:TOP]] = 1
    marked = data["path_heads"].ravel()
    check(f"path_patch_heads {TOP}: path_heads marks the {TOP} heads of each layer with the largest |head_out|",
          np.array_equal(marked, want.ravel()), f"{np.flatnonzero(marked)} vs {np.flatnonzero(want)}")
    check(f"path_patch_heads {TOP}: the attributes say so",
          f"the {TOP} of {H} heads of each layer" in str(attrs.get("path_heads"))
          and f"({TOP * L} of {L * H})" in str(attrs.get("path_heads")) and attrs.get("path_patch_heads") == TOP,
          str({k: v for k, v in attrs.items() if k.startswith("path")}))
    for kind in KINDS:
        got, full = data["path_" + kind], every["path_" + kind]
        keep = np.zeros(got.shape, bool)
        for r in np.flatnonzero(marked):
            for s in np.flatnonzero(marked):
                keep[r // H, r % H, s // H, s % H] = s // H < r // H
        same = np.array_equal(got[keep], full[keep]) and bool(np.all(np.isnan(got[~keep])))
        check(f"path_patch_heads {TOP}: path_{kind} has the every-head run's bits between the {TOP} heads "
              f"({int(keep.sum())} entries), NaN elsewhere", same and keep.sum() > 0, "differs")


def main():
    if not os.path.exists(HARNESS):
        print(f"no harness at {HARNESS}")
        return finish()
    torch.set_num_threads(1)
    tmp = tempfile.mkdtemp(prefix="test_path_reference.")
    try:
        every = None
        for name, sets in RUNS:
            path, run = train(tmp, name, "configs/heads12.yaml", sets)
            if run.returncode != 0:
                continue
            check(f"{name}: the run prints the path-patching line", "path patching (" in run.stdout,
                  run.stdout[-300:])
            data = check_run(name, path)
            every = data if name == "heads12" else every
        if every is not None:
            check_top_heads(tmp, every)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
