#!/usr/bin/python3
"""bench_torch.py: the PyTorch side of `make bench` (run by scripts/bench, one process per config).

The same attention-only model as docs/model.md, written the way a PyTorch user would: nn.Embedding,
nn.LayerNorm, nn.Linear (fused Q|K|V), matmul + masked_fill + softmax attention (PyTorch 1.13 has
no F.scaled_dot_product_attention), F.cross_entropy, torch.optim.AdamW (weight decay on the
matrices only, as the harness) and clip_grad_norm_. One training step = sample a batch, forward,
backward, clip, AdamW step: the same work the harness times.

usage: bench_torch.py --vocab V --d-model D --n-head H --d-head DH --n-layer L --seq-len T
                      --batch B --steps N --threads P [--budget S] [--data FILE]
       bench_torch.py --peak N --threads P      GFLOP/s of torch.mm on N x N float32 matrices
Prints one JSON object on stdout: per-step seconds (wall, and the process's CPU time: on a shared
machine the steadier of the two), max RSS (KiB), versions, and the BLAS that was
really loaded (for OpenBLAS: its build string and the kernels it chose, e.g. Haswell or SkylakeX).
Run with Debian's /usr/bin/python3 (python3-torch).
"""
import argparse
import json
import math
import resource
import sys
import time

import os

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import reference  # noqa: E402  the tests' PyTorch reference (tests/reference.py)


class Block(nn.Module):
    def __init__(self, d_model, n_head, d_head):
        super().__init__()
        self.n_head, self.d_head = n_head, d_head
        self.ln = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * n_head * d_head)
        self.out = nn.Linear(n_head * d_head, d_model)

    def forward(self, h, causal):
        B, T, _ = h.shape
        E = self.n_head * self.d_head
        q, k, v = self.qkv(self.ln(h)).split(E, dim=-1)
        q, k, v = (x.view(B, T, self.n_head, self.d_head).transpose(1, 2) for x in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.d_head)
        att = att.masked_fill(causal[:T, :T], float("-inf")).softmax(dim=-1)
        o = (att @ v).transpose(1, 2).reshape(B, T, E)
        return h + self.out(o)


class AttnOnly(nn.Module):
    def __init__(self, vocab, d_model, n_head, d_head, n_layer, seq_len):
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(seq_len, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_head, d_head) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(d_model)
        self.unembed = nn.Linear(d_model, vocab, bias=False)
        self.register_buffer("causal", torch.triu(torch.ones(seq_len, seq_len, dtype=torch.bool), 1))
        for name, p in self.named_parameters():  # GPT-2 initialisation, as the harness
            if p.dim() == 2:
                std = 0.02 / (math.sqrt(2 * n_layer) if name.endswith("out.weight") else 1)
                nn.init.normal_(p, 0.0, std)

    def forward(self, x):
        T = x.shape[1]
        h = self.tok(x) + self.pos(torch.arange(T))
        for block in self.blocks:
            h = block(h, self.causal)
        return self.unembed(self.ln_f(h))


class ReferenceModel(nn.Module):
    """The tests' reference (tests/reference.py: forward written from docs/model.md's math, with a
    hand-written LayerNorm and cross-entropy) in float32, its parameters in a ParameterDict."""

    def __init__(self, vocab, d_model, n_head, d_head, n_layer, seq_len):
        super().__init__()
        self.cfg = {"vocab_size": vocab, "d_model": d_model, "n_head": n_head, "d_head": d_head,
                    "n_layer": n_layer, "seq_len": seq_len}
        self.names = list(reference.param_shapes(self.cfg))
        self.weights = nn.ParameterList()
        for name, shape in reference.param_shapes(self.cfg).items():
            base = name.split("/")[-1]
            if len(shape) == 2:  # GPT-2 initialisation, as the harness
                std = 0.02 / (math.sqrt(2 * n_layer) if base == "w_o" else 1)
                value = torch.randn(shape) * std
            else:
                value = torch.ones(shape) if base in ("ln_g", "lnf_g") else torch.zeros(shape)
            self.weights.append(nn.Parameter(value))

    def loss(self, x, y):
        params = dict(zip(self.names, self.weights))
        loss, _ = reference.forward(params, self.cfg, x, y)
        return loss


def malloc_loaded():
    """The allocator this process runs on: "jemalloc" when libjemalloc is mapped, else "glibc"."""
    try:
        with open("/proc/self/maps") as f:
            return "jemalloc" if "libjemalloc" in f.read() else "glibc"
    except OSError:
        return "unknown"


def blas_info():
    """The BLAS this process really loaded (from /proc/self/maps), with OpenBLAS's own account of
    its build and of the kernels it picked (openblas_get_config / openblas_get_corename)."""
    libs = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1]
                name = os.path.basename(path)
                if "blas" in name or "blis" in name:
                    libs.add(path)
    except OSError:
        pass
    info = {"libraries": sorted(libs)}
    for path in sorted(libs):
        if "openblas" not in os.path.basename(path):
            continue
        try:
            import ctypes
            lib = ctypes.CDLL(path)
            lib.openblas_get_config.restype = ctypes.c_char_p
            lib.openblas_get_corename.restype = ctypes.c_char_p
            info.update(config=lib.openblas_get_config().decode(),
                        corename=lib.openblas_get_corename().decode())
        except (OSError, AttributeError):
            continue
        break
    return info


def peak(n, reps=10):
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.mm(a, b)
    best = math.inf
    for _ in range(reps):
        t = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - t)
    return 2.0 * n ** 3 / best / 1e9


def main(argv):
    ap = argparse.ArgumentParser()
    for name in ("vocab", "d-model", "n-head", "d-head", "n-layer", "seq-len", "batch", "steps",
                 "peak"):
        ap.add_argument("--" + name, type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--budget", type=float, default=0.0,
                    help="stop after this many seconds once 6 steps are done (0: run all steps)")
    ap.add_argument("--data", default="/usr/share/common-licenses/GPL-3")
    ap.add_argument("--model", choices=("idiomatic", "reference"), default="idiomatic",
                    help="idiomatic: nn modules (above); reference: the tests' tests/reference.py")
    ap.add_argument("--autocast", choices=("none", "bf16"), default="none",
                    help="bf16: the forward under torch.autocast('cpu', torch.bfloat16) (oneDNN's bf16 matmuls)")
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    torch.mm(torch.ones(2, 2), torch.ones(2, 2))  # loads the BLAS
    info = {"torch": torch.__version__, "threads": torch.get_num_threads(), "model": a.model, "autocast": a.autocast,
            "blas": blas_info(), "malloc": malloc_loaded()}
    if a.peak:
        info.update(gflops=peak(a.peak), n=a.peak)
        print(json.dumps(info))
        return 0
    torch.manual_seed(0)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with open(a.data, "rb") as f:
        data = torch.tensor(list(f.read()), dtype=torch.long) % a.vocab
    kind = AttnOnly if a.model == "idiomatic" else ReferenceModel
    model = kind(a.vocab, a.d_model, a.n_head, a.d_head, a.n_layer, a.seq_len)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.99), eps=1e-8, foreach=True)
    B, T = a.batch, a.seq_len
    gen = torch.Generator().manual_seed(0)
    times, cpu_times = [], []
    begin = time.perf_counter()
    for _ in range(a.steps):
        if a.budget > 0 and len(times) >= 6 and time.perf_counter() - begin > a.budget:
            break
        t0, c0 = time.perf_counter(), time.process_time()
        starts = torch.randint(0, len(data) - T - 1, (B,), generator=gen)
        idx = starts[:, None] + torch.arange(T + 1)
        chunk = data[idx]
        x, y = chunk[:, :-1], chunk[:, 1:]
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.autocast == "bf16"):
            if a.model == "idiomatic":
                loss = F.cross_entropy(model(x).reshape(-1, a.vocab).float(), y.reshape(-1))
            else:
                loss = model.loss(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        times.append(time.perf_counter() - t0)
        cpu_times.append(time.process_time() - c0)
    info.update(step_s=times, step_cpu_s=cpu_times, loss=float(loss), max_rss_kib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                rss_before_model_kib=rss_before)
    print(json.dumps(info))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
