#!/usr/bin/python3
# suite: PyTorch reference
# suite-args: --harness {harness}
"""Compare the C harness against the independent PyTorch reference (tests/reference.py).

usage: /usr/bin/python3 tests/test_reference.py [--harness PATH] [--keep] [--self-test]
  --harness PATH  harness binary (default: ./harness at the repo root, the parent of tests/)
  --keep          keep the temporary directory with configs, token files and results
  --self-test     only run the reference's own self-test (finite differences, naive loops, torch AdamW)

Checks (one line each: "ok - ...", "FAIL - ...: details", or "skip - ..." which counts as neither;
the last line is "N passed, M failed"; exit status 1 if anything failed):
  0. the reference's self-test (reference.py --self-test), so the reference is not trusted blindly.
  1. gradients: `harness CONFIG --dump-grads OUT.h5 [--set k=v ...]` on the layouts that break code
     (1 head, 12 heads, E > D, E < D, odd sizes, T = 1, n_layer 1 and 3); the reference recomputes
     loss and every gradient on the dumped params and batch in float64. Then every layout (that
     does not fix its own T) again at T = 1024 and T = 1000, batch 1: the long contexts whose
     attention streams (recomputes its maps in the backward, block by block).
  2. training: `harness CONFIG --set train.steps=0 --set output.path=init.h5`, then
     `harness CONFIG --set train.init_from=init.h5 --set output.path=run.h5` (10 steps, log_every 1);
     /train/loss, /train/lr and the final /params are compared with reference.train_steps started
     from init.h5's /params on the same sequential batches, in float64 (1 head, 12 heads, E > D with
     grad_clip 0.5 so clipping triggers).
  2b. head gates (kernels/head_gate.c through the model): each training run's /heads/ablation_delta
     (zero ablation), /heads/ablation_delta_mean (each head's output replaced by its mean over the
     held-out tokens) and /heads/importance (mean |d loss / d gate|) against reference.head_study
     on the final /params and the same 2 held-out batches (the gated forward g*o + (1-g)*a, autograd).
  2c. learned head gates (train.head_l0 > 0; two cases, one with Louizos et al.'s temperature, a
     wider stretch, GQA and the output gate): the same 10 steps, the reference drawing each step's
     Hard Concrete gates from the generator stream it writes out again (src/base/rng.h's algorithm) and
     adding the L0 penalty to the objective. /params/log_alpha of the steps=0 run equals the
     reference's initialisation bit for bit; /train/loss, the final /params (the reference's baked
     as docs/model.md says), /gates/p_open per step and the final /params/log_alpha as in 2, and
     log_alpha must have moved; 2b and 3 run on these files too. (Injected: the noise of step s+1
     instead of s fails the loss at 1.8e-3 relative, the penalty without its 1/L the kernels' FD.)
  3. attention maps: /attn/maps[-1] of each run.h5 vs reference.attention_maps(final /params,
     /probe/tokens); skipped (not counted) while the harness writes no /attn/maps.

Tolerances (harness float32 vs reference float64). Calibrated by running the reference itself in
float32 against float64 on these configs (float32 noise stayed >= 7x below every bound; the C
harness as first built was >= 100x below) and by injecting bugs (missing weight decay, missing bias
correction, a gradient off by 0.1%, a loss off by 3e-5, permuted heads in the maps: all fail):
  loss of a --dump-grads batch   |l_c - l_ref| <= 1e-5 * |l_ref|
  each gradient tensor           max|g_c - g_ref| <= 1e-4 * max|g_ref| + 1e-7   (worst element reported)
  loss of each of the 10 steps   |l_c - l_ref| <= 1e-4 * |l_ref|
  lr of each step (/train/lr)    |lr_c - lr_ref| <= 1e-5 * lr_ref
  final params after 10 steps   per tensor: max|p_c - p_ref| <= 1e-3 (lr 0.01, so 10% of one full
                                 Adam step; parameters move ~0.05 in total), and
                                 ||p_c - p_ref|| <= 2e-3 * ||p_ref - p_init|| (Frobenius; catches
                                 small systematic errors such as a missing weight decay, which gives
                                 ~6e-3). The K block of b_qkv is exempt from both: its gradient is
                                 exactly zero in exact arithmetic (softmax is shift-invariant per
                                 query), so Adam turns float32 rounding noise into O(lr*g/eps) steps;
                                 it only gets the sanity bound max|diff| <= 2 * sum_s lr_s.
  attention maps                 max|a_c - a_ref| <= 1e-5
  ablation Δloss (zero, mean)    max|d_c - d_ref| <= 1e-6 * eval loss (worst seen 7e-8 * eval loss)
  importance                     as a gradient tensor: 1e-4 * max|ref| + 1e-7 (worst seen 2e-6 * max)
"""
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True   # leave no __pycache__ in tests/
import reference as R  # noqa: E402

HARNESS_TIMEOUT_S = 300
N_TOKENS = 20000
STEPS = 10

GRAD_LOSS_RTOL = 1e-5
GRAD_RTOL, GRAD_ATOL = 1e-4, 1e-7
TRAIN_LOSS_RTOL = 1e-4
TRAIN_LR_RTOL = 1e-5
PARAM_ATOL = 1e-3
PARAM_FROB_RTOL = 2e-3
ATTN_ATOL = 1e-5
DELTA_ATOL = 1e-6   # x the eval loss: a difference of two float32 losses (worst seen 7e-8 x)

BASE = {"vocab_size": 64, "d_model": 32, "n_head": 2, "d_head": 16}

# name -> (model/train overrides as --set pairs). d_head is always given explicitly so that
# E = n_head*d_head is what the case says whatever rule the harness uses to derive it.
GRAD_CASES = [
    ("1 head (D32 H1 dh32)", {"model.d_model": 32, "model.n_head": 1, "model.d_head": 32}),
    ("12 heads (D48 H12 dh4)", {"model.d_model": 48, "model.n_head": 12, "model.d_head": 4}),
    ("E>D (D32 H6 dh8, E48)", {"model.d_model": 32, "model.n_head": 6, "model.d_head": 8}),
    ("E<D (D40 H2 dh7, E14)", {"model.d_model": 40, "model.n_head": 2, "model.d_head": 7}),
    ("odd sizes (V37 D21 H3 dh7 T13 B3)", {"model.vocab_size": 37, "model.d_model": 21, "model.n_head": 3,
                                           "model.d_head": 7, "model.seq_len": 13, "train.batch_size": 3}),
    ("T=1", {"model.seq_len": 1}),
    ("n_layer 1", {"model.n_layer": 1}),
    ("n_layer 3", {"model.n_layer": 3}),
    # the attention layouts of the modern-layouts issue, alone and combined
    ("GQA (H8 Hkv2 dh4)", {"model.n_head": 8, "model.d_head": 4, "model.n_kv_head": 2}),
    ("MQA (H6 Hkv1 dh8)", {"model.n_head": 6, "model.d_head": 8, "model.n_kv_head": 1}),
    ("rotary, full (dh16)", {"model.pos": "rope"}),
    ("rotary, partial (dh16, rope_dims 6, base 500)", {"model.pos": "rope", "model.rope_dims": 6,
                                                       "model.rope_base": 500}),
    ("no positions", {"model.pos": "none"}),
    ("shortformer positions", {"model.pos": "shortformer"}),
    ("attention sink", {"model.sink": "true"}),
    ("sink + GQA + rotary + gate", {"model.sink": "true", "model.n_head": 4, "model.d_head": 8,
                                    "model.n_kv_head": 2, "model.pos": "rope", "model.output_gate": "true"}),
    ("shortformer + MQA + gate", {"model.pos": "shortformer", "model.n_head": 4, "model.d_head": 8,
                                  "model.n_kv_head": 1, "model.output_gate": "true"}),
    ("output gate", {"model.output_gate": "true"}),
    ("GQA + partial rotary + gate, E>D", {"model.n_head": 6, "model.d_head": 8, "model.n_kv_head": 2,
                                          "model.pos": "rope", "model.rope_dims": 4,
                                          "model.output_gate": "true"}),
]
TRAIN_CASES = [
    ("1 head (D32 H1 dh32)", {"model.d_model": 32, "model.n_head": 1, "model.d_head": 32}),
    ("12 heads (D48 H12 dh4)", {"model.d_model": 48, "model.n_head": 12, "model.d_head": 4}),
    ("E>D (D32 H6 dh8) grad_clip 0.5", {"model.d_model": 32, "model.n_head": 6, "model.d_head": 8,
                                        "train.grad_clip": 0.5}),
    # GQA with rotary is the most sensitive layout: float32 rounding grows ~100x faster over the
    # 10 steps than in the others (the step-0 gradients agree to 1e-8), so no clipping here
    ("sink + shortformer (H4 dh8)", {"model.sink": "true", "model.pos": "shortformer",
                                     "model.n_head": 4, "model.d_head": 8}),
    ("GQA + partial rotary + gate (H6 Hkv2 dh8)", {"model.n_head": 6, "model.d_head": 8,
                                                   "model.n_kv_head": 2, "model.pos": "rope",
                                                   "model.rope_dims": 4, "model.output_gate": "true",
                                                   "train.grad_clip": 0}),
]
CLIP_CASE = "E>D (D32 H6 dh8) grad_clip 0.5"
# learned head gates (train.head_l0): the same 10 steps with each step's Hard Concrete gates drawn
# from the generator stream the reference writes out again, and the L0 penalty in the objective
L0_CASES = [
    ("head_l0 0.5 (H4 dh8)", {"model.n_head": 4, "model.d_head": 8, "train.head_l0": 0.5}),
    ("head_l0 3, temperature 2/3, stretch (-0.2, 1.3), GQA + gate", {
        "model.n_head": 4, "model.d_head": 8, "model.n_kv_head": 2, "model.output_gate": "true",
        "train.head_l0": 3, "train.head_l0_temperature": 0.6667, "train.head_l0_stretch_low": -0.2,
        "train.head_l0_stretch_high": 1.3}),
]
# long contexts: every layout of GRAD_CASES that does not fix its own T, at T = 1024 and at an odd
# T = 1000, one sequence each (the attention streams there: no map is kept for its backward)
LONG_T = (1024, 1000)
LONG_BATCH = 1


class Runner:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, ok, what, details=""):
        if ok:
            self.passed += 1
            print(f"ok - {what}" + (f" ({details})" if details else ""), flush=True)
        else:
            self.failed += 1
            print(f"FAIL - {what}: {details}", flush=True)
        return ok

    def skip(self, what, why):
        print(f"skip - {what}: {why}", flush=True)


# ----------------------------------------------------------------------------- setup

def write_tokens(tmp, vocab):
    path = os.path.join(tmp, f"tokens_v{vocab}.bin")
    if not os.path.exists(path):
        rng = np.random.RandomState(1234 + vocab)
        rng.randint(0, vocab, size=N_TOKENS).astype("<u2").tofile(path)
    return path


def write_config(tmp):
    """The base config the test owns: tokens task, sequential order, 10 steps."""
    path = os.path.join(tmp, "base.yaml")
    text = f"""# written by tests/test_reference.py
model:
  vocab_size: {BASE['vocab_size']}
  d_model: {BASE['d_model']}
  n_head: {BASE['n_head']}
  d_head: {BASE['d_head']}
  n_layer: 2
  seq_len: 16
train:
  steps: {STEPS}
  batch_size: 4
  lr: 0.01
  warmup_steps: 3
  weight_decay: 0.1
  seed: 1
  threads: 2
data:
  task: tokens
  path: {write_tokens(tmp, BASE['vocab_size'])}
  order: sequential
output:
  path: {os.path.join(tmp, 'run.h5')}
  log_every: 1
  eval_every: 5
  eval_batches: 2
"""
    with open(path, "w") as f:
        f.write(text)
    return path


def case_sets(tmp, overrides):
    """--set pairs of a case: its overrides, a token file matching its vocabulary, and
    output.probe_len = seq_len where seq_len is below the base 16 (probe length <= seq_len)."""
    sets = dict(overrides)
    vocab = int(sets.get("model.vocab_size", BASE["vocab_size"]))
    if vocab != BASE["vocab_size"]:
        sets["data.path"] = write_tokens(tmp, vocab)
    seq_len = int(sets.get("model.seq_len", 16))
    if seq_len < 16:
        sets["output.probe_len"] = seq_len
    return sets


def harness_path(argv):
    if "--harness" in argv:
        return os.path.abspath(argv[argv.index("--harness") + 1])
    return os.path.join(ROOT, "harness")


def run_harness(harness, config, extra, sets):
    """Run the harness; returns (ok, message). Fails loudly if it is missing."""
    if not os.path.isfile(harness) or not os.access(harness, os.X_OK):
        return False, f"harness not found or not executable at {harness} (build it first)"
    cmd = [harness, config] + list(extra)
    for k, v in sets.items():
        cmd += ["--set", f"{k}={v}"]
    try:
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=HARNESS_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return False, f"timed out after {HARNESS_TIMEOUT_S}s: {' '.join(cmd)}"
    if p.returncode != 0:
        tail = (p.stderr.strip() or p.stdout.strip()).splitlines()[-5:]
        return False, f"exit status {p.returncode}: {' '.join(cmd)}\n    " + "\n    ".join(tail)
    return True, ""


# ----------------------------------------------------------------------------- 1. gradients

def check_grads(run, harness, tmp, config, label, overrides):
    what = f"grads {label}"
    out = os.path.join(tmp, "grads_" + "".join(c if c.isalnum() else "_" for c in label) + ".h5")
    sets = case_sets(tmp, overrides)
    sets["output.path"] = out[:-3] + "_run.h5"
    ok, msg = run_harness(harness, config, ["--dump-grads", out], sets)
    if not ok:
        run.check(False, what, msg)
        return
    try:
        cfg, params, grads_c, (x, y, mask), loss_c = R.load_grad_dump(out)
    except Exception as e:
        run.check(False, what, f"reading {out}: {e}")
        return
    # the dump must be of the layout asked for
    def norm(v):  # numbers compare as numbers, booleans (HDF5 bool or "true") as 0/1, enum names as text
        if str(v) in ("true", "false", "True", "False"):
            return float(str(v).lower() == "true")
        try:
            return float(v)
        except (TypeError, ValueError):
            return str(v)
    want = {k.split(".")[1]: norm(v) for k, v in sets.items() if k.split(".")[0] == "model"}
    got = {k: norm(cfg.get(k, -1)) for k in want}
    if got != want:
        run.check(False, what, f"/config of the dump is {got}, asked for {want}")
        return
    V, D, H, dh, L, T = R.dims(cfg)
    B = int(R.need(cfg, "batch_size"))
    problems = []
    if tuple(x.shape) != (B, T) or tuple(y.shape) != (B, T) or tuple(mask.shape) != (B, T):
        problems.append(f"batch shapes {tuple(x.shape)}, {tuple(y.shape)}, {tuple(mask.shape)}, expected ({B},{T})")
    elif int(x.min()) < 0 or int(x.max()) >= V or int(y.min()) < 0 or int(y.max()) >= V:
        problems.append(f"token ids outside [0,{V})")
    elif not bool((mask == 1).all()):
        problems.append("tokens task: /batch/mask should be all ones")
    elif T > 1 and not torch.equal(y[:, :-1], x[:, 1:]):
        problems.append("tokens task: targets are not the inputs shifted by one")
    if problems:
        run.check(False, f"{what}: batch", "; ".join(problems))
        return

    loss_ref, g_ref = R.grads(params, cfg, x, y, mask, dtype=torch.float64)
    loss_ref = float(loss_ref)
    rel = abs(loss_c - loss_ref) / abs(loss_ref)
    run.check(rel <= GRAD_LOSS_RTOL, f"{what}: loss",
              f"harness {loss_c:.9g}, reference {loss_ref:.9g}, rel err {rel:.2g} (tol {GRAD_LOSS_RTOL:g})")

    failures, worst, worst_ratio = [], "", -1.0
    for name in R.param_shapes(cfg):
        ok, msg = R.compare(name, grads_c[name], g_ref[name], GRAD_RTOL, GRAD_ATOL)
        ref_max = float(g_ref[name].abs().max())
        err = float((grads_c[name].double() - g_ref[name]).abs().max())
        ratio = err / (GRAD_ATOL + GRAD_RTOL * ref_max)
        if not ok:
            failures.append(msg)
        if ratio > worst_ratio:
            worst_ratio, worst = ratio, msg
    if failures:
        run.check(False, f"{what}: {len(failures)} of {len(g_ref)} gradient tensors",
                  "\n    " + "\n    ".join(failures))
    else:
        run.check(True, f"{what}: all {len(g_ref)} gradient tensors",
                  f"worst err/tol {worst_ratio:.2g}: {worst}")


# ----------------------------------------------------------------------------- 2. training

def k_block_mask(name, cfg):
    """Boolean mask of the K block of a b_qkv tensor (the gradient-free gauge direction)."""
    _, _, H, dh, _, _ = R.dims(cfg)
    n_kv, pos, rope_dims, _, _ = R.layout(cfg)
    E, Ekv = H * dh, n_kv * dh
    m = torch.zeros(E + 2 * Ekv, dtype=torch.bool)
    if name.endswith("b_qkv"):
        m[E:E + Ekv] = True
        if pos == "rope":  # rotated dims of the K bias do move the scores; the others stay a gauge
            for h in range(n_kv):
                m[E + h * dh:E + h * dh + rope_dims] = False
    return m


def check_train(run, harness, tmp, config, label, overrides):
    what = f"train {label}"
    tag = "".join(c if c.isalnum() else "_" for c in label)
    init_h5 = os.path.join(tmp, f"init_{tag}.h5")
    run_h5 = os.path.join(tmp, f"run_{tag}.h5")
    sets = case_sets(tmp, overrides)
    ok, msg = run_harness(harness, config, [], dict(sets, **{"train.steps": 0, "output.path": init_h5}))
    if not ok:
        run.check(False, f"{what}: init run (train.steps=0)", msg)
        return None
    ok, msg = run_harness(harness, config, [], dict(sets, **{"train.init_from": init_h5, "output.path": run_h5}))
    if not ok:
        run.check(False, f"{what}: 10-step run from init_from", msg)
        return None

    import h5py
    try:
        _, p_init = R.load_params(init_h5)
        cfg, p_final = R.load_params(run_h5)
        with h5py.File(run_h5, "r") as f:
            loss_c = np.asarray(f["train/loss"][()], dtype=np.float64)
            lr_c = np.asarray(f["train/lr"][()], dtype=np.float64) if "train/lr" in f else None
            gn_c = np.asarray(f["train/grad_norm"][()], dtype=np.float64) if "train/grad_norm" in f else None
            step_c = np.asarray(f["train/step"][()]) if "train/step" in f else None
        steps = int(R.need(cfg, "steps"))
        token_file = sets.get("data.path", os.path.join(tmp, f"tokens_v{BASE['vocab_size']}.bin"))
        batches = R.sequential_batches(token_file, cfg, steps)
    except Exception as e:
        run.check(False, what, f"reading {init_h5} / {run_h5}: {type(e).__name__}: {e}")
        return None
    if steps != STEPS or loss_c.shape != (STEPS,):
        run.check(False, f"{what}: /train/loss", f"steps {steps}, /train/loss shape {loss_c.shape}, "
                  f"expected {STEPS} rows (log_every 1); /train/step {step_c}")
        return run_h5

    params = R.cast(p_init, torch.float64)
    hist = {}
    l0 = R.l0_settings(cfg)
    log_alpha = None
    if l0:
        log_alpha = check_gate_init(run, what, init_h5, cfg)
        if log_alpha is None:
            return None
        la_init = log_alpha.clone()
    loss_ref = R.train_steps(params, cfg, batches, steps, history=hist, log_alpha=log_alpha)
    if l0:
        R.bake(params, log_alpha, cfg)
        check_gate_training(run, what, run_h5, hist, log_alpha, la_init)

    rel = np.abs(loss_c - np.array(loss_ref)) / np.abs(np.array(loss_ref))
    rows = "  ".join(f"{s}:{loss_c[s]:.7g}/{loss_ref[s]:.7g}" for s in range(steps))
    run.check(bool((rel <= TRAIN_LOSS_RTOL).all()), f"{what}: /train/loss per step",
              f"worst rel err {rel.max():.2g} at step {int(rel.argmax())} (tol {TRAIN_LOSS_RTOL:g})"
              + ("" if (rel <= TRAIN_LOSS_RTOL).all() else f"; step:harness/reference {rows}"))

    if lr_c is None or lr_c.shape != (steps,):
        run.check(False, f"{what}: /train/lr", "missing or wrong shape" if lr_c is None else f"shape {lr_c.shape}")
    else:
        lr_ref = np.array(hist["lr"])
        lrel = np.abs(lr_c - lr_ref) / lr_ref
        run.check(bool((lrel <= TRAIN_LR_RTOL).all()), f"{what}: /train/lr schedule",
                  f"worst rel err {lrel.max():.2g} at step {int(lrel.argmax())}"
                  + ("" if (lrel <= TRAIN_LR_RTOL).all() else
                     f"; harness {np.array2string(lr_c, precision=6)}, reference {np.array2string(lr_ref, precision=6)}"))

    n_clip = sum(hist["clipped"])
    if label == CLIP_CASE:
        run.check(n_clip > 0, f"{what}: gradient clipping is exercised",
                  f"reference clipped {n_clip}/{steps} steps at grad_clip {R.need(cfg, 'grad_clip')}, "
                  f"pre-clip norms {['%.3g' % v for v in hist['grad_norm']]}")
    if gn_c is not None and gn_c.shape == (steps,):
        pre = np.array(hist["grad_norm"])
        print(f"# note - {what}: /train/grad_norm vs reference pre-clip norm: max rel diff "
              f"{np.max(np.abs(gn_c - pre) / pre):.2g} (not a check; clipped {n_clip}/{steps} steps)", flush=True)

    budget = 2 * sum(hist["lr"])
    failures, worst, worst_ratio = [], "", -1.0
    for name in R.param_shapes(cfg):
        got, ref, start = p_final[name].double(), params[name], p_init[name].double()
        gauge = k_block_mask(name, cfg) if name.endswith("b_qkv") else None
        if gauge is not None and bool(gauge.any()):
            kerr = float((got[gauge] - ref[gauge]).abs().max())
            if not kerr <= budget:
                failures.append(f"{name} K block: max|diff| {kerr:.3g} > sanity bound 2*sum(lr) {budget:.3g}")
            got, ref, start = got[~gauge], ref[~gauge], start[~gauge]
        ok, msg = R.compare(name, got, ref, 0.0, PARAM_ATOL)
        frob = float((got - ref).norm()) / max(float((ref - start).norm()), 1e-30)
        msg += f", ||diff||/||p_ref-p_init|| {frob:.2g} (tol {PARAM_FROB_RTOL:g})"
        if not ok or not frob <= PARAM_FROB_RTOL:
            failures.append(msg)
        ratio = max(float((got - ref).abs().max()) / PARAM_ATOL, frob / PARAM_FROB_RTOL)
        if ratio > worst_ratio:
            worst_ratio, worst = ratio, msg
    if failures:
        run.check(False, f"{what}: final /params after {steps} steps ({len(failures)} tensors)",
                  "\n    " + "\n    ".join(failures))
    else:
        run.check(True, f"{what}: final /params after {steps} steps", f"worst err/tol {worst_ratio:.2g}: {worst}")
    return run_h5


def check_gate_init(run, what, init_h5, cfg):
    """/params/log_alpha of the steps=0 run against the reference's initialisation (the same
    seed: init_from does not read log_alpha, so the 10-step run starts from the same values).
    Returns them (float64) or None."""
    import h5py
    _, _, H, _, L, _ = R.dims(cfg)
    with h5py.File(init_h5, "r") as f:
        got = np.asarray(f["params/log_alpha"][()]) if "params/log_alpha" in f else None
    ref = R.head_gate_init(R.need(cfg, "seed"), L, H).numpy()
    ok = got is not None and got.shape == ref.shape and np.array_equal(got, ref)
    run.check(ok, f"{what}: /params/log_alpha at step 0 == the reference's initialisation (bit for bit)",
              "missing" if got is None else f"max|diff| {np.abs(got - ref).max() if got.shape == ref.shape else got.shape}")
    return torch.from_numpy(got.astype(np.float64)) if ok else None


def check_gate_training(run, what, run_h5, hist, log_alpha, la_init):
    """/gates/p_open per step and the final /params/log_alpha against the reference's."""
    import h5py
    with h5py.File(run_h5, "r") as f:
        p_c = np.asarray(f["gates/p_open"][()], dtype=np.float64) if "gates/p_open" in f else None
        la_c = np.asarray(f["params/log_alpha"][()], dtype=np.float64) if "params/log_alpha" in f else None
        steps_g = np.asarray(f["gates/step"][()]) if "gates/step" in f else None
        steps_t = np.asarray(f["train/step"][()])
    p_ref = torch.stack(hist["p_open"]).numpy()
    if p_c is None or p_c.shape != p_ref.shape:
        run.check(False, f"{what}: /gates/p_open", f"shape {None if p_c is None else p_c.shape}, expected {p_ref.shape}")
    else:
        ok, msg = R.compare("/gates/p_open", p_c, p_ref, 0.0, TRAIN_LOSS_RTOL)
        run.check(ok and np.array_equal(steps_g, steps_t), f"{what}: /gates/p_open per step == reference "
                  "(and /gates/step == /train/step)", msg)
    if la_c is None:
        run.check(False, f"{what}: final /params/log_alpha", "missing")
    else:
        ok, msg = R.compare("/params/log_alpha", la_c, log_alpha, 0.0, PARAM_ATOL)
        moved = float(np.abs(log_alpha.numpy() - la_init.numpy()).max())
        run.check(ok and moved > 10 * PARAM_ATOL, f"{what}: final /params/log_alpha after the steps == reference",
                  msg + f"; log_alpha moved by up to {moved:.3g} from its initialisation")


# ----------------------------------------------------------------------------- 2b. head gates

def check_gates(run, label, results_h5, token_file):
    """/heads/ablation_delta (zero), ablation_delta_mean and importance of the final model against
    the reference's gated forward and autograd on the same held-out batches (kernels/head_gate.c:
    the gate mix towards 0 or the mean, and d loss / d gate)."""
    import h5py
    what = f"gates {label}"
    cfg, params = R.load_params(results_h5)
    with h5py.File(results_h5, "r") as f:
        got = {k: torch.from_numpy(np.asarray(f[f"heads/{k}"][()], dtype=np.float64))
               for k in ("ablation_delta", "ablation_delta_mean", "importance")}
        eval_loss = float(np.asarray(f["eval/loss"][-1]))
    zero, mean, importance = R.head_study(params, cfg, R.eval_batches(token_file, cfg))
    for name, ref, atol, rtol in (("ablation_delta", zero, DELTA_ATOL * eval_loss, 0.0),
                                  ("ablation_delta_mean", mean, DELTA_ATOL * eval_loss, 0.0),
                                  ("importance", importance, GRAD_ATOL, GRAD_RTOL)):
        ok, msg = R.compare(f"/heads/{name}", got[name], ref, rtol, atol)
        run.check(ok and float(ref.abs().max()) > 0, f"{what}: /heads/{name} == reference", msg)


def check_heldout(run, label, results_h5, token_file):
    """/heldout: each split's loss against the reference's float64 forward over exactly the
    windows the file says it scored (first_token, windows of split_windows, the i-th of n being
    floor(i*N/n)), every window at most once; and the split boundaries against the documented
    rule (reference.split_windows)."""
    import h5py
    what = f"heldout {label}"
    cfg, params = R.load_params(results_h5)
    T, B = int(R.need(cfg, "seq_len")), int(R.need(cfg, "batch_size"))
    tok = np.fromfile(token_file, dtype="<u2").astype(np.int64)
    rule = R.split_windows(len(tok), cfg)
    with h5py.File(results_h5, "r") as f:
        g = f["heldout"]
        names = [x.decode() if isinstance(x, bytes) else str(x) for x in g["split"][()]]
        rows = {n: {k: g[k][i] for k in ("loss", "tokens", "windows", "split_windows", "first_token")}
                for i, n in enumerate(names)}
    run.check(names == list(rule), f"{what}: the splits are {list(rule)}", f"{names}")
    for name, row in rows.items():
        first, n_tok = rule[name]
        N = (n_tok - 1) // T
        windows = R.selection(N, 0, B)  # output.final_eval_batches: all
        with torch.no_grad():
            batches = R.window_batches(tok, first, windows, T, B)
            total = sum(float(R.forward(R.cast(params, torch.float64), cfg, x, y, m)[0]) * float(m.sum())
                        for x, y, m in batches)
        ref = total / (len(windows) * T)
        run.check(int(row["first_token"]) == first and int(row["split_windows"]) == N
                  and int(row["windows"]) == len(windows) == len(set(windows))
                  and int(row["tokens"]) == len(windows) * T,
                  f"{what}: {name} covers every one of its {N} windows once, from token {first}",
                  f"{row}")
        run.check(abs(float(row["loss"]) - ref) <= 1e-5 * max(1.0, ref),
                  f"{what}: /heldout {name} loss == the reference's forward over those windows (1e-5)",
                  f"{float(row['loss']):.9f} vs {ref:.9f}")


def icl_bands(position_tokens, task):
    """docs/results-format.md's ICL bands, written out again: Olsson et al.'s token 50 and 500 of
    512 scaled to [s, T), the positions every window scores; None for two_source."""
    T, most = len(position_tokens), position_tokens.max()
    s = T
    while s > 0 and most > 0 and position_tokens[s - 1] == most:
        s -= 1
    if task == "two_source" or T - s < 2:
        return None
    R = T - s
    def band(a, b):
        lo, hi = s + a * R // 512, s + b * R // 512
        return lo, max(hi, lo + 1)
    return s, band(40, 60), band(490, 510)


def check_positions(run, label, results_h5, token_file):
    """/eval/loss_by_position and /eval/icl_score of the last evaluation (the final /params)
    against the reference's float64 per-token cross-entropy over the periodic evaluations'
    windows (reference.eval_batches); the ICL bands against the documented rule."""
    import h5py
    what = f"positions {label}"
    cfg, params = R.load_params(results_h5)
    with h5py.File(results_h5, "r") as f:
        got = np.asarray(f["eval/loss_by_position"][-1])
        tokens = np.asarray(f["eval/position_tokens"][()])
        icl = float(f["eval/icl_score"][-1])
        eval_loss = float(f["eval/loss"][-1])
        attrs = dict(f["eval/icl_score"].attrs)
    total, count = 0.0, 0.0
    with torch.no_grad():
        for x, y, m in R.eval_batches(token_file, cfg):
            logits = []
            R.forward(R.cast(params, torch.float64), cfg, x, y, m, logits_out=logits)
            ce = torch.nn.functional.cross_entropy(logits[0].transpose(1, 2), y, reduction="none")
            total, count = total + (ce * m).sum(0).numpy(), count + m.sum(0).numpy()
    ref = total / count
    ok, msg = R.compare("/eval/loss_by_position[-1]", got, ref, 0.0, 1e-5 * max(1.0, float(ref.max())))
    run.check(ok and np.array_equal(tokens, count), f"{what}: /eval/loss_by_position[-1] == the reference's "
              "per-token loss over the evaluations' windows (1e-5), position_tokens their counts", msg)
    run.check(abs((got * tokens).sum() / tokens.sum() - eval_loss) <= 1e-6 * eval_loss,
              f"{what}: weighted by position_tokens it is /eval/loss[-1] (1e-6 relative)")
    bands = icl_bands(count, "tokens")
    s, (e0, e1), (l0, l1) = bands
    named = [attrs.get(k) for k in ("first_scored", "early_first", "early_end", "late_first", "late_end")]
    want = ref[l0:l1].mean() - ref[e0:e1].mean()
    run.check(named == [s, e0, e1, l0, l1] and abs(icl - want) <= 2e-5 * max(1.0, float(ref.max())),
              f"{what}: /eval/icl_score[-1] == the reference's late minus early band {l0}..{l1 - 1} - {e0}..{e1 - 1}",
              f"{icl} vs {want}; attributes {named}")


# ----------------------------------------------------------------------------- 3. attention maps

def check_attention(run, label, results_h5):
    import h5py
    what = f"attn {label}"
    with h5py.File(results_h5, "r") as f:
        if "attn/maps" not in f:
            run.skip(what, f"{os.path.basename(results_h5)} has no /attn/maps yet")
            return
        try:
            maps = np.asarray(f["attn/maps"][-1], dtype=np.float64)
            attn_step = int(np.asarray(f["attn/step"][-1])) if "attn/step" in f else None
            tokens = np.asarray(f["probe/tokens"][()])
        except Exception as e:
            run.check(False, what, f"reading /attn, /probe: {type(e).__name__}: {e}")
            return
    cfg, params = R.load_params(results_h5)
    ref = R.attention_maps(params, cfg, tokens)
    ok, msg = R.compare("/attn/maps[-1]", maps, ref, 0.0, ATTN_ATOL)
    run.check(ok, f"{what}: /attn/maps[-1] == reference maps of the final /params on /probe/tokens",
              msg + f"; /attn/step[-1] = {attn_step}, train.steps = {cfg.get('steps')}")


# ----------------------------------------------------------------------------- main

def main(argv):
    torch.set_num_threads(2)
    run = Runner()
    print("# reference self-test", flush=True)
    p, f = R.self_test(verbose=True)
    run.passed += p
    run.failed += f
    if "--self-test" in argv:
        print(f"{run.passed} passed, {run.failed} failed")
        return 1 if run.failed else 0

    harness = harness_path(argv)
    tmp = tempfile.mkdtemp(prefix="test_reference_")
    print(f"# harness {harness}; temporary files in {tmp}", flush=True)
    try:
        config = write_config(tmp)
        print("# gradients (--dump-grads) vs reference autograd in float64", flush=True)
        for label, over in GRAD_CASES:
            try:
                check_grads(run, harness, tmp, config, label, over)
            except Exception as e:
                run.check(False, f"grads {label}", f"{type(e).__name__}: {e}")
        print(f"# long contexts: gradients at T = {' and '.join(map(str, LONG_T))}, every layout", flush=True)
        for T in LONG_T:
            for label, over in GRAD_CASES:
                if "model.seq_len" in over:
                    continue
                long_over = dict(over, **{"model.seq_len": T, "train.batch_size": LONG_BATCH})
                try:
                    check_grads(run, harness, tmp, config, f"{label}, T={T} B={LONG_BATCH}", long_over)
                except Exception as e:
                    run.check(False, f"grads {label}, T={T}", f"{type(e).__name__}: {e}")
        print(f"# {STEPS} AdamW steps from init_from vs reference train_steps in float64", flush=True)
        runs = []
        for label, over in TRAIN_CASES + L0_CASES:
            try:
                path = check_train(run, harness, tmp, config, label, over)
                if path:
                    runs.append((label, path))
                    token_file = case_sets(tmp, over).get(
                        "data.path", os.path.join(tmp, f"tokens_v{BASE['vocab_size']}.bin"))
                    check_gates(run, label, path, token_file)
                    check_heldout(run, label, path, token_file)
                    check_positions(run, label, path, token_file)
            except Exception as e:
                run.check(False, f"train {label}", f"{type(e).__name__}: {e}")
        print("# attention maps", flush=True)
        if not runs:
            run.check(False, "attn", "no results file to read (the training runs failed)")
        for label, path in runs:
            try:
                check_attention(run, label, path)
            except Exception as e:
                run.check(False, f"attn {label}", f"{type(e).__name__}: {e}")
    finally:
        if "--keep" in argv:
            print(f"# kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"{run.passed} passed, {run.failed} failed")
    return 1 if run.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
