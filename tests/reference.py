#!/usr/bin/python3
"""Independent PyTorch reference for the attention-only transformer of docs/model.md.

Written from the math in docs/model.md, not from the C code, so the two can check each other.
Everything here is plain torch: explicit matmuls, masked_fill(-inf), softmax, a hand-written
LayerNorm and cross-entropy, and a hand-written AdamW whose semantics are spelled out below.
Run with Debian's /usr/bin/python3 (python3-torch, python3-h5py, python3-numpy, python3-yaml).

Library:
  load_params(h5)                       -> (cfg dict, {"tok_emb": tensor, "layer0/w_qkv": ..., ...})
  forward(params, cfg, x, targets, mask) -> (loss, [P_l of shape [B,H,T,T] for each layer])
  grads(params, cfg, x, targets, mask)  -> (loss, {name: gradient})       via autograd
  train_steps(params, cfg, batches, steps) -> [loss of each step, taken before its update]
  sequential_batches(token_file, cfg, steps) -> [(inputs, targets, mask)] of the tokens task
  attention_maps(params, cfg, tokens[P,T]) -> [L,H,P,T,T]
  direct_logit_attribution(params, cfg, tokens, targets, mask) -> the parts of the target's logit
  l0_settings(cfg), hard_concrete(...), p_open(...), head_gate_noise(seed, step, n),
  head_gate_init(seed, L, H), bake(params, log_alpha, cfg): the learned head gates (train.head_l0)

CLI:
  reference.py --self-test              finite-difference and naive-loop checks of this file
  reference.py grads DUMP.h5            reference loss/gradients on a --dump-grads file
  reference.py attn RESULTS.h5          reference maps vs /attn/maps[-1] of a results file

Optimiser semantics (what the C harness is specified to do), step s = 0..steps-1, t = s + 1:
  lr_s   = lr*(s+1)/warmup                                   if s < warmup_steps
         = lr                                                if lr_schedule == constant
         = lr*(r + (1-r)*0.5*(1+cos(pi*progress)))            cosine, r = min_lr_ratio,
           progress = (s - warmup)/max(1, steps - warmup)
  norm   = sqrt(sum of squares of all gradients);  if grad_clip > 0 and norm > grad_clip:
           every gradient *= grad_clip/norm
  m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g^2
  if p has >= 2 dims (tok_emb, pos_emb, w_qkv, w_o, w_unembed): p *= 1 - lr_s*weight_decay
  p -= (lr_s/(1-b1^t)) * m / (sqrt(v)/sqrt(1-b2^t) + eps)

Learned head gates (train.head_l0 = lambda > 0; docs/model.md "Learned head gates (L0)"), from
that text: log_alpha [L,H] is one more parameter (no weight decay; its gradient in the norm).
At step s, u = 1e-6 + (1 - 2e-6) * uniform from the generator stream (seed, 7, s) of src/base/rng.h
(splitmix64 seeding, xoshiro256**, written out again below), one per head in (layer, head)
order, rounded to float32; gate = clip(sigmoid((log u - log(1-u) + log_alpha)/beta)*(r-l) + l,
0, 1); the objective is the gated forward's loss + lambda/L * sum sigmoid(log_alpha -
beta*log(-l/r)), differentiated by autograd; the logged loss is the cross-entropy alone.
"""
import math
import sys

import numpy as np
import torch

LN_EPS = 1e-5


# ----------------------------------------------------------------------------- config, I/O

def _plain(value):
    """h5py attribute value -> plain python scalar/str."""
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, np.ndarray) and value.shape == ():
        value = value[()]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bytes):
        return value.decode()
    return value


def read_config(f):
    """Config of an open h5py file: the root config_yaml flattened ("model.d_model" and
    "d_model"), overlaid by the typed attributes of /config (which are authoritative)."""
    import yaml
    cfg = {}
    if "config_yaml" in f.attrs:
        tree = yaml.safe_load(_plain(f.attrs["config_yaml"])) or {}
        for section, body in tree.items():
            if isinstance(body, dict):
                for key, value in body.items():
                    cfg[f"{section}.{key}"] = value
                    cfg.setdefault(key, value)
            else:
                cfg[section] = body
    if "config" in f:
        for name, value in f["config"].attrs.items():
            value = _plain(value)
            cfg[name] = value
            short = name.replace("/", ".").split(".")[-1]
            cfg[short] = value
    return cfg


def need(cfg, key):
    if key not in cfg:
        raise KeyError(f"config value '{key}' missing from the results file's /config and config_yaml")
    return cfg[key]


def dims(cfg):
    """(V, D, H, d_head, L, T) as ints."""
    return tuple(int(need(cfg, k)) for k in
                 ("vocab_size", "d_model", "n_head", "d_head", "n_layer", "seq_len"))


def layout(cfg):
    """The attention switches, with their defaults: (n_kv_head, pos, rope_dims, rope_base, gate)."""
    H, dh = int(need(cfg, "n_head")), int(need(cfg, "d_head"))
    n_kv = int(cfg.get("n_kv_head", 0) or H)
    pos = str(cfg.get("pos", "learned"))
    rope_dims = int(cfg.get("rope_dims", 0) or dh)
    rope_base = float(cfg.get("rope_base", 10000.0))
    gate = str(cfg.get("output_gate", "false")) in ("true", "1", "True")
    return n_kv, pos, rope_dims, rope_base, gate


def has_sink(cfg):
    return str(cfg.get("sink", "false")) in ("true", "1", "True")


def rotary(a, rope_dims, base):
    """GPT-NeoX / HF "rotate half" on the first rope_dims dims of each head; a [B,H,T,dh]."""
    T = a.shape[2]
    half = rope_dims // 2
    inv_freq = base ** (-torch.arange(0, half, dtype=torch.float64) * 2 / rope_dims)
    angle = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]     # [T, half]
    cos, sin = torch.cos(angle).to(a.dtype), torch.sin(angle).to(a.dtype)
    x1, x2, rest = a[..., :half], a[..., half:rope_dims], a[..., rope_dims:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin, rest], dim=-1)


def param_shapes(cfg):
    V, D, H, dh, L, T = dims(cfg)
    E = H * dh
    n_kv, _, _, _, gate = layout(cfg)
    W = (H + 2 * n_kv) * dh
    shapes = {"tok_emb": (V, D), "lnf_g": (D,), "lnf_b": (D,), "w_unembed": (D, V)}
    if layout(cfg)[1] in ("learned", "shortformer"):  # rotary and no positions store no pos_emb
        shapes["pos_emb"] = (T, D)
    for l in range(L):
        shapes.update({f"layer{l}/ln_g": (D,), f"layer{l}/ln_b": (D,), f"layer{l}/w_qkv": (D, W),
                       f"layer{l}/b_qkv": (W,), f"layer{l}/w_o": (E, D), f"layer{l}/b_o": (D,)})
        if gate:
            shapes.update({f"layer{l}/w_gate": (D, E), f"layer{l}/b_gate": (E,)})
        if has_sink(cfg):
            shapes[f"layer{l}/sink"] = (H,)
    return shapes


def read_tensors(f, group, cfg):
    """{name: float32 tensor} of /group (params or grads), checking every shape against cfg."""
    out = {}
    for name, shape in param_shapes(cfg).items():
        path = f"{group}/{name}"
        if path not in f:
            raise KeyError(f"{f.filename}: missing /{path}")
        a = np.asarray(f[path][()])
        if tuple(a.shape) != shape:
            raise ValueError(f"{f.filename}: /{path} has shape {a.shape}, expected {shape}")
        out[name] = torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32))
    return out


def load_params(h5path):
    """(cfg, {name: float32 tensor}) from the /params group of a results/checkpoint file."""
    import h5py
    with h5py.File(h5path, "r") as f:
        cfg = read_config(f)
        return cfg, read_tensors(f, "params", cfg)


def load_grad_dump(h5path):
    """Everything of a `harness --dump-grads` file: cfg, params, grads, (x, targets, mask), loss."""
    import h5py
    with h5py.File(h5path, "r") as f:
        cfg = read_config(f)
        params = read_tensors(f, "params", cfg)
        grads_c = read_tensors(f, "grads", cfg)
        for k in ("inputs", "targets", "mask"):
            if f"batch/{k}" not in f:
                raise KeyError(f"{h5path}: missing /batch/{k}")
        x = torch.from_numpy(np.asarray(f["batch/inputs"][()]).astype(np.int64))
        y = torch.from_numpy(np.asarray(f["batch/targets"][()]).astype(np.int64))
        mask = torch.from_numpy(np.asarray(f["batch/mask"][()]).astype(np.float64))
        if "loss" not in f.attrs:
            raise KeyError(f"{h5path}: missing root attribute loss")
        loss = float(_plain(f.attrs["loss"]))
    return cfg, params, grads_c, (x, y, mask), loss


def cast(params, dtype):
    return {k: v.detach().to(dtype).clone() for k, v in params.items()}


# ----------------------------------------------------------------------------- model

def layer_norm(h, gain, bias):
    """LayerNorm over the last axis, biased variance, eps 1e-5 (= F.layer_norm)."""
    mean = h.mean(dim=-1, keepdim=True)
    var = ((h - mean) ** 2).mean(dim=-1, keepdim=True)
    return (h - mean) / torch.sqrt(var + LN_EPS) * gain + bias


def forward(params, cfg, x, targets=None, mask=None, gates=None, fill=None, heads_out=None,
            record=None, patch=None, logits_out=None, path=None,
            final_out=None):
    """x [B,T] int -> (loss, [P_l [B,H,T,T] for each layer]); loss is None without targets.

    loss = sum over mask=1 positions of cross-entropy(logits, target) / number of such positions.
    Head gates (the analysis's ablations): gates [L,H] (None: all 1) mix each head's output o
    (its columns of O_cat, after the output gate) into g*o + (1-g)*a before W_o, with a = fill
    [L,E] (mean ablation) or 0; heads_out, a list, receives each layer's O_cat [B,T,E] before the
    gates.
    Activation patching (docs/analyses.md): record, a dict, receives per layer l the lists
    "q" [B,H,T,dh] (after rotary), "k", "v" [B,H_kv,T,dh] (one per K/V head, after rotary),
    "pattern" [B,H,T,T] and "z" [B,T,H,dh] (the heads' outputs after the output gate); patch
    maps a kind of those to (gates, source): gates [L, heads of the kind], source another
    forward's record, each head's value becoming g*own + (1-g)*source's (for the pattern, the
    head's output g*O + (1-g)*P_source V). logits_out, a list, receives the logits [B,T,V].
    Path patching (docs/analyses.md): path = (layer, kind, head, delta), kind "q", "k" or "v",
    head a query head for "q" and a K/V head for "k" and "v", delta [B,T,D]: that head's input
    of that kind in that layer is computed from LN(h + delta) (+ W_pos for the shortformer's Q
    and K) instead of LN(h); everything else reads h. final_out, a list, receives the final residual
    h [B,T,D] and the logits [B,T,V].
    """
    record = record if record is not None else {}
    patch = patch or {}

    def patched(kind, l, own):  # own [B,n,T,...] per head on dim 1 ("z": [B,T,H,dh] on dim 2)
        record.setdefault(kind, []).append(own)
        if kind not in patch:
            return own
        g, source = patch[kind]
        src = source[kind][l]
        shape = [1] * own.dim()
        shape[2 if kind == "z" else 1] = -1
        gl = g[l].reshape(shape)
        return gl * own + (1 - gl) * src
    V, D, H, dh, L, _ = dims(cfg)
    n_kv, pos, rope_dims, rope_base, gate = layout(cfg)
    E, Ekv = H * dh, n_kv * dh
    B, T = x.shape
    h = params["tok_emb"][x]                                                  # [B,T,D]
    if pos == "learned":
        h = h + params["pos_emb"][:T]
    causal = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)       # True above diag
    probs = []
    for l in range(L):
        p = lambda n: params[f"layer{l}/{n}"]
        z = layer_norm(h, p("ln_g"), p("ln_b"))                               # [B,T,D]
        qkv = z @ p("w_qkv") + p("b_qkv")                                     # [B,T,(H+2Hkv)dh]
        q, k, v = qkv[..., :E], qkv[..., E:E + Ekv], qkv[..., E + Ekv:]
        if pos == "shortformer":  # positions only in the Q/K input (TransformerLens attn-only)
            qk = layer_norm(h + params["pos_emb"][:T], p("ln_g"), p("ln_b")) @ p("w_qkv") + p("b_qkv")
            q, k = qk[..., :E], qk[..., E:E + Ekv]
        if path is not None and path[0] == l:  # one head's Q, K or V reads h + delta
            _, kind, head, delta = path
            moved = h + delta
            if pos == "shortformer" and kind != "v":
                moved = moved + params["pos_emb"][:T]
            alt = layer_norm(moved, p("ln_g"), p("ln_b")) @ p("w_qkv") + p("b_qkv")
            first = {"q": 0, "k": E, "v": E + Ekv}[kind] + head * dh
            cols = torch.cat([q, k, v], dim=-1).clone()
            cols[..., first:first + dh] = alt[..., first:first + dh]
            q, k, v = cols[..., :E], cols[..., E:E + Ekv], cols[..., E + Ekv:]
        heads = lambda a, n: a.reshape(B, T, n, dh).transpose(1, 2)           # [B,n,T,dh]
        q, k, v = heads(q, H), heads(k, n_kv), heads(v, n_kv)
        if pos == "rope":
            q, k = rotary(q, rope_dims, rope_base), rotary(k, rope_dims, rope_base)
        q, k, v = patched("q", l, q), patched("k", l, k), patched("v", l, v)
        k = k.repeat_interleave(H // n_kv, dim=1)                             # GQA: query head h
        v = v.repeat_interleave(H // n_kv, dim=1)                             # reads K/V h // group
        s = (q @ k.transpose(-2, -1)) / math.sqrt(dh)                         # [B,H,T,T]
        s = s.masked_fill(causal, float("-inf"))
        if has_sink(cfg):  # one more logit in the denominator, a key of value 0
            sink = p("sink").reshape(1, H, 1, 1).expand(B, H, T, 1)
            att = torch.softmax(torch.cat([s, sink], dim=-1), dim=-1)[..., :T]
        else:
            att = torch.softmax(s, dim=-1)
        probs.append(att)
        record.setdefault("pattern", []).append(att)
        heads_o = att @ v                                                     # [B,H,T,dh]
        if "pattern" in patch:  # the head's output from the source's map and its own V
            g = patch["pattern"][0][l].reshape(1, H, 1, 1)
            heads_o = g * heads_o + (1 - g) * (patch["pattern"][1]["pattern"][l] @ v)
        o = heads_o.transpose(1, 2).reshape(B, T, E)                          # [B,T,E]
        if gate:
            o = o * torch.sigmoid(z @ p("w_gate") + p("b_gate"))
        o = patched("z", l, o.reshape(B, T, H, dh)).reshape(B, T, E)
        if heads_out is not None:
            heads_out.append(o)
        if gates is not None:
            g = gates[l].repeat_interleave(dh)                                # [E]
            a = fill[l] if fill is not None else torch.zeros_like(g)
            o = g * o + (1 - g) * a
        h = h + o @ p("w_o") + p("b_o")
    logits = layer_norm(h, params["lnf_g"], params["lnf_b"]) @ params["w_unembed"]   # [B,T,V]
    if logits_out is not None:
        logits_out.append(logits)
    if final_out is not None:
        final_out += [h, logits]
    if targets is None:
        return None, probs
    if mask is None:
        mask = torch.ones(B, T, dtype=logits.dtype)
    mask = mask.to(logits.dtype)
    safe_targets = torch.where(mask > 0, targets, torch.zeros_like(targets))  # masked slots may hold junk
    lse = torch.logsumexp(logits, dim=-1)
    picked = logits.gather(-1, safe_targets.unsqueeze(-1)).squeeze(-1)
    ce = lse - picked                                                         # [B,T]
    loss = (ce * mask).sum() / mask.sum()
    return loss, probs


def direct_logit_attribution(params, cfg, x, targets, mask, dtype=torch.float64):
    """The target's logit split as docs/analyses.md's direct logit attribution: every part of the
    final residual (the embedding, each layer's b_o, each head's z_h·W_O^h) centred over D, times
    the position's 1/σ of the final LayerNorm, dotted with lnf_g ⊙ W_U[:, target]; plus
    lnf_b·W_U[:, target]. Means over the mask's positions: {"head" [L,H], "bias_o" [L], "embed",
    "ln_bias", "logit" (the forward's own)}, float64."""
    V, D, H, dh, L, _ = dims(cfg)
    p = cast(params, dtype)
    heads_out, final = [], []
    with torch.no_grad():
        forward(p, cfg, x, heads_out=heads_out, final_out=final)
    h_final, logits = final
    r = 1.0 / torch.sqrt(h_final.var(dim=-1, unbiased=False) + LN_EPS)               # [B,T]
    u = p["lnf_g"][:, None, None] * p["w_unembed"][:, targets]                      # [D,B,T]
    u = u.permute(1, 2, 0)                                                          # [B,T,D]
    w = mask.to(dtype)
    mean = lambda a: float((a * w).sum() / w.sum())
    part = lambda part_x: ((part_x - part_x.mean(-1, keepdim=True)) * u).sum(-1) * r  # [B,T]
    h0 = p["tok_emb"][x] + (p["pos_emb"][: x.shape[1]] if layout(cfg)[1] == "learned" else 0)
    out = {"embed": mean(part(h0)), "head": np.zeros((L, H)), "bias_o": np.zeros(L),
           "ln_bias": mean((p["lnf_b"][:, None, None] * p["w_unembed"][:, targets]).sum(0)),
           "logit": mean(logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1))}
    for l in range(L):
        w_o = p[f"layer{l}/w_o"]
        out["bias_o"][l] = mean(part(p[f"layer{l}/b_o"].expand_as(h0)))
        for hh in range(H):
            cols = slice(hh * dh, (hh + 1) * dh)
            out["head"][l, hh] = mean(part(heads_out[l][..., cols] @ w_o[cols]))
    return out


def grads(params, cfg, x, targets, mask, dtype=torch.float64):
    """(loss, {name: d loss / d param}) by autograd, in dtype (float64 by default)."""
    work = {k: v.detach().to(dtype).clone().requires_grad_(True) for k, v in params.items()}
    loss, _ = forward(work, cfg, x, targets, mask)
    names = list(work)
    g = torch.autograd.grad(loss, [work[n] for n in names], allow_unused=True)  # pos_emb is unused
    return loss.detach(), {n: (gi.detach() if gi is not None else torch.zeros_like(work[n]))  # with rope/none
                           for n, gi in zip(names, g)}


def head_study(params, cfg, batches, dtype=torch.float64):
    """Single-head ablation and importance on held-out batches [(x, y, mask)], as the harness's
    /heads: (delta_zero [L,H], delta_mean [L,H], importance [L,H]). delta = the loss over the
    batches (each batch's mean weighted by the positions it scores) with that head's gate 0 minus
    with every gate 1; the mean ablation replaces the head's
    output by its mean over every token of every batch; importance = the same weighted mean over
    batches of |d loss / d gate| at every gate 1 (Michel et al.), by autograd."""
    _, _, H, dh, L, _ = dims(cfg)
    work = cast(params, dtype)
    ones = torch.ones(L, H, dtype=dtype)
    outs = []
    weight = [float(m.sum()) for _, _, m in batches]  # each batch weighs by the positions it scores
    share = [w / sum(weight) for w in weight]
    with torch.no_grad():
        base = sum(float(forward(work, cfg, x, y, m, gates=ones, heads_out=outs)[0]) * s
                   for (x, y, m), s in zip(batches, share))
    fill = torch.stack([torch.cat([o for i, o in enumerate(outs) if i % L == l]).reshape(-1, H * dh).mean(0)
                        for l in range(L)])                                    # [L,E]
    delta = {"zero": torch.zeros(L, H, dtype=dtype), "mean": torch.zeros(L, H, dtype=dtype)}
    with torch.no_grad():
        for kind, f in (("zero", None), ("mean", fill)):
            for l in range(L):
                for h in range(H):
                    g = ones.clone()
                    g[l, h] = 0
                    total = sum(float(forward(work, cfg, x, y, m, gates=g, fill=f)[0]) * s
                                for (x, y, m), s in zip(batches, share))
                    delta[kind][l, h] = total - base
    importance = torch.zeros(L, H, dtype=dtype)
    for (x, y, m), s in zip(batches, share):
        g = ones.clone().requires_grad_(True)
        loss, _ = forward(work, cfg, x, y, m, gates=g)
        importance += torch.autograd.grad(loss, g)[0].abs() * s
    return delta["zero"], delta["mean"], importance


def split_windows(n_tokens, cfg):
    """{split: (first_token, tokens)} of the tokens task without val_path/test_path, as
    docs/configuration.md states the rule: the held-out part is the last eval_fraction of the
    file (n_train = floor(n*(1-eval_fraction))); the test split is its last
    floor(held-out * test_share) tokens, unless either split would then hold fewer than
    seq_len + 1 tokens with the default share (then every held-out token is validation)."""
    T = int(need(cfg, "seq_len"))
    n_train = int(math.floor(n_tokens * (1.0 - float(need(cfg, "eval_fraction")))))
    heldout = n_tokens - n_train
    n_test = int(math.floor(heldout * float(cfg.get("test_share", 0.5))))
    if n_test > 0 and (n_test < T + 1 or heldout - n_test < T + 1):
        n_test = 0
    out = {"validation": (n_train, heldout - n_test)}
    if n_test:
        out["test"] = (n_train + heldout - n_test, n_test)
    return out


def selection(n_split_windows, batches, B):
    """The windows a selection of `batches` batches (0 = all) scores: n = min(batches*B, N),
    the i-th is floor(i*N/n)."""
    N = n_split_windows
    n = N if batches == 0 or batches * B >= N else batches * B
    return [i * N // n for i in range(n)]


def window_batches(tok, first, windows, T, B):
    """[(inputs, targets, mask)] of the windows (each T+1 tokens from first + w*T), B a batch,
    the last batch short."""
    out = []
    for k in range(0, len(windows), B):
        rows = windows[k:k + B]
        x = np.stack([tok[first + w * T:first + w * T + T] for w in rows])
        y = np.stack([tok[first + w * T + 1:first + w * T + T + 1] for w in rows])
        out.append((torch.from_numpy(x), torch.from_numpy(y), torch.ones(len(rows), T, dtype=torch.float64)))
    return out


def eval_batches(token_file, cfg):
    """The periodic evaluations' batches of the tokens task (the study's too): the validation
    split's selection of output.eval_batches batches."""
    tok = np.fromfile(token_file, dtype="<u2").astype(np.int64)
    T, B = int(need(cfg, "seq_len")), int(need(cfg, "batch_size"))
    first, n = split_windows(len(tok), cfg)["validation"]
    windows = selection((n - 1) // T, int(need(cfg, "eval_batches")), B)
    return window_batches(tok, first, windows, T, B)


def attention_maps(params, cfg, tokens):
    """tokens [P,T] -> attention probabilities [L,H,P,T,T] (float64)."""
    tokens = torch.as_tensor(np.asarray(tokens), dtype=torch.int64)
    with torch.no_grad():
        _, probs = forward(cast(params, torch.float64), cfg, tokens)
    return torch.stack(probs).permute(0, 2, 1, 3, 4).contiguous()             # [L,P,H,..] -> [L,H,P,..]


# ----------------------------------------------------------------------------- learned head gates

M64 = (1 << 64) - 1


class Stream:
    """src/base/rng.h's generator for one (seed, purpose, index): splitmix64 seeds xoshiro256**."""

    def __init__(self, seed, purpose, index):
        x = (seed ^ ((purpose * 0xD1B54A32D192ED03) & M64) ^ ((index * 0x8CB92BA72F3D8DD7) & M64)) & M64
        self.s = []
        for _ in range(4):
            x = (x + 0x9E3779B97F4A7C15) & M64
            z = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
            self.s.append(z ^ (z >> 31))

    @staticmethod
    def _rotl(x, k):
        return ((x << k) | (x >> (64 - k))) & M64

    def next(self):
        s = self.s
        result = (self._rotl((s[1] * 5) & M64, 7) * 9) & M64
        t = (s[1] << 17) & M64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = self._rotl(s[3], 45)
        return result

    def uniform(self):
        return (self.next() >> 11) * 2.0 ** -53


RNG_HEAD_GATES, RNG_HEAD_GATES_INIT = 7, 8


def l0_settings(cfg):
    """(lambda, beta, l, r) of a run with learned head gates, None without (head_l0 0 or absent)."""
    lam = float(cfg.get("head_l0", 0.0) or 0.0)
    if lam <= 0:
        return None
    return (lam, float(need(cfg, "head_l0_temperature")), float(need(cfg, "head_l0_stretch_low")),
            float(need(cfg, "head_l0_stretch_high")))


def head_gate_noise(seed, step, n):
    """The n noise values u of training step `step`, as float32 values in a float64 tensor."""
    r = Stream(int(seed), RNG_HEAD_GATES, int(step))
    u = np.array([1e-6 + (1 - 2e-6) * r.uniform() for _ in range(n)], dtype=np.float32)
    return torch.from_numpy(u.astype(np.float64))


def head_gate_init(seed, L, H):
    """log_alpha at initialisation: uniform in +-sqrt(3/H) (Glorot on Voita's [1, H, 1, 1] gate)."""
    r = Stream(int(seed), RNG_HEAD_GATES_INIT, 0)
    limit = math.sqrt(3.0 / H)
    a = np.array([(2.0 * r.uniform() - 1.0) * limit for _ in range(L * H)], dtype=np.float32)
    return torch.from_numpy(a.reshape(L, H))


def hard_concrete(log_alpha, u, beta, low, high):
    s = torch.sigmoid((torch.log(u) - torch.log(1 - u) + log_alpha) / beta)
    return torch.clamp(s * (high - low) + low, 0.0, 1.0)


def p_open(log_alpha, beta, low, high):
    """P(gate != 0) of each head."""
    return torch.sigmoid(log_alpha - beta * math.log(-low / high))


def gated_grads(params, log_alpha, cfg, x, targets, mask, step):
    """(cross-entropy, {name: d objective / d param, "log_alpha": ...}) of training step `step`."""
    lam, beta, low, high = l0_settings(cfg)
    dtype = log_alpha.dtype
    work = {k: v.detach().clone().requires_grad_(True) for k, v in params.items()}
    la = log_alpha.detach().clone().requires_grad_(True)
    L, H = la.shape
    u = head_gate_noise(need(cfg, "seed"), step, L * H).to(dtype).reshape(L, H)
    gates = hard_concrete(la, u, beta, low, high)
    loss, _ = forward(work, cfg, x, targets, mask, gates=gates)
    objective = loss + lam / L * p_open(la, beta, low, high).sum()
    names = list(work)
    g = torch.autograd.grad(objective, [work[n] for n in names] + [la], allow_unused=True)
    out = {n: (gi.detach() if gi is not None else torch.zeros_like(work[n])) for n, gi in zip(names, g)}
    out["log_alpha"] = g[-1].detach()
    return loss.detach(), out


def bake(params, log_alpha, cfg):
    """The deterministic model: W_o's rows of every head with P(open) <= 1/2 zeroed, in place."""
    _, beta, low, high = l0_settings(cfg)
    _, _, H, dh, L, _ = dims(cfg)
    closed = p_open(log_alpha, beta, low, high) <= 0.5
    with torch.no_grad():
        for l in range(L):
            for h in range(H):
                if bool(closed[l, h]):
                    params[f"layer{l}/w_o"][h * dh:(h + 1) * dh] = 0.0


# ----------------------------------------------------------------------------- training

def lr_at(cfg, s, steps):
    lr = float(need(cfg, "lr"))
    warmup = int(need(cfg, "warmup_steps"))
    if s < warmup:
        return lr * (s + 1) / warmup
    if str(need(cfg, "lr_schedule")) == "constant":
        return lr
    r = float(need(cfg, "min_lr_ratio"))
    progress = (s - warmup) / max(1, steps - warmup)
    return lr * (r + (1 - r) * 0.5 * (1 + math.cos(math.pi * progress)))


def decayed(name, tensor):
    return tensor.dim() >= 2


def train_steps(params, cfg, batches, steps, history=None, log_alpha=None):
    """Run `steps` AdamW steps on batches[s]; returns the loss of each step (before its update).

    params is updated in place (cast it to the working dtype first: the arithmetic is done in
    the dtype of the tensors). The lr schedule runs over the configured total cfg["steps"]
    (falling back to `steps`). If history is a dict it gets lists "lr", "grad_norm" (before
    clipping) and "clipped". With log_alpha (a run with learned head gates) it is trained too,
    in place, and history gets "p_open" (each step's, before its update).
    """
    total = int(cfg.get("steps", steps))
    b1, b2 = float(need(cfg, "beta1")), float(need(cfg, "beta2"))
    eps, wd = float(need(cfg, "eps")), float(need(cfg, "weight_decay"))
    clip = float(need(cfg, "grad_clip"))
    trained = dict(params) if log_alpha is None else dict(params, log_alpha=log_alpha)
    m = {k: torch.zeros_like(v) for k, v in trained.items()}
    v2 = {k: torch.zeros_like(v) for k, v in trained.items()}
    losses = []
    for s in range(steps):
        x, y, mask = batches[s]
        if log_alpha is None:
            loss, g = grads(params, cfg, x, y, mask, dtype=next(iter(params.values())).dtype)
        else:
            if history is not None:
                history.setdefault("p_open", []).append(p_open(log_alpha, *l0_settings(cfg)[1:]).clone())
            loss, g = gated_grads(params, log_alpha, cfg, x, y, mask, s)
        losses.append(float(loss))
        norm = math.sqrt(sum(float((gi * gi).sum()) for gi in g.values()))
        clipped = clip > 0 and norm > clip
        if clipped:
            g = {k: gi * (clip / norm) for k, gi in g.items()}
        lr_s = lr_at(cfg, s, total)
        t = s + 1
        with torch.no_grad():
            for k, p in trained.items():
                m[k].mul_(b1).add_((1 - b1) * g[k])
                v2[k].mul_(b2).add_((1 - b2) * g[k] * g[k])
                if decayed(k, p) and k != "log_alpha":
                    p.mul_(1 - lr_s * wd)
                denom = torch.sqrt(v2[k]) / math.sqrt(1 - b2 ** t) + eps
                p.sub_((lr_s / (1 - b1 ** t)) * m[k] / denom)
        if history is not None:
            history.setdefault("lr", []).append(lr_s)
            history.setdefault("grad_norm", []).append(norm)
            history.setdefault("clipped", []).append(clipped)
    return losses


def sequential_batches(token_file, cfg, steps):
    """Batches of the tokens task in sequential order: [(inputs [B,T], targets [B,T], mask [B,T])].

    n_train = floor(n*(1-eval_fraction)); n_win = (n_train-1)//T; row b of step s uses window
    w = (s*B + b) % n_win, inputs tok[w*T : w*T+T], targets shifted by one, mask all ones.
    """
    tok = np.fromfile(token_file, dtype="<u2").astype(np.int64)
    T, B = int(need(cfg, "seq_len")), int(need(cfg, "batch_size"))
    n_train = int(math.floor(len(tok) * (1.0 - float(need(cfg, "eval_fraction")))))
    n_win = (n_train - 1) // T
    if n_win < 1:
        raise ValueError(f"{token_file}: {n_train} training tokens, too few for seq_len {T}")
    out = []
    for s in range(steps):
        x = np.empty((B, T), np.int64)
        y = np.empty((B, T), np.int64)
        for b in range(B):
            start = ((s * B + b) % n_win) * T
            x[b] = tok[start:start + T]
            y[b] = tok[start + 1:start + T + 1]
        out.append((torch.from_numpy(x), torch.from_numpy(y), torch.ones(B, T, dtype=torch.float64)))
    return out


# ----------------------------------------------------------------------------- comparisons

def compare(name, got, ref, rtol, atol):
    """Max |got-ref| vs tol = atol + rtol*max|ref| -> (ok, message)."""
    got = torch.as_tensor(np.asarray(got), dtype=torch.float64)
    ref = torch.as_tensor(np.asarray(ref), dtype=torch.float64)
    if tuple(got.shape) != tuple(ref.shape):
        return False, f"{name}: shape {tuple(got.shape)} vs reference {tuple(ref.shape)}"
    if got.numel() == 0:
        return True, f"{name}: empty"
    if not torch.isfinite(got).all():
        return False, f"{name}: {int((~torch.isfinite(got)).sum())} non-finite values"
    diff = (got - ref).abs()
    scale = float(ref.abs().max())
    tol = atol + rtol * scale
    worst = int(diff.reshape(-1).argmax())
    idx = tuple(int(i) for i in np.unravel_index(worst, tuple(got.shape)))
    err = float(diff.reshape(-1)[worst])
    msg = (f"{name}: max|diff| {err:.3g} at {idx} (got {float(got.reshape(-1)[worst]):.6g}, "
           f"ref {float(ref.reshape(-1)[worst]):.6g}), max|ref| {scale:.3g}, tol {tol:.3g}")
    return err <= tol, msg


# ----------------------------------------------------------------------------- self-test

def random_params(cfg, dtype=torch.float64, seed=0, scale=0.3):
    """A random model with non-trivial LN gains/biases so every path carries gradient."""
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for name, shape in param_shapes(cfg).items():
        t = torch.randn(shape, generator=gen, dtype=dtype) * scale
        if name.endswith("_g"):
            t = t + 1.0
        out[name] = t
    return out


def naive_forward(params, cfg, x, targets, mask):
    """Loop-by-loop numpy forward straight from docs/model.md, to check forward() independently."""
    V, D, H, dh, L, _ = dims(cfg)
    E = H * dh
    P = {k: v.detach().double().numpy() for k, v in params.items()}
    x, targets, mask = np.asarray(x), np.asarray(targets), np.asarray(mask, dtype=np.float64)
    B, T = x.shape

    def ln(vec, g, b):
        mu = sum(vec) / len(vec)
        var = sum((a - mu) ** 2 for a in vec) / len(vec)
        return np.array([(vec[i] - mu) / math.sqrt(var + LN_EPS) * g[i] + b[i] for i in range(len(vec))])

    total, count, maps = 0.0, 0.0, []
    h = np.array([[P["tok_emb"][x[b, t]] + P["pos_emb"][t] for t in range(T)] for b in range(B)])
    for l in range(L):
        W = lambda n: P[f"layer{l}/{n}"]
        att = np.zeros((B, H, T, T))
        new_h = h.copy()
        for b in range(B):
            z = [ln(h[b, t], W("ln_g"), W("ln_b")) for t in range(T)]
            qkv = [z[t] @ W("w_qkv") + W("b_qkv") for t in range(T)]
            o_cat = np.zeros((T, E))
            for hd in range(H):
                cols = slice(hd * dh, (hd + 1) * dh)
                for i in range(T):
                    qi = qkv[i][:E][cols]
                    scores = [float(qi @ qkv[j][E:2 * E][cols]) / math.sqrt(dh) for j in range(i + 1)]
                    mx = max(scores)
                    ex = [math.exp(s - mx) for s in scores]
                    for j in range(i + 1):
                        att[b, hd, i, j] = ex[j] / sum(ex)
                        o_cat[i, cols] += att[b, hd, i, j] * qkv[j][2 * E:][cols]
            for t in range(T):
                new_h[b, t] = h[b, t] + o_cat[t] @ W("w_o") + W("b_o")
        h = new_h
        maps.append(att)
    for b in range(B):
        for t in range(T):
            if mask[b, t] == 0:
                continue
            logits = ln(h[b, t], P["lnf_g"], P["lnf_b"]) @ P["w_unembed"]
            mx = logits.max()
            total += -(logits[targets[b, t]] - mx - math.log(np.exp(logits - mx).sum()))
            count += 1
    return total / count, maps


def self_test(verbose=True):
    """Check this reference against itself-independent arithmetic. Returns (passed, failed)."""
    torch.set_num_threads(1)
    results = []

    def check(ok, msg):
        results.append(bool(ok))
        if verbose:
            print(("ok - " if ok else "FAIL - ") + "self-test: " + msg, flush=True)

    base = dict(vocab_size=7, d_model=6, n_head=2, d_head=2, n_layer=2, seq_len=5, batch_size=2,
                lr=0.01, min_lr_ratio=0.1, warmup_steps=2, lr_schedule="cosine", weight_decay=0.1,
                beta1=0.9, beta2=0.95, eps=1e-8, grad_clip=1.0, eval_fraction=0.1, steps=6)
    layouts = {
        "E<D (H2,dh2,D6)": {},
        "E>D (H3,dh3,D5)": dict(d_model=5, n_head=3, d_head=3),
        "H=1": dict(n_head=1, d_head=4, n_layer=1),
        "T=1": dict(seq_len=1, batch_size=3),
    }
    for label, over in layouts.items():
        cfg = dict(base, **over)
        V, D, H, dh, L, T = dims(cfg)
        B = int(cfg["batch_size"])
        gen = torch.Generator().manual_seed(1)
        x = torch.randint(0, V, (B, T), generator=gen)
        y = torch.randint(0, V, (B, T), generator=gen)
        mask = (torch.rand(B, T, generator=gen) > 0.3).double()
        mask[0, 0] = 1.0
        y[mask == 0] = -1                                   # junk where masked: must be ignored
        params = random_params(cfg, seed=2)

        # 1. forward vs a loop-by-loop implementation of docs/model.md
        loss, probs = forward(params, cfg, x, y, mask)
        nloss, nmaps = naive_forward(params, cfg, x, y, mask)
        perr = max(float((probs[l] - torch.from_numpy(nmaps[l])).abs().max()) for l in range(L))
        check(abs(float(loss) - nloss) <= 1e-12 * max(1, abs(nloss)) and perr <= 1e-12,
              f"{label}: forward == naive loops (loss {float(loss):.12g} vs {nloss:.12g}, maps err {perr:.2g})")

        # 2. attention rows causal and normalised; attention_maps layout
        maps = attention_maps(params, cfg, x)
        upper = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
        ok = (tuple(maps.shape) == (L, H, B, T, T) and float(maps[..., upper].abs().max() if T > 1 else 0) == 0
              and float((maps.sum(-1) - 1).abs().max()) < 1e-12
              and torch.equal(maps[L - 1, H - 1, B - 1], probs[L - 1][B - 1, H - 1]))
        check(ok, f"{label}: attention_maps shape [L,H,P,T,T], causal, rows sum to 1")

        # 3. autograd gradients vs central finite differences on every parameter tensor
        _, g = grads(params, cfg, x, y, mask)
        worst = ("", 0.0)
        for name, p in params.items():
            fd = torch.zeros_like(p)
            flat = p.reshape(-1)
            for i in range(flat.numel()):
                old = float(flat[i])
                h = 1e-6
                flat[i] = old + h
                lp = float(forward(params, cfg, x, y, mask)[0])
                flat[i] = old - h
                lm = float(forward(params, cfg, x, y, mask)[0])
                flat[i] = old
                fd.reshape(-1)[i] = (lp - lm) / (2 * h)
            err = float((fd - g[name]).abs().max()) / max(1e-3, float(fd.abs().max()))
            if err > worst[1] or not worst[0]:
                worst = (name, err)
        check(worst[1] < 1e-6, f"{label}: autograd grads == finite differences on all "
              f"{len(params)} tensors (worst relative err {worst[1]:.2g} in {worst[0]})")

        # 4. torch.autograd.gradcheck on the whole model as a function of all parameters
        names = list(params)

        def fn(*tensors):
            return forward(dict(zip(names, tensors)), cfg, x, y, mask)[0]
        inputs = tuple(params[n].clone().requires_grad_(True) for n in names)
        try:
            ok = torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-7, rtol=1e-5)
            msg = ""
        except Exception as e:  # gradcheck raises with details
            ok, msg = False, ": " + str(e).splitlines()[0]
        check(ok, f"{label}: torch.autograd.gradcheck{msg}")

    # 5. hand-written AdamW + schedule + clipping vs torch.optim.AdamW driven step by step
    for sched, clip in (("cosine", 0.05), ("constant", 0.0)):
        cfg = dict(base, lr_schedule=sched, grad_clip=clip, steps=6)
        V, D, H, dh, L, T = dims(cfg)
        gen = torch.Generator().manual_seed(3)
        batches = [(torch.randint(0, V, (2, T), generator=gen), torch.randint(0, V, (2, T), generator=gen),
                    torch.ones(2, T, dtype=torch.float64)) for _ in range(6)]
        mine = random_params(cfg, seed=4, scale=0.1)
        theirs = {k: v.clone().requires_grad_(True) for k, v in mine.items()}
        hist = {}
        losses = train_steps(mine, cfg, batches, 6, history=hist)
        groups = [{"params": [p for p in theirs.values() if p.dim() >= 2], "weight_decay": cfg["weight_decay"]},
                  {"params": [p for p in theirs.values() if p.dim() < 2], "weight_decay": 0.0}]
        opt = torch.optim.AdamW(groups, lr=cfg["lr"], betas=(cfg["beta1"], cfg["beta2"]), eps=cfg["eps"])
        their_losses = []
        for s in range(6):
            opt.zero_grad()
            loss = forward(theirs, cfg, *batches[s])[0]
            loss.backward()
            their_losses.append(float(loss))
            norm = math.sqrt(sum(float((p.grad ** 2).sum()) for p in theirs.values()))
            if clip > 0 and norm > clip:
                for p in theirs.values():
                    p.grad.mul_(clip / norm)
            w = cfg["warmup_steps"]
            lr_s = (cfg["lr"] * (s + 1) / w if s < w else cfg["lr"] if sched == "constant" else
                    cfg["lr"] * (cfg["min_lr_ratio"] + (1 - cfg["min_lr_ratio"]) * 0.5 *
                                 (1 + math.cos(math.pi * (s - w) / max(1, 6 - w)))))
            for grp in opt.param_groups:
                grp["lr"] = lr_s
            opt.step()
        perr = max(float((mine[k] - theirs[k].detach()).abs().max()) for k in mine)
        lerr = max(abs(a - b) for a, b in zip(losses, their_losses))
        moved = max(float((mine[k] - random_params(cfg, seed=4, scale=0.1)[k]).abs().max()) for k in mine)
        clipped = sum(hist["clipped"])
        check(perr < 1e-12 and lerr < 1e-12 and moved > 1e-3 and (clip == 0 or clipped > 0),
              f"train_steps ({sched}, grad_clip {clip}, clipped {clipped}/6 steps) == torch.optim.AdamW: "
              f"params err {perr:.2g}, losses err {lerr:.2g}")

    # 6. schedule values and sequential windowing on known inputs
    cfg = dict(base, lr=1.0, warmup_steps=2, min_lr_ratio=0.1, lr_schedule="cosine")
    lrs = [lr_at(cfg, s, 6) for s in range(6)]
    want = [0.5, 1.0, 1.0, 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi / 4)), 0.55,
            0.1 + 0.9 * 0.5 * (1 + math.cos(3 * math.pi / 4))]
    check(max(abs(a - b) for a, b in zip(lrs, want)) < 1e-15, f"lr schedule {['%.4f' % v for v in lrs]}")
    import os
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "tok.bin")
        np.arange(50, dtype="<u2").tofile(path)           # n_train = floor(50*0.9) = 45, n_win = 44//5 = 8
        cfg = dict(base, seq_len=5, batch_size=3, eval_fraction=0.1)
        bs = sequential_batches(path, cfg, 4)
        starts = [[int(bs[s][0][b, 0]) for b in range(3)] for s in range(4)]
        want = [[((s * 3 + b) % 8) * 5 for b in range(3)] for s in range(4)]
        ok = starts == want and all(torch.equal(bs[s][1], bs[s][0] + 1) for s in range(4))
        check(ok, f"sequential_batches windows {starts}")

    passed = sum(results)
    return passed, len(results) - passed


# ----------------------------------------------------------------------------- CLI

def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    if argv[0] == "--self-test":
        passed, failed = self_test()
        print(f"{passed} passed, {failed} failed")
        return 1 if failed else 0
    if argv[0] == "grads" and len(argv) == 2:
        cfg, params, grads_c, (x, y, mask), loss_c = load_grad_dump(argv[1])
        loss, g = grads(params, cfg, x, y, mask)
        print(f"loss: harness {loss_c:.9g}  reference {float(loss):.9g}")
        for name in g:
            print("  " + compare(name, grads_c[name], g[name], 1e-4, 1e-7)[1])
        return 0
    if argv[0] == "attn" and len(argv) == 2:
        import h5py
        cfg, params = load_params(argv[1])
        with h5py.File(argv[1], "r") as f:
            stored = np.asarray(f["attn/maps"][-1])
            tokens = np.asarray(f["probe/tokens"][()])
        print(compare("attn/maps[-1]", stored, attention_maps(params, cfg, tokens), 0.0, 1e-5)[1])
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
