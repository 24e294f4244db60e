"""heads.export.gguf: a run's model as a GGUF v3 file (every tensor F32) that llama.cpp loads as its
`gpt2` architecture, and computes with the same numbers as the harness (docs/llama-cpp.md).

Knows the harness's parameter layout (/params, docs/results-format.md), llama.cpp's gpt2 loader
and graph (src/models/gpt2.cpp: token + position embeddings, per block LayerNorm -> fused QKV with
bias -> attention scaled by 1/sqrt(n_embd/n_head) -> W_O with bias -> residual -> LayerNorm -> GELU
MLP -> residual; final LayerNorm, output matrix or the tied token embedding) and the GGUF
container (magic, version 3, key/values, tensor infos, 32-byte aligned data). Nothing of how runs
are made; reads through heads.export, never writes anything but the file it is given.

How each harness number is kept (the derivation is docs/llama-cpp.md's):
  - the MLP gpt2 requires is n_ff = 1 with every weight and bias 0: GELU(0) = 0, so it adds 0;
  - heads narrower than D/H (E < D) are zero-padded to d' = D/H: the padded Q/K/V columns are 0,
    so the dot products and outputs are unchanged, and Q is scaled by sqrt(d'/d_head) so that
    llama.cpp's 1/sqrt(d') gives the harness's 1/sqrt(d_head);
  - when H·d' must exceed D (E > D, or D not a multiple of H) the residual stream is padded to
    D' = H·d' with dimensions that stay 0: every vector written into it (embeddings, W_O's rows,
    b_O) is first centred (LayerNorm, its only reader, ignores a constant), so the real part has
    mean 0, and a LayerNorm over D' equals the one over D with eps' = eps·D/D' and gains scaled
    by sqrt(D/D') (the padded gains and biases are 0);
  - no positions: the position table is written as zeros.
What gpt2 cannot compute (rotary, shortformer, the sink, the output gate) is refused by name.
"""
import math
import struct

import numpy as np

from ..core.cli import UserError

LN_EPS = 1e-5
GGUF_VERSION = 3
ALIGNMENT = 32
# GGUF metadata value types and the F32 tensor type
T_UINT32, T_INT32, T_FLOAT32, T_BOOL, T_STRING, T_ARRAY = 4, 5, 6, 7, 8, 9
GGML_F32 = 0
# SentencePiece's piece types, which are also llama.cpp's token types
PIECE_NORMAL, PIECE_UNKNOWN, PIECE_CONTROL = 1, 2, 3


def _flag(cfg, key):
    return str(cfg.get(key, "false")) in ("true", "1", "True")


def refusal(cfg):
    """Why llama.cpp's gpt2 cannot compute this run exactly, naming the switch; None if it can."""
    pos = cfg.get("pos", "learned")
    if pos == "rope":
        return ("model.pos is rope: llama.cpp's gpt2 adds a learned position table and has no "
                "rotary positions (its rotary architectures have no fused-QKV biases with "
                "LayerNorm and no attention-only block)")
    if pos == "shortformer":
        return ("model.pos is shortformer: gpt2 adds positions to the residual stream, the harness "
                "only to the Q/K input LN(h + W_pos)")
    if _flag(cfg, "sink"):
        return "model.sink is true: gpt2's softmax has no attention-sink logit in its denominator"
    if _flag(cfg, "output_gate"):
        return "model.output_gate is true: gpt2's attention has no output gate"
    return None


def padded_widths(D, H, dh, extra_dims=0):
    """(d', D'): the head width and residual width of the gpt2 file: d' >= d_head and
    D' = H·d' >= D + extra_dims."""
    d_pad = max(dh, -(-(D + extra_dims) // H))
    return d_pad, H * d_pad


def gpt2_tensors(cfg, params, n_extra=0):
    """The gpt2 model of the run with n_extra tokens after its V (their embeddings 0, their logits
    -1e4 through an unembedding bias, so their probability is exactly 0 in float32):
    (metadata {key: (type, value)}, [(name, float32 array in GGUF order: numpy shape = reversed
    ggml dims)]).

    The unembedding bias: the residual dimension D (a padded one, always 0) leaves the final
    LayerNorm as exactly 1 (gain 0, bias 1), so its row of the output matrix is added to every
    logit."""
    L, D, H, dh, T, V = (int(cfg[k]) for k in ("n_layer", "d_model", "n_head", "d_head", "seq_len", "vocab_size"))
    Hkv = int(cfg.get("n_kv_head") or H)
    E, Ekv = H * dh, Hkv * dh
    dp, Dp = padded_widths(D, H, dh, 1 if n_extra else 0)
    pad_residual = Dp > D
    q_scale = math.sqrt(dp / dh)
    ln_scale = math.sqrt(D / Dp)
    unembed_bias = np.concatenate([np.zeros(V), np.full(n_extra, -1e4)])

    def into_residual(x):  # [..., D] vectors written into the residual stream -> [..., D']
        x = np.asarray(x, np.float64)
        if pad_residual:
            x = x - x.mean(axis=-1, keepdims=True)
        out = np.zeros(x.shape[:-1] + (Dp,))
        out[..., :D] = x
        return out

    def ln(gain, bias):
        g, b = np.zeros(Dp), np.zeros(Dp)
        g[:D] = np.asarray(gain, np.float64) * (ln_scale if pad_residual else 1.0)
        b[:D] = bias
        return g, b

    def heads(w, n, scale=1.0):  # [D, n·dh] (or [n·dh] for a bias) -> [D', n·d'] zero-padded
        w = np.asarray(w, np.float64) * scale
        if w.ndim == 1:
            out = np.zeros((n, dp))
            out[:, :dh] = w.reshape(n, dh)
            return out.reshape(n * dp)
        out = np.zeros((Dp, n, dp))
        out[:D, :, :dh] = w.reshape(D, n, dh)
        return out.reshape(Dp, n * dp)

    f32 = lambda x: np.ascontiguousarray(x, dtype=np.float32)
    pos = cfg.get("pos", "learned")
    tok = np.zeros((V + n_extra, Dp))
    tok[:V] = into_residual(params["tok_emb"])
    tensors = [("token_embd.weight", f32(tok)),
               ("position_embd.weight", f32(into_residual(params["pos_emb"]) if pos == "learned"
                                            else np.zeros((T, Dp))))]
    for l in range(L):
        p = lambda k: params[f"layer{l}/{k}"]
        w, b = p("w_qkv"), p("b_qkv")
        w_fused = np.concatenate([heads(w[:, :E], H, q_scale), heads(w[:, E:E + Ekv], Hkv),
                                  heads(w[:, E + Ekv:], Hkv)], axis=1)
        b_fused = np.concatenate([heads(b[:E], H, q_scale), heads(b[E:E + Ekv], Hkv), heads(b[E + Ekv:], Hkv)])
        w_o = np.zeros((H, dp, Dp))
        w_o[:, :dh, :] = into_residual(p("w_o")).reshape(H, dh, Dp)
        g, bb = ln(p("ln_g"), p("ln_b"))
        tensors += [
            (f"blk.{l}.attn_norm.weight", f32(g)), (f"blk.{l}.attn_norm.bias", f32(bb)),
            (f"blk.{l}.attn_qkv.weight", f32(w_fused.T)), (f"blk.{l}.attn_qkv.bias", f32(b_fused)),
            (f"blk.{l}.attn_output.weight", f32(w_o.reshape(H * dp, Dp).T)),
            (f"blk.{l}.attn_output.bias", f32(into_residual(p("b_o")))),
            # the MLP gpt2 requires, of width 1 and all zero: it adds exactly 0
            (f"blk.{l}.ffn_norm.weight", f32(np.ones(Dp))), (f"blk.{l}.ffn_norm.bias", f32(np.zeros(Dp))),
            (f"blk.{l}.ffn_up.weight", f32(np.zeros((1, Dp)))), (f"blk.{l}.ffn_up.bias", f32(np.zeros(1))),
            (f"blk.{l}.ffn_down.weight", f32(np.zeros((Dp, 1)))), (f"blk.{l}.ffn_down.bias", f32(np.zeros(Dp))),
        ]
    g, bb = ln(params["lnf_g"], params["lnf_b"])
    unembed = np.zeros((V + n_extra, Dp))
    unembed[:V, :D] = np.asarray(params["w_unembed"], np.float64).T
    if n_extra:
        bb[D] = 1.0
        unembed[:, D] = unembed_bias
    tensors += [("output_norm.weight", f32(g)), ("output_norm.bias", f32(bb))]
    if not np.array_equal(f32(unembed), tensors[0][1]):  # tied: gpt2 reuses token_embd
        tensors.append(("output.weight", f32(unembed)))
    eps = LN_EPS * D / Dp if pad_residual else LN_EPS
    meta = {
        "general.architecture": (T_STRING, "gpt2"),
        "general.file_type": (T_UINT32, 0),  # all F32
        "gpt2.context_length": (T_UINT32, T),
        "gpt2.embedding_length": (T_UINT32, Dp),
        "gpt2.feed_forward_length": (T_UINT32, 1),
        "gpt2.block_count": (T_UINT32, L),
        "gpt2.attention.head_count": (T_UINT32, H),
        "gpt2.attention.head_count_kv": (T_UINT32, Hkv),
        "gpt2.attention.layer_norm_epsilon": (T_FLOAT32, eps),
    }
    return meta, tensors


def _proto_fields(data):
    """(field number, wire type, value) of a protobuf message's top level (varints and
    length-delimited fields; fixed32/64 skipped)."""
    i, out = 0, []
    while i < len(data):
        key, i = _varint(data, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
        elif wire == 2:
            n, i = _varint(data, i)
            value, i = data[i:i + n], i + n
        elif wire in (1, 5):
            value, i = None, i + (8 if wire == 1 else 4)
        else:
            break
        out.append((field, wire, value))
    return out


def _varint(data, i):
    shift = value = 0
    while True:
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, i


def add_dummy_prefix(model_bytes):
    """SentencePiece's normalizer_spec.add_dummy_prefix (ModelProto field 3, its field 3; default
    true) of a .model file."""
    for field, wire, value in _proto_fields(model_bytes):
        if field == 3 and wire == 2:
            for f2, w2, v2 in _proto_fields(value):
                if f2 == 3 and w2 == 0:
                    return bool(v2)
    return True


def byte_symbols():
    """GPT-2's byte-level BPE alphabet: the character each byte is written as in its vocabulary."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    out, n = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + n)
            n += 1
    return [out[b] for b in range(256)]


def vocabulary(cfg, tokenizer):
    """The tokenizer.ggml.* metadata and how many tokens it adds after the run's V.

    A SentencePiece run: its own pieces, scores and types as llama.cpp's "llama" vocabulary, which
    splits text as SentencePiece does. Any other run, one token per id, as a "gpt2" byte-level
    vocabulary without merges: a text run's 256 ids are the bytes (so llama.cpp encodes text byte
    by byte, as the harness), other runs' ids are named "[id]" and the 256 byte symbols follow
    them as extra tokens (llama.cpp tokenises text while loading a model and needs every byte;
    gpt2_tensors gives the extras probability 0)."""
    V = int(cfg["vocab_size"])
    meta = {"tokenizer.ggml.add_bos_token": (T_BOOL, False),
            "tokenizer.ggml.add_eos_token": (T_BOOL, False)}
    if tokenizer is not None:
        pieces, scores, types, model_bytes = tokenizer
        types = [int(t) for t in types]
        meta["tokenizer.ggml.model"] = (T_STRING, "llama")
        meta["tokenizer.ggml.add_space_prefix"] = (T_BOOL, add_dummy_prefix(model_bytes))
        meta["tokenizer.ggml.unknown_token_id"] = (T_UINT32, types.index(PIECE_UNKNOWN) if PIECE_UNKNOWN in types else 0)
        control = [i for i, t in enumerate(types) if t == PIECE_CONTROL]
        if len(control) >= 2:
            meta["tokenizer.ggml.bos_token_id"] = (T_UINT32, control[0])
            meta["tokenizer.ggml.eos_token_id"] = (T_UINT32, control[1])
        scores = [float(x) for x in scores]
        n_extra = 0
    else:
        symbols = byte_symbols()
        if cfg.get("task") == "text" and V == 256:
            pieces, n_extra = symbols, 0
        else:
            pieces, n_extra = [f"[{i}]" for i in range(V)] + symbols, 256
        scores, types = [0.0] * len(pieces), [PIECE_NORMAL] * len(pieces)
        meta["tokenizer.ggml.model"] = (T_STRING, "gpt2")
        meta["tokenizer.ggml.pre"] = (T_STRING, "default")
        meta["tokenizer.ggml.merges"] = (T_ARRAY, (T_STRING, []))
    meta.update({"tokenizer.ggml.tokens": (T_ARRAY, (T_STRING, list(pieces))),
                 "tokenizer.ggml.scores": (T_ARRAY, (T_FLOAT32, scores)),
                 "tokenizer.ggml.token_type": (T_ARRAY, (T_INT32, types))})
    return meta, n_extra


def _string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _value(kind, value):
    if kind == T_STRING:
        return _string(value)
    if kind == T_ARRAY:
        elem, items = value
        body = b"".join(_value(elem, x) for x in items) if elem == T_STRING else \
            np.asarray(items, {T_FLOAT32: "<f4", T_INT32: "<i4", T_UINT32: "<u4"}[elem]).tobytes()
        return struct.pack("<IQ", elem, len(items)) + body
    return struct.pack({T_UINT32: "<I", T_INT32: "<i", T_FLOAT32: "<f", T_BOOL: "<?"}[kind], value)


def gguf_bytes(meta, tensors):
    """The GGUF v3 file: header, key/values, tensor infos, then the data, each tensor 32-byte
    aligned (general.alignment's default)."""
    out = [b"GGUF", struct.pack("<IQQ", GGUF_VERSION, len(tensors), len(meta))]
    for key, (kind, value) in meta.items():
        out += [_string(key), struct.pack("<I", kind), _value(kind, value)]
    offset, data = 0, []
    for name, array in tensors:
        dims = array.shape[::-1]  # ggml's ne0 is the fastest-varying (last numpy) axis
        out += [_string(name), struct.pack("<I", len(dims)), struct.pack(f"<{len(dims)}Q", *dims),
                struct.pack("<IQ", GGML_F32, offset)]
        raw = array.astype("<f4").tobytes()
        pad = -len(raw) % ALIGNMENT
        data.append(raw + b"\0" * pad)
        offset += len(raw) + pad
    head = b"".join(out)
    return head + b"\0" * (-len(head) % ALIGNMENT) + b"".join(data)


def gguf_of_run(run_path, cfg, params, tokenizer, name):
    """The file's bytes, or UserError naming what gpt2 cannot compute."""
    why = refusal(cfg)
    if why:
        raise UserError(f"{run_path}: cannot export to GGUF (llama.cpp gpt2): {why}; "
                        "use --to torch or --to npz for this run")
    vocab, n_extra = vocabulary(cfg, tokenizer)
    meta, tensors = gpt2_tensors(cfg, params, n_extra)
    meta = {"general.architecture": meta.pop("general.architecture"), "general.name": (T_STRING, name), **meta}
    meta.update(vocab)
    return gguf_bytes(meta, tensors)
