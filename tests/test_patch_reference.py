#!/usr/bin/python3
# suite: activation and attribution patching in results files (PyTorch recomputation, harness patch, bad input)
# suite-args: {harness}
"""Activation patching (/patching) of small trained runs, recomputed independently.

1. From the stored clean and corrupted tokens, positions and answers and the stored /params, the
   PyTorch forward of tests/reference.py (float64, written from docs/model.md) gives the metric of
   the clean and the corrupted run (the /patching attributes), and with one head's value taken
   from its clean forward, the normalised effect of every head for every kind (head_out, q, k,
   v, pattern): equal to the stored [L, H] (or [L, H_kv]) to 1e-4. Runs: heads12's layout
   (induction, logit difference), a GQA + RoPE + output-gate layout on two_source, and a text
   run (resample patching, the loss).
2. AtP: torch's gradient of the metric with respect to every head's gate at 1 (the clean value
   as the fill) gives the stored atp_* to 1e-4; each atp_* carries a correlation attribute equal
   to NumPy's Pearson r of the stored estimate and the stored exact effects.
3. The set: induction's corrupted rows keep the clean tokens up to the first position read and
   differ after it; positions only where the task marks a query.
4. `harness patch` on a copy of a complete run writes the same /patching bits as the end of the
   run, changes no other dataset, leaves no temporary file; --batches 2 doubles N;
   output.patch_batches=0 writes no /patching, and `harness check` passes every file.
5. `harness patch` on a text file, a missing file and an interrupted run: exit status 2, one
   line naming the file, the file byte for byte unchanged, no temporary file left.
usage: tests/test_patch_reference.py [HARNESS]
"""
import glob
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np
import torch

from checks import check, finish, heads12_run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HARNESS = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(ROOT, "harness")
sys.path.insert(0, os.path.join(ROOT, "tests"))
import reference  # noqa: E402

TINY = ["model.vocab_size=16", "model.d_model=48", "model.seq_len=16", "train.steps=200",
        "train.batch_size=8", "train.threads=1", "output.eval_every=30", "output.attn_every=0",
        "output.probes=2", "output.probe_len=0", "output.prune_step=0", "data.max_period=6"]
KINDS = ("head_out", "q", "k", "v", "pattern")
RECORD = {"head_out": "z", "q": "q", "k": "k", "v": "v", "pattern": "pattern"}
TOL = 1e-4


def train(tmp, name, config, sets):
    return heads12_run(HARNESS, ROOT, tmp, name, [], sets, "the run completes", config=config, timeout=900)


def stored(path):
    with h5py.File(path, "r") as f:
        g = f["patching"]
        data = {k: g[k][()] for k in g}
        attrs = {k: reference._plain(v) for k, v in g.attrs.items()}
        corr = {k: float(g["atp_" + k].attrs["correlation"]) for k in KINDS}
    return data, attrs, corr


def metrics(logits, data):
    """(loss, logit difference) over the positions, float64, as docs/analyses.md defines them."""
    pos = torch.tensor(data["positions"] > 0)
    clean = torch.tensor(data["clean_answer"], dtype=torch.long)
    corrupt = torch.tensor(data.get("corrupt_answer", data["clean_answer"]), dtype=torch.long)
    lse = torch.logsumexp(logits, -1)
    pick = lambda a: logits.gather(-1, a.unsqueeze(-1)).squeeze(-1)
    loss = (lse - pick(clean))[pos].mean()
    diff = (pick(clean) - pick(corrupt))[pos].mean()
    return loss, diff


def run_reference(name, params, cfg, data, attrs):
    x_clean = torch.tensor(data["clean_tokens"], dtype=torch.long)
    x_corrupt = torch.tensor(data["corrupt_tokens"], dtype=torch.long)
    metric = 1 if attrs["metric"] == "logit_diff" else 0
    work = reference.cast(params, torch.float64)

    def run(x, **kw):
        out = []
        reference.forward(work, cfg, x, logits_out=out, **kw)
        return metrics(out[0], data)

    rec_clean, rec_corrupt = {}, {}
    m_clean = run(x_clean, record=rec_clean)
    m_corrupt = run(x_corrupt, record=rec_corrupt)
    for k, label in ((0, "loss"), (1, "logit_diff")):
        for which, m in (("clean", m_clean), ("corrupt", m_corrupt)):
            key = f"{which}_{label}"
            if key in attrs:
                check(f"{name}: the {which} run's {label} is the reference's",
                      abs(attrs[key] - float(m[k])) <= TOL * max(1, abs(float(m[k]))),
                      f"{attrs[key]} vs {float(m[k])}")
    span = float(m_clean[metric] - m_corrupt[metric])
    print(f"# {name}: {attrs['metric']} clean {float(m_clean[metric]):.4f}, corrupted {float(m_corrupt[metric]):.4f}")
    L = int(cfg["n_layer"])
    for kind in KINDS:
        n = data[kind].shape[1]
        ref = np.zeros((L, n))
        for l in range(L):
            for h in range(n):
                g = torch.ones(L, n, dtype=torch.float64)
                g[l, h] = 0
                m = run(x_corrupt, patch={RECORD[kind]: (g, rec_clean)})
                ref[l, h] = (float(m[metric]) - float(m_corrupt[metric])) / span
        err = np.abs(ref - data[kind]).max()
        check(f"{name}: /patching/{kind} {list(data[kind].shape)} is the reference's recomputation to 1e-4",
              err <= TOL, f"worst {err:.3g}")
    # AtP: every kind's gates at 1 in one forward, one backward of the metric
    gates = {kind: torch.ones(L, data[kind].shape[1], dtype=torch.float64, requires_grad=True) for kind in KINDS}
    m = run(x_corrupt, patch={RECORD[kind]: (gates[kind], rec_clean) for kind in KINDS})
    m[metric].backward()
    for kind in KINDS:
        atp = (-gates[kind].grad / span).numpy()
        err = np.abs(atp - data["atp_" + kind]).max()
        check(f"{name}: /patching/atp_{kind} is torch's gradient at gate 1 to 1e-4", err <= TOL * max(1, np.abs(atp).max()),
              f"worst {err:.3g}")
    return m_clean, m_corrupt


def check_correlations(name, data, corr):
    for kind in KINDS:
        x, y = data["atp_" + kind].astype(np.float64).ravel(), data[kind].astype(np.float64).ravel()
        r = np.corrcoef(x, y)[0, 1] if x.std() > 0 and y.std() > 0 else float("nan")
        check(f"{name}: atp_{kind}'s correlation attribute is Pearson's r of the stored values",
              (np.isnan(r) and np.isnan(corr[kind])) or abs(r - corr[kind]) <= 1e-5, f"{corr[kind]} vs {r}")


def file_tree_hashes(path, skip="/patching"):
    out = {}
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset) and not ("/" + name).startswith(skip):
                value = obj[()]
                raw = repr(value.tolist()).encode() if value.dtype == object else np.ascontiguousarray(value).tobytes()
                out[name] = hashlib.sha256(raw).hexdigest()
        f.visititems(visit)
    return out


def patching_hashes(path):
    with h5py.File(path, "r") as f:
        g = f["patching"]
        return {k: hashlib.sha256(g[k][()].tobytes()).hexdigest() for k in g}, \
            {k: reference._plain(v) for k, v in g.attrs.items()}


def temporaries(path):
    return [p for p in glob.glob(path + "*") if p != path]


def bad_input(tmp, path, what):
    before = open(path, "rb").read() if os.path.exists(path) else None
    run = subprocess.run([HARNESS, "patch", path], capture_output=True, text=True, timeout=120)
    lines = run.stderr.strip().splitlines()
    check(f"harness patch on {what}: exit status 2, one line naming the file",
          run.returncode == 2 and len(lines) == 1 and path in lines[0] and "Traceback" not in run.stderr,
          f"status {run.returncode}: {run.stderr!r}")
    after = open(path, "rb").read() if os.path.exists(path) else None
    check(f"harness patch on {what}: the file is unchanged and no temporary is left",
          before == after and not temporaries(path), f"{temporaries(path)}")
    return lines[0] if lines else ""


def main():
    if not os.path.exists(HARNESS):
        print(f"no harness at {HARNESS}")
        return finish()
    torch.set_num_threads(1)
    tmp = tempfile.mkdtemp(prefix="test_patch_reference.")
    try:
        runs = [
            ("heads12", "configs/heads12.yaml", TINY),
            ("gqa_rope_gate", "configs/heads12.yaml",
             TINY + ["data.task=two_source", "model.vocab_size=30", "model.d_model=16", "model.n_head=4", "model.n_kv_head=2",
                     "model.pos=rope", "model.rope_dims=2", "model.output_gate=true"]),
            ("text", "configs/text.yaml",
             ["train.steps=150", "train.batch_size=4", "train.threads=1", "model.seq_len=24", "model.d_model=32",
              "model.n_head=4", "output.eval_every=30", "output.attn_every=0", "output.prune_step=0"]),
        ]
        files = {}
        for name, config, sets in runs:
            path, run = train(tmp, name, config, sets)
            files[name] = path
            if run.returncode != 0:
                continue
            check(f"{name}: the run prints the patching lines and their CPU share",
                  "activation patching (" in run.stdout and "time: patching" in run.stderr, run.stdout[-300:])
            data, attrs, corr = stored(path)
            cfg, params = reference.load_params(path)
            run_reference(name, params, cfg, data, attrs)
            check_correlations(name, data, corr)
            chk = subprocess.run([HARNESS, "check", path], capture_output=True, text=True, timeout=300)
            check(f"{name}: harness check passes (every /patching dataset described)", chk.returncode == 0,
                  chk.stdout[-300:] + chk.stderr[-300:])
        check_set(files["heads12"])
        check_command(tmp, files["heads12"])
        off, _ = train(tmp, "off", "configs/heads12.yaml", TINY + ["output.patch_batches=0"])
        with h5py.File(off, "r") as f:
            check("output.patch_batches=0: no /patching", "patching" not in f, str(list(f)))
        text = os.path.join(tmp, "notes.txt")
        with open(text, "w") as f:
            f.write("not a results file\n")
        msg = bad_input(tmp, text, "a text file")
        check("harness patch on a text file says it is not a results file", "not a harness results file" in msg,
              msg)
        bad_input(tmp, os.path.join(tmp, "missing.h5"), "a missing file")
        interrupted = interrupted_run(tmp)
        if interrupted:
            msg = bad_input(tmp, interrupted, "an interrupted run")
            check("harness patch on an interrupted run says it needs a complete one", "complete run" in msg, msg)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return finish()


def check_set(path):
    with h5py.File(path, "r") as f:
        x, y, pos = f["patching/clean_tokens"][()], f["patching/corrupt_tokens"][()], f["patching/positions"][()]
    ok = True
    for row in range(x.shape[0]):
        first = int(np.argmax(pos[row] > 0))
        ok &= np.array_equal(x[row, :first], y[row, :first]) and bool(np.all(x[row, first:] != y[row, first:]))
        ok &= bool(np.all(pos[row, first:] == 1))
    check("induction set: clean and corrupted agree before the first position read, differ at and after it", ok,
          "they do not")


def check_command(tmp, path):
    copy = os.path.join(tmp, "copy.h5")
    shutil.copy(path, copy)
    before_rest, (before_data, before_attrs) = file_tree_hashes(copy), patching_hashes(copy)
    run = subprocess.run([HARNESS, "patch", copy], capture_output=True, text=True, timeout=600)
    check("harness patch on a complete run: exit 0", run.returncode == 0, run.stderr[-400:])
    after_rest, (after_data, after_attrs) = file_tree_hashes(copy), patching_hashes(copy)
    check("harness patch writes the end-of-run /patching bits again", before_data == after_data and
          before_attrs == after_attrs, f"{set(k for k in before_data if before_data[k] != after_data.get(k))}")
    check("harness patch changes no other dataset", before_rest == after_rest,
          f"{set(k for k in before_rest if before_rest[k] != after_rest.get(k))}")
    check("harness patch leaves no temporary file", not temporaries(copy), str(temporaries(copy)))
    run = subprocess.run([HARNESS, "patch", copy, "--batches", "2"], capture_output=True, text=True, timeout=600)
    with h5py.File(copy, "r") as f, h5py.File(path, "r") as g:
        n2, n1 = f["patching/clean_tokens"].shape[0], g["patching/clean_tokens"].shape[0]
    check("harness patch --batches 2 doubles the pairs", run.returncode == 0 and n2 == 2 * n1, f"{n1} -> {n2}")


def interrupted_run(tmp):
    """An interrupted results file: a long run stopped by SIGINT (None if it could not be made)."""
    out = os.path.join(tmp, "interrupted.h5")
    sets = TINY + ["train.steps=100000", "output.eval_every=1000", f"output.path={out}"]
    cmd = [HARNESS, "configs/heads12.yaml"] + [a for s in sets for a in ("--set", s)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(3)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=120)
    for p in temporaries(out):
        if p.endswith(".ckpt"):
            os.unlink(p)
    if not os.path.exists(out):
        check("an interrupted run leaves a results file", False, "none")
        return None
    return out


if __name__ == "__main__":
    sys.exit(main())
