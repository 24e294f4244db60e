"""heads.harness: the ./harness program seen from Python: where it is, the command line of one
run, and `harness --shapes` (parameters, FLOPs per token) parsed.

The repository root is two levels above this file; ./harness there is the binary (override:
$HARNESS). Knows nothing of experiments or results files.
"""
import os
import re
import subprocess

from .configs import format_value


REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HARNESS = os.environ.get("HARNESS", os.path.join(REPO, "harness"))

# Config keys by section, as in src/config.c's descriptor table. Used only to expand a bare key
# name (`n_head`) to its section (`model.n_head`) and to suggest spellings; the harness itself
# is the judge of what is valid (the sweep checks every run with `harness --shapes` first).
CONFIG_KEYS = {
    "model": ["vocab_size", "d_model", "n_head", "d_head", "n_layer", "seq_len"],
    "train": ["steps", "batch_size", "lr", "min_lr_ratio", "warmup_steps", "lr_schedule",
              "weight_decay", "beta1", "beta2", "eps", "grad_clip", "seed", "threads", "init_from"],
    "data": ["task", "path", "order", "eval_fraction", "min_period", "max_period"],
    "output": ["path", "log_every", "eval_every", "eval_batches", "attn_every", "probes",
               "probe_len", "probe_text"],
}
# The harness's defaults for the keys the width rules need (src/config.c), used when neither the
# base config nor the experiment sets them.
HARNESS_DEFAULTS = {"model.d_model": 96, "model.n_head": 12, "model.d_head": 0, "train.seed": 0}


def harness_command(base_path, overrides, extra=()):
    cmd = [HARNESS, base_path]
    for key, value in overrides.items():
        cmd += ["--set", f"{key}={format_value(value)}"]
    return cmd + list(extra)


def parse_shapes(text):
    """(params, forward FLOPs per token, E) from `harness --shapes` output; None where not found."""
    params = flops = width = None
    section = None
    for line in text.splitlines():
        if line.startswith("parameters"):
            section = "params"
        elif line.startswith("matmul FLOPs"):
            section = "flops"
        m = re.match(r"\s*total\s+([\d,]+)\s+([\d,]+)\s*$", line)
        if m and section == "params":
            params = int(m.group(2).replace(",", ""))
        m = re.match(r"\s*total forward\s+([\d,]+)", line)
        if m:
            flops = int(m.group(1).replace(",", ""))
        m = re.search(r"E=H\*d_head=(\d+)", line)
        if m:
            width = int(m.group(1))
    return params, flops, width


def shapes_formula(cfg):
    """Parameters and forward FLOPs per token from the DESIGN.md formulas (a check on --shapes)."""
    V, D, H = cfg["vocab_size"], cfg["d_model"], cfg["n_head"]
    dh = cfg["d_head"] or D // H
    E, L, T = H * dh, cfg["n_layer"], cfg["seq_len"]
    per_layer = 3 * D * E + 3 * E + E * D + D + 2 * D
    params = V * D + T * D + L * per_layer + 2 * D + D * V
    flops = L * (2 * D * 3 * E + 2 * T * E + 2 * T * E + 2 * E * D) + 2 * D * V
    return params, flops


def run_shapes(base_path, overrides):
    """Run `harness --shapes`; returns (ok, params, flops, E, message)."""
    cmd = harness_command(base_path, overrides)
    cmd.insert(1, "--shapes")
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=60)
    except OSError as e:
        return False, None, None, None, f"cannot run {HARNESS}: {e.strerror} (run `make` first?)"
    if p.returncode != 0:
        return False, None, None, None, (p.stderr.strip() or p.stdout.strip()
                                         or f"harness --shapes exited with {p.returncode}")
    params, flops, width = parse_shapes(p.stdout)
    return True, params, flops, width, ""
