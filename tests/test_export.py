#!/usr/bin/python3
# suite: export to TransformerLens, torch and npz (round trips)
# suite-args: --harness {harness}
"""scripts/export round trips: a run exported to TransformerLens, loaded into a PyTorch model built
from TransformerLens's conventions, reproduces the harness's own numbers.

usage: /usr/bin/python3 tests/test_export.py [--harness PATH] [--keep]

TransformerLens itself cannot be installed on these machines (no PyPI), so TLAttnOnly below is a
HookedTransformer (attn_only, normalization_type "LN") rebuilt from TransformerLens's source
(transformer_lens/components: Embed, PosEmbed, LayerNorm, AbstractAttention,
GroupedQueryAttention, Unembed): the same parameter names and shapes, the same arithmetic
(einsum per head, scores / sqrt(d_head), tril mask with IGNORE = -inf, rotate_every_two with
rotary_adjacent_pairs False, sin/cos from pos / base^(2i/rotary_dim)). It shares no code with the
harness or tests/reference.py and reads only the exported files (OUT.pt and OUT.json).

Checks, per expressible layout (learned positions, rotary full and partial, grouped K/V with and
without rotary, multi-query, no positions, E != D), each a short training run:
  - the state dict's names and shapes are exactly TLAttnOnly's (strict load);
  - its attention patterns on /probe/tokens equal /attn/maps[-1]: max|diff| <= 1e-5;
  - its last-position logits equal those `harness inspect --tokens ... --logits` prints:
    max|diff| <= 1e-5 * max(1, max|logit|) (float32 harness vs float64 model);
  - --to torch and --to npz give back /params bit for bit, with the config beside them.
Refusals: output gate, sink and shortformer (TransformerLens cannot express them; the message
names the switch), an interrupted and a diverged run, an unknown format, a link or a file where an
output folder is to be made: exit 2, one line, nothing written. A missing output folder is made.
"""
import json
import math
import os
import re
import signal
import subprocess
import sys

import h5py
import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EXPORT = os.path.join(ROOT, "scripts", "export")
sys.dont_write_bytecode = True
sys.path.insert(0, HERE)
from checks import check, temp_suite  # noqa: E402
torch.set_num_threads(1)

MAP_ATOL = 1e-5
LOGIT_RTOL = 1e-5

# name -> --set overrides of the base config (tokens task, V 48, D 32, 2 layers, T 16)
LAYOUTS = [
    ("learned positions (H4 dh8)", {}),
    ("rotary, full (H4 dh8)", {"model.pos": "rope"}),
    ("rotary, partial (dh8, rope_dims 4, base 500)", {"model.pos": "rope", "model.rope_dims": 4,
                                                      "model.rope_base": 500}),
    ("grouped K/V (H4 Hkv2)", {"model.n_kv_head": 2}),
    ("grouped K/V + partial rotary (H6 Hkv2 dh8, E>D)", {"model.n_head": 6, "model.n_kv_head": 2,
                                                          "model.pos": "rope", "model.rope_dims": 6}),
    ("multi-query (H4 Hkv1)", {"model.n_kv_head": 1}),
    ("no positions", {"model.pos": "none"}),
    ("E<D (H2 dh5)", {"model.n_head": 2, "model.d_head": 5}),
]
REFUSED = [
    ("output gate", {"model.output_gate": "true"}, "model.output_gate"),
    ("attention sink", {"model.sink": "true"}, "model.sink"),
    ("shortformer positions", {"model.pos": "shortformer"}, "model.pos is shortformer"),
]


# ------------------------------------------------------------------------------- TransformerLens

class TLLayerNorm(torch.nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.w, self.b, self.eps = torch.nn.Parameter(torch.ones(d)), torch.nn.Parameter(torch.zeros(d)), eps

    def forward(self, x):
        x = x - x.mean(-1, keepdim=True)
        return x / (x.pow(2).mean(-1, keepdim=True) + self.eps).sqrt() * self.w + self.b


class TLAttention(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        H, D, dh = c["n_heads"], c["d_model"], c["d_head"]
        self.c, self.kv = c, c.get("n_key_value_heads") or H
        P = lambda *s: torch.nn.Parameter(torch.zeros(*s))
        self.W_Q, self.b_Q, self.W_O, self.b_O = P(H, D, dh), P(H, dh), P(H, dh, D), P(D)
        g = "_" if "n_key_value_heads" in c else ""
        for n in ("W_K", "W_V"):
            setattr(self, g + n, P(self.kv, D, dh))
        for n in ("b_K", "b_V"):
            setattr(self, g + n, P(self.kv, dh))
        self.g = g
        if c["positional_embedding_type"] == "rotary":
            r = c["rotary_dim"]
            freq = c["rotary_base"] ** (torch.arange(r // 2, dtype=torch.float64) / (r / 2))
            freq = torch.cat([freq, freq])                        # einops "d -> (2 d)": not adjacent
            angles = torch.arange(c["n_ctx"], dtype=torch.float64)[:, None] / freq[None, :]
            self.sin, self.cos = torch.sin(angles), torch.cos(angles)

    def rotary(self, x):                                          # x [batch, pos, head, d_head]
        r, T = self.c["rotary_dim"], x.shape[1]
        x_rot, x_pass = x[..., :r], x[..., r:]
        flip = torch.cat([-x_rot[..., r // 2:], x_rot[..., :r // 2]], dim=-1)   # rotate_every_two
        out = x_rot * self.cos[None, :T, None, :] + flip * self.sin[None, :T, None, :]
        return torch.cat([out, x_pass], dim=-1)

    def forward(self, x):
        rep = self.c["n_heads"] // self.kv
        W_K, b_K = getattr(self, self.g + "W_K"), getattr(self, self.g + "b_K")
        W_V, b_V = getattr(self, self.g + "W_V"), getattr(self, self.g + "b_V")
        q = torch.einsum("bpm,hmd->bphd", x, self.W_Q) + self.b_Q
        k = torch.einsum("bpm,hmd->bphd", x, W_K) + b_K
        v = torch.einsum("bpm,hmd->bphd", x, W_V) + b_V
        if self.c["positional_embedding_type"] == "rotary":
            q, k = self.rotary(q), self.rotary(k)
        k, v = k.repeat_interleave(rep, dim=2), v.repeat_interleave(rep, dim=2)
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(self.c["d_head"])
        T = x.shape[1]
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
        pattern = torch.softmax(torch.where(mask, scores, torch.tensor(-torch.inf, dtype=scores.dtype)), -1)
        z = torch.einsum("bhqk,bkhd->bqhd", pattern, v)
        return torch.einsum("bqhd,hdm->bqm", z, self.W_O) + self.b_O, pattern


class TLBlock(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.ln1, self.attn = TLLayerNorm(c["d_model"], c["eps"]), TLAttention(c)


class TLAttnOnly(torch.nn.Module):
    """HookedTransformer(cfg) for attn_only, LN, standard or rotary positions: parameters only."""

    def __init__(self, c):
        super().__init__()
        assert c["attn_only"] and c["normalization_type"] == "LN"
        self.c = c
        self.embed = torch.nn.Module()
        self.embed.W_E = torch.nn.Parameter(torch.zeros(c["d_vocab"], c["d_model"]))
        if c["positional_embedding_type"] != "rotary":
            self.pos_embed = torch.nn.Module()
            self.pos_embed.W_pos = torch.nn.Parameter(torch.zeros(c["n_ctx"], c["d_model"]))
        self.blocks = torch.nn.ModuleList([TLBlock(c) for _ in range(c["n_layers"])])
        self.ln_final = TLLayerNorm(c["d_model"], c["eps"])
        self.unembed = torch.nn.Module()
        self.unembed.W_U = torch.nn.Parameter(torch.zeros(c["d_model"], c["d_vocab_out"]))
        self.unembed.b_U = torch.nn.Parameter(torch.zeros(c["d_vocab_out"]))

    def forward(self, tokens):
        resid = self.embed.W_E[tokens]
        if self.c["positional_embedding_type"] == "standard":
            resid = resid + self.pos_embed.W_pos[: tokens.shape[1]]
        patterns = []
        for block in self.blocks:
            out, pattern = block.attn(block.ln1(resid))
            resid = resid + out
            patterns.append(pattern)
        return self.ln_final(resid) @ self.unembed.W_U + self.unembed.b_U, patterns


# ------------------------------------------------------------------------------- the test

def base_config(tmp):
    rng = np.random.RandomState(7)
    # a learnable stream: a few repeated phrases, so the short run moves the parameters
    phrases = [rng.randint(0, 48, size=rng.randint(3, 9)) for _ in range(20)]
    stream = np.concatenate([phrases[i] for i in rng.randint(0, 20, size=2000)]).astype("<u2")
    stream.tofile(os.path.join(tmp, "tokens.bin"))
    path = os.path.join(tmp, "base.yaml")
    with open(path, "w") as f:
        f.write(f"""# written by tests/test_export.py
model: {{vocab_size: 48, d_model: 32, n_head: 4, d_head: 8, n_layer: 2, seq_len: 16}}
train: {{steps: 40, batch_size: 8, lr: 0.01, warmup_steps: 5, threads: 1}}
data: {{task: tokens, path: {tmp}/tokens.bin}}
output: {{eval_every: 20, eval_batches: 1, probes: 3}}
""")
    return path


def harness_run(harness, config, out, sets, expect=0):
    cmd = [harness, config, "--set", f"output.path={out}"]
    for k, v in sets.items():
        cmd += ["--set", f"{k}={v}"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if r.returncode != expect:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr[-500:]}")


def export(run, fmt, out):
    return subprocess.run([sys.executable, EXPORT, run, "--to", fmt, out], capture_output=True, text=True,
                          timeout=120)


def inspect_logits(harness, run, tokens):
    r = subprocess.run([harness, "inspect", run, "--tokens", ",".join(map(str, tokens)), "--logits"],
                       capture_output=True, text=True, timeout=60)
    part = r.stdout.split("logits after the last input (id logit):\n", 1)
    if r.returncode or len(part) < 2:
        raise RuntimeError(f"inspect: exit {r.returncode}: {r.stderr[-300:]}")
    return np.array([float(line.split()[1]) for line in part[1].strip().splitlines()])


def round_trip(harness, tmp, name, run):
    out = run[:-3] + ".pt"
    r = export(run, "transformer-lens", out)
    if not check(f"{name}: export --to transformer-lens writes OUT.pt and OUT.json",
                 r.returncode == 0 and os.path.exists(out) and os.path.exists(out[:-3] + ".json"),
                 r.stderr.strip()):
        return
    with open(out[:-3] + ".json") as f:
        c = json.load(f)
    model = TLAttnOnly(c).double()
    sd = torch.load(out)
    missing, unexpected = model.load_state_dict({k: v.double() for k, v in sd.items()}, strict=False)
    check(f"{name}: names and shapes are exactly TransformerLens's", not missing and not unexpected,
            f"missing {missing}, unexpected {unexpected}")
    with h5py.File(run, "r") as f:
        maps, tokens = f["attn/maps"][-1], f["probe/tokens"][()]
    with torch.no_grad():
        logits, patterns = model(torch.from_numpy(tokens.astype(np.int64)))
    ours = torch.stack(patterns).permute(0, 2, 1, 3, 4).numpy()      # [L, P, H, T, T] -> [L, H, P, T, T]
    err = float(np.abs(ours - maps).max())
    check(f"{name}: TransformerLens patterns == /attn/maps[-1]", err <= MAP_ATOL, f"max|diff| {err:.2g}")
    want = inspect_logits(harness, run, tokens[0])
    got = logits[0, -1].numpy()
    tol = LOGIT_RTOL * max(1.0, float(np.abs(want).max()))
    err = float(np.abs(got - want).max())
    check(f"{name}: TransformerLens logits == harness inspect --logits", err <= tol,
            f"max|diff| {err:.2g}, tol {tol:.2g}, {len(want)} logits")


def plain_formats(tmp, run):
    with h5py.File(run, "r") as f:
        params = {}
        f["params"].visititems(lambda n, o: params.__setitem__(n, o[()])
                               if isinstance(o, h5py.Dataset) else None)
    for fmt, ext in (("torch", ".pt"), ("npz", ".npz")):
        out = os.path.join(tmp, "plain" + ext)
        r = export(run, fmt, out)
        if not check(f"export --to {fmt}", r.returncode == 0, r.stderr.strip()):
            continue
        got = torch.load(out) if fmt == "torch" else dict(np.load(out))
        same = set(got) == set(params) and all(np.array_equal(np.asarray(got[k]), params[k]) for k in params)
        with open(os.path.join(tmp, "plain.json")) as f:
            meta = json.load(f)
        check(f"--to {fmt}: every /params tensor bit for bit under its harness name, config beside it",
              same and meta["config"]["n_head"] == 4, f"{len(got)} tensors")


def refused(tmp, what, run, needle):
    out = os.path.join(tmp, "refused.pt")
    r = export(run, "transformer-lens", out)
    lines = r.stderr.strip().splitlines()
    left = [n for n in os.listdir(tmp) if n.startswith("refused") or n.startswith(".refused")]
    check(f"refused: {what}: exit 2, one line naming it, nothing written",
          r.returncode == 2 and len(lines) == 1 and needle in lines[0] and not left
          and "Traceback" not in r.stderr,
          lines[0] if lines else r.stderr)


def bad_arguments(tmp, run):
    r = export(run, "onnx", os.path.join(tmp, "x.pt"))
    lines = r.stderr.strip().splitlines()
    check("an unknown --to: exit 2, one line", r.returncode == 2 and len(lines) == 1 and "unknown format" in lines[0]
          and not os.path.exists(os.path.join(tmp, "x.pt")), lines[0] if lines else "")
    out = os.path.join(tmp, "new", "deeper", "x.pt")
    r = export(run, "torch", out)
    check("an output folder that is not there is made (as the harness makes output.path's)",
          r.returncode == 0 and os.path.exists(out) and os.path.exists(out[:-3] + ".json"), r.stderr.strip())
    target = os.path.join(tmp, "elsewhere")
    os.symlink(target, os.path.join(tmp, "link"))
    with open(os.path.join(tmp, "plainfile"), "w") as f:
        f.write("x")
    for what, folder, needle in (("a dangling symbolic link", "link", "symbolic link"),
                                 ("a file", "plainfile", "not a folder")):
        out = os.path.join(tmp, folder, "sub", "x.pt")
        r = export(run, "torch", out)
        lines = r.stderr.strip().splitlines()
        check(f"{what} where an output folder is to be made: exit 2, one line naming it, nothing made "
              "through it", r.returncode == 2 and len(lines) == 1 and needle in lines[0] and not os.path.exists(target),
              r.stderr.strip()[-300:])


def interrupted_run(harness, config, out):
    """A real interrupted run: SIGINT once training has started (the run writes status
    interrupted and exits 130)."""
    p = subprocess.Popen([harness, config, "--set", f"output.path={out}", "--set", "train.steps=100000",
                          "--set", "output.log_every=1"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True)
    for line in p.stderr:
        if re.search(r"step \d+", line):
            break
    p.send_signal(signal.SIGINT)
    p.communicate(timeout=120)
    return p.returncode


def suite(harness, tmp):
    config = base_config(tmp)
    for i, (name, sets) in enumerate(LAYOUTS):
        run = os.path.join(tmp, f"run{i}.h5")
        harness_run(harness, config, run, sets)
        round_trip(harness, tmp, name, run)
        if i == 0:
            plain_formats(tmp, run)
            bad_arguments(tmp, run)
    for name, sets, needle in REFUSED:
        run = os.path.join(tmp, "refuse.h5")
        harness_run(harness, config, run, dict(sets, **{"train.steps": 5}))
        refused(tmp, name, run, needle)
        os.unlink(run)
    run = os.path.join(tmp, "div.h5")
    harness_run(harness, config, run, {"train.lr": "1e35", "train.warmup_steps": 0}, expect=3)
    refused(tmp, "a diverged run", run, "status is 'diverged'")
    run = os.path.join(tmp, "int.h5")
    rc = interrupted_run(harness, config, run)
    check("a run stopped by SIGINT exits 130", rc == 130, f"exit {rc}")
    refused(tmp, "an interrupted run", run, "status is 'interrupted'")
    r = export(os.path.join(tmp, "missing.h5"), "torch", os.path.join(tmp, "refused.pt"))
    check("a missing results file: exit 2, one line",
          r.returncode == 2 and "cannot open" in r.stderr and len(r.stderr.strip().splitlines()) == 1,
          r.stderr.strip())


def main(argv):
    return temp_suite(argv, "heads-export-", suite)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
