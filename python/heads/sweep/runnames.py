"""heads.sweep.runnames: how a run's values become its name (h8_dh16_lr0.003_s0): a short name per
config key and a value written so that the name is a file name and keeps a number's sign.

Pure text: knows nothing of experiments, runs or files.
"""
import re

from ..core.configs import format_value

# Short names for run names: h8_dh16_lr0.003_s0.
ABBREV = {"model.n_head": "h", "model.d_head": "dh", "model.d_model": "d", "model.n_layer": "L",
          "model.seq_len": "T", "model.vocab_size": "V", "train.seed": "s", "train.lr": "lr",
          "train.steps": "steps", "train.batch_size": "bs", "train.weight_decay": "wd",
          "train.warmup_steps": "wu", "data.task": "", "data.max_period": "maxp",
          "data.min_period": "minp", "train.head_l0": "lambda", "train.heads_kept": "kept"}


def name_part(key, value):
    short = ABBREV.get(key, key.split(".")[-1])
    text = format_value(value)
    if not re.fullmatch(r"[-+]?[0-9.]+([eE][-+]?[0-9]+)?", text):  # keep a number's sign
        text = re.sub(r"[^A-Za-z0-9.+-]+", "-", text).strip("-") or "x"
    return short + text
