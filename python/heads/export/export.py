"""heads.export: a run's trained parameters for other tools: a TransformerLens HookedTransformer
state dict plus its HookedTransformerConfig fields, a plain PyTorch state dict, NumPy .npz, or a
GGUF file for llama.cpp (heads.export.gguf).

Reads runs with heads.results; knows the harness's parameter layout (/params, docs/results-format.md) and TransformerLens's
conventions; nothing of how runs are made. What TransformerLens cannot express is refused with
UserError (one line naming the switch), before anything is written.

TransformerLens conventions used (checked against its source, transformer_lens/components):
  embed.W_E [d_vocab, d_model]; pos_embed.W_pos [n_ctx, d_model] (absent with rotary);
  blocks.{l}.ln1.w/b; blocks.{l}.attn.W_Q [n_heads, d_model, d_head], b_Q [n_heads, d_head];
  W_K/W_V/b_K/b_V the same, or with n_key_value_heads set (grouped K/V) _W_K/_W_V
  [n_key_value_heads, d_model, d_head] and _b_K/_b_V, query head h reading K/V head
  h // (n_heads / n_key_value_heads) (repeat_interleave); W_O [n_heads, d_head, d_model], b_O;
  ln_final.w/b; unembed.W_U [d_model, d_vocab], b_U. LayerNorm "LN": biased variance, eps inside
  the square root; scores / sqrt(d_head); causal mask, masked scores = IGNORE (-inf).
  Rotary: rotate_every_two with rotary_adjacent_pairs = False pairs dim i with i + rotary_dim/2
  (GPT-NeoX "rotate half"), angle pos / base^(2i/rotary_dim), on the first rotary_dim dims of
  each head: the harness's pos: rope exactly.
  Shortformer: TransformerLens feeds LN(resid) + W_pos to W_Q and W_K; the harness feeds
  LN(h + W_pos). These differ, so pos: shortformer is refused for TransformerLens.
"""
import json
import os
import tempfile

import numpy as np

from . import gguf
from ..read import results
from ..core import safefile
from ..core.cli import UserError

FORMATS = ("transformer-lens", "torch", "npz", "gguf")
LN_EPS = 1e-5


def read_run(path):
    """The run as results.Run, refused in one line unless it is a results file."""
    if not os.path.isfile(path):
        raise UserError(f"{path}: cannot open: no such results file")
    try:
        run = results.Run(path)
    except OSError:
        raise UserError(f"{path}: cannot open as an HDF5 results file")
    if not run.config:
        raise UserError(f"{path}: not a harness results file (no /config)")
    return run


def check_complete(path, status):
    if status == "complete":
        return
    why = {"interrupted": "it was interrupted; finish it with `harness CONFIG --resume` first",
           "diverged": "its loss diverged, so its parameters are not a trained model",
           "running": "it is a checkpoint of a run still in progress"}
    raise UserError(f"{path}: status is '{status or 'missing'}', not 'complete': "
                      f"{why.get(status, 'only complete runs are exported')}")


def _flag(cfg, key):
    return str(cfg.get(key, "false")) in ("true", "1", "True")


def refusal(cfg):
    """Why TransformerLens cannot express this run, naming the switch; None if it can."""
    if _flag(cfg, "output_gate"):
        return ("model.output_gate is true: TransformerLens's attention has no output gate "
                "(O_cat * sigmoid(z W_gate + b_gate))")
    if _flag(cfg, "sink"):
        return ("model.sink is true: TransformerLens's softmax has no attention-sink logit in its "
                "denominator")
    if cfg.get("pos") == "shortformer":
        return ("model.pos is shortformer: the harness computes Q and K from LN(h + W_pos), "
                "TransformerLens's shortformer from LN(h) + W_pos, which differ")
    return None


def tl_config(cfg, name):
    """The HookedTransformerConfig fields of the run (JSON-ready)."""
    H, n_kv = int(cfg["n_head"]), int(cfg.get("n_kv_head") or cfg["n_head"])
    pos = cfg.get("pos", "learned")
    out = {"model_name": name, "n_layers": int(cfg["n_layer"]), "d_model": int(cfg["d_model"]),
           "d_head": int(cfg["d_head"]), "n_heads": H, "n_ctx": int(cfg["seq_len"]),
           "d_vocab": int(cfg["vocab_size"]), "d_vocab_out": int(cfg["vocab_size"]), "attn_only": True,
           "normalization_type": "LN", "eps": LN_EPS, "use_attn_scale": True,
           "positional_embedding_type": "rotary" if pos == "rope" else "standard",
           "default_prepend_bos": False, "init_weights": False}
    if n_kv != H:
        out["n_key_value_heads"] = n_kv
    if pos == "rope":
        base = float(cfg.get("rope_base", 10000))
        out.update(rotary_dim=int(cfg.get("rope_dims") or cfg["d_head"]), rotary_adjacent_pairs=False,
                   rotary_base=int(base) if base.is_integer() else base)
    return out


def tl_state_dict(cfg, params):
    """{TransformerLens name: float32 array} from the harness's /params."""
    L, D, H, dh = (int(cfg[k]) for k in ("n_layer", "d_model", "n_head", "d_head"))
    n_kv = int(cfg.get("n_kv_head") or H)
    E, Ekv, pos = H * dh, n_kv * dh, cfg.get("pos", "learned")
    V = int(cfg["vocab_size"])
    grouped = "_" if n_kv != H else ""
    sd = {"embed.W_E": params["tok_emb"]}
    if pos != "rope":  # "none" (no pos_emb stored): TransformerLens's standard positions with W_pos = 0
        sd["pos_embed.W_pos"] = params["pos_emb"] if pos == "learned" else \
            np.zeros((int(cfg["seq_len"]), D), np.float32)

    def heads(w, n):  # [D, n*dh] -> [n, D, dh]
        return np.ascontiguousarray(w.reshape(D, n, dh).transpose(1, 0, 2))

    for l in range(L):
        p = lambda k: params[f"layer{l}/{k}"]
        w, b, a = p("w_qkv"), p("b_qkv"), f"blocks.{l}.attn."
        sd[f"blocks.{l}.ln1.w"], sd[f"blocks.{l}.ln1.b"] = p("ln_g"), p("ln_b")
        sd[a + "W_Q"], sd[a + "b_Q"] = heads(w[:, :E], H), b[:E].reshape(H, dh)
        sd[a + grouped + "W_K"], sd[a + grouped + "b_K"] = heads(w[:, E:E + Ekv], n_kv), b[E:E + Ekv].reshape(n_kv, dh)
        sd[a + grouped + "W_V"], sd[a + grouped + "b_V"] = heads(w[:, E + Ekv:], n_kv), b[E + Ekv:].reshape(n_kv, dh)
        sd[a + "W_O"], sd[a + "b_O"] = np.ascontiguousarray(p("w_o").reshape(H, dh, D)), p("b_o")
    sd["ln_final.w"], sd["ln_final.b"] = params["lnf_g"], params["lnf_b"]
    sd["unembed.W_U"], sd["unembed.b_U"] = params["w_unembed"], np.zeros(V, np.float32)
    return sd


def run_tokenizer(run_path):
    """(pieces, scores, types, model bytes) of a subword run's /tokenizer, None for other runs."""
    import h5py
    with h5py.File(run_path, "r") as f:
        if "tokenizer/pieces" not in f:
            return None
        return ([results.text(p) for p in f["tokenizer/pieces"][()]], f["tokenizer/scores"][()],
                f["tokenizer/type"][()], bytes(f["tokenizer/model"][()]))


def _save_bytes(data):
    def write(tmp):
        with open(tmp, "wb") as f:
            f.write(data)
    return write


def sidecar_path(out):
    """OUT.pt -> OUT.json (the config beside the weights)."""
    stem, ext = os.path.splitext(out)
    return (stem if ext in (".pt", ".pth", ".npz", ".bin") else out) + ".json"


def _write_files(writers):
    """writers: [(path, function(tmp_path))]. Every file goes to a temporary name in its
    directory; all are renamed into place only after every one was written."""
    temps, path, made = [], None, []
    try:
        for path, _ in writers:  # the folders of the outputs, as the harness makes output.path's
            made += safefile.make_dirs(os.path.dirname(os.path.abspath(path)))
        for path, write in writers:
            fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".",
                                       dir=os.path.dirname(os.path.abspath(path)))
            os.close(fd)
            temps.append((tmp, path))
            write(tmp)
            mask = os.umask(0)
            os.umask(mask)
            os.chmod(tmp, 0o666 & ~mask)
    except BaseException as e:  # a signal's SystemExit too: no temporary is left behind
        for tmp, _ in temps:
            if os.path.exists(tmp):
                os.unlink(tmp)
        for folder in reversed(made):  # those it made, when still empty: nothing is left behind
            try:
                os.rmdir(folder)
            except OSError:
                pass
        if isinstance(e, OSError):
            raise UserError(f"{path}: cannot write: {e.strerror}")
        raise
    for tmp, path in temps:
        os.replace(tmp, path)


def _save_torch(tensors):
    import torch
    sd = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in tensors.items()}
    return lambda tmp: torch.save(sd, tmp)


def _save_json(obj):
    def write(tmp):
        with open(tmp, "w") as f:
            json.dump(obj, f, indent=2)
            f.write("\n")
    return write


def _save_npz(tensors):
    def write(tmp):
        with open(tmp, "wb") as f:  # a file object: np.savez would append ".npz" to a name
            np.savez(f, **tensors)
    return write


def weights(run, step=None):
    """The one weight source of every format: /params, or the weight snapshot of `step`
    (/snapshots, heads.read.steps.AtStep), float32 by /params's names."""
    params = run.params() if step is None else run.at(step).params
    return {k: np.asarray(v, np.float32) for k, v in params.items()}


def export(run_path, fmt, out, step=None):
    """Write the export of run_path in format fmt to out (and its .json beside it): the final
    model, or with step the weight snapshot of that step; returns the paths written."""
    if fmt not in FORMATS:
        raise UserError(f"--to {fmt}: unknown format; use one of {', '.join(FORMATS)}")
    run = read_run(run_path)
    status, cfg = run.status, run.config
    check_complete(run_path, status)
    params = weights(run, step)
    name = os.path.splitext(os.path.basename(run_path))[0]
    if fmt == "gguf":
        data = gguf.gguf_of_run(run_path, cfg, params, run_tokenizer(run_path), name)
        _write_files([(out, _save_bytes(data))])
        return [out]
    side = sidecar_path(out)
    if os.path.abspath(side) == os.path.abspath(out):
        raise UserError(f"{out}: the output must not end in .json (the config goes to {side})")
    if fmt == "transformer-lens":
        why = refusal(cfg)
        if why:
            raise UserError(f"{run_path}: cannot export to TransformerLens: {why}; "
                              "use --to torch or --to npz for this run")
        writers = [(out, _save_torch(tl_state_dict(cfg, params))), (side, _save_json(tl_config(cfg, name)))]
    else:
        meta = {"format": "heads parameters (names as /params of the results file)", "run": name,
                "status": status, "step": step, "config": {k: results.plain(v) for k, v in cfg.items()},
                "shapes": {k: list(v.shape) for k, v in params.items()}}
        save = _save_torch(params) if fmt == "torch" else _save_npz(params)
        writers = [(out, save), (side, _save_json(meta))]
    _write_files(writers)
    return [out, side]
