"""harnesslib: what scripts/sweep, plot, plot-sweep and compare share.

  experiments  load an experiment file (base config + grid + width rule + seeds), expand it into
               runs with readable names, and report mistakes as `file:line:col: message`
  harness      the command line of one run, `harness --shapes` (parameters, FLOPs per token)
  results      read one results file (layout: /work/shared/DESIGN.md) and a sweep's summary
  run state    a run's lock, log header/footer, Slurm submissions and squeue, and from them
               complete / running / failed / missing (sweep --status, docs/slurm.md)
  statistics   mean, sample std, Welch's t-test (own Welch-Satterthwaite df; the p-value from
               scipy.stats.t when scipy is there, else from our own regularized incomplete beta)
  gnuplot      run a gnuplot script, pick the pngcairo terminal (png if cairo is missing)

Assumes the Debian python (/usr/bin/python3) with numpy, h5py and yaml; scipy is optional.
The repository root is the parent of scripts/; ./harness there is the binary (override: $HARNESS).
"""
import csv
import difflib
import fcntl
import glob
import itertools
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np
import yaml

try:
    import h5py
except ImportError:  # pragma: no cover - reported when a results file is first opened
    h5py = None

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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

WIDTH_RULES = {
    "fixed_width": "d_head = d_model / n_head: E = d_model, same parameters and FLOPs at every "
                   "head count (Vaswani et al. 2017, Table 3(A))",
    "fixed_d_head": "d_head stays fixed: E = n_head * d_head grows with the heads (Qwen-style)",
    "free": "d_head as the config says (0 = d_model / n_head)",
}
EXPERIMENT_KEYS = ["name", "description", "base", "set", "grid", "width", "seeds"]

# Short names for run names: h8_dh16_lr0.003_s0.
ABBREV = {"model.n_head": "h", "model.d_head": "dh", "model.d_model": "d", "model.n_layer": "L",
          "model.seq_len": "T", "model.vocab_size": "V", "train.seed": "s", "train.lr": "lr",
          "train.steps": "steps", "train.batch_size": "bs", "train.weight_decay": "wd",
          "train.warmup_steps": "wu", "data.task": "", "data.max_period": "maxp",
          "data.min_period": "minp"}

PATTERNS = ["prev", "self", "first", "induction", "duplicate"]
CLASSES = PATTERNS + ["mixed"]


def arg_parser(doc):
    """An ArgumentParser whose --help prints the script's docstring (the one place options are
    described) and whose usage line is the docstring's."""
    import argparse

    class HelpAction(argparse.Action):
        def __call__(self, parser, namespace, values, option_string=None):
            try:
                print(doc.strip(), flush=True)
            except BrokenPipeError:  # `--help | head`
                pass
            parser.exit()

    usage = re.search(r"^usage: (.*)$", doc, re.M)
    ap = argparse.ArgumentParser(add_help=False, usage=usage.group(1) if usage else None)
    ap.add_argument("-h", "--help", nargs=0, action=HelpAction)
    return ap


class UserError(Exception):
    """A mistake in the user's input: printed as one line, the script exits with status 2."""


def die(message, status=2):
    print(message, file=sys.stderr)
    sys.exit(status)


# ------------------------------------------------------------------------------------------------
# YAML with positions


_FLOAT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")


class _Marked:
    """A YAML document as plain Python values, plus the line:col of every key and value."""

    def __init__(self, path, text):
        self.path = path
        self.key_marks = {}    # key path tuple -> yaml Mark of the key
        self.value_marks = {}  # key path tuple -> yaml Mark of the value
        loader = yaml.SafeLoader(text)
        try:
            root = loader.get_single_node()
            self.data = {} if root is None else self._walk(loader, root, ())
        except yaml.MarkedYAMLError as e:
            mark = e.problem_mark or e.context_mark
            raise UserError(f"{path}:{mark.line + 1}:{mark.column + 1}: {e.problem or e}")
        finally:
            loader.dispose()

    def _walk(self, loader, node, keypath):
        self.value_marks[keypath] = node.start_mark
        if isinstance(node, yaml.MappingNode):
            out = {}
            for key_node, value_node in node.value:
                key = loader.construct_object(key_node, deep=True)
                if not isinstance(key, str):
                    key = str(key)
                if key in out:
                    raise UserError(self.where_mark(key_node.start_mark) +
                                    f"duplicate key '{key}'; each key may appear once")
                self.key_marks[keypath + (key,)] = key_node.start_mark
                out[key] = self._walk(loader, value_node, keypath + (key,))
            return out
        if isinstance(node, yaml.SequenceNode):
            return [self._walk(loader, item, keypath + (i,)) for i, item in enumerate(node.value)]
        value = loader.construct_object(node, deep=True)
        if isinstance(value, str) and node.style is None and _FLOAT.fullmatch(value):
            value = float(value)  # YAML 1.1 reads a plain 3e-3 as a string; the harness a number
        return value

    def where_mark(self, mark):
        return f"{self.path}:{mark.line + 1}:{mark.column + 1}: " if mark else f"{self.path}:1:1: "

    def where(self, keypath, value=False):
        """`file:line:col: ` of a key (or of its value), falling back to the nearest parent."""
        marks = self.value_marks if value else self.key_marks
        keypath = tuple(keypath)
        while keypath and keypath not in marks:
            keypath = keypath[:-1]
        return self.where_mark(marks.get(keypath))


def read_config_file(path):
    """A harness config file flattened to {'section.key': value}."""
    with open(path) as f:
        data = yaml.safe_load(f) or {}
    flat = {}
    for section, keys in data.items():
        if isinstance(keys, dict):
            for key, value in keys.items():
                flat[f"{section}.{key}"] = value
    return flat


# ------------------------------------------------------------------------------------------------
# experiments


def format_value(value):
    """A value as the harness reads it after --set section.key= (and as a run name shows it)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "%.10g" % value
    return str(value)


def name_part(key, value):
    short = ABBREV.get(key, key.split(".")[-1])
    text = format_value(value)
    if not re.fullmatch(r"[-+]?[0-9.]+([eE][-+]?[0-9]+)?", text):  # keep a number's sign
        text = re.sub(r"[^A-Za-z0-9.+-]+", "-", text).strip("-") or "x"
    return short + text


class Run:
    """One run of an experiment: its name, its --set overrides and what it varies."""

    def __init__(self, name, overrides, swept, index):
        self.name = name
        self.overrides = overrides  # {'section.key': value} passed to the harness with --set
        self.swept = swept          # {'section.key': value} for every grid key (incl. train.seed)
        self.index = index

    @property
    def seed(self):
        return self.swept.get("train.seed", self.overrides.get("train.seed"))

    @property
    def point(self):
        """The swept values other than the seed: runs with one point are repeats over seeds."""
        return tuple((k, v) for k, v in self.swept.items() if k != "train.seed")

    def __repr__(self):
        return f"Run({self.name!r})"


class Experiment:
    """An experiment file. See the comment at the top of experiments/heads.yaml for the format."""

    def __init__(self, path):
        self.path = path
        try:
            with open(path) as f:
                self.text = f.read()
        except OSError as e:
            raise UserError(f"{path}:1:1: cannot read the experiment file: {e.strerror}")
        self.doc = _Marked(path, self.text)
        d = self.doc.data
        if not isinstance(d, dict):
            raise UserError(f"{path}:1:1: an experiment file is a mapping with keys "
                            + ", ".join(EXPERIMENT_KEYS))
        for key in d:
            if key not in EXPERIMENT_KEYS:
                hint = difflib.get_close_matches(key, EXPERIMENT_KEYS, 1)
                raise UserError(self.doc.where((key,)) + f"unknown key '{key}'"
                                + (f" (did you mean '{hint[0]}'?)" if hint else "")
                                + "; known: " + ", ".join(EXPERIMENT_KEYS))
        stem = os.path.splitext(os.path.basename(path))[0]
        self.name = str(d.get("name", stem))
        if not re.fullmatch(r"[A-Za-z0-9._-]+", self.name):
            raise UserError(self.doc.where(("name",), True) +
                            f"name '{self.name}' names a directory under results/: "
                            "use letters, digits, '.', '_' or '-'")
        self.description = str(d.get("description", "")).strip()

        if "base" not in d:
            raise UserError(f"{path}:1:1: missing 'base:', the config file every run starts from "
                            "(e.g. base: configs/heads12.yaml)")
        self.base = str(d["base"])
        self.base_path = self.base if os.path.isabs(self.base) else os.path.join(REPO, self.base)
        if not os.path.isfile(self.base_path):
            raise UserError(self.doc.where(("base",), True) +
                            f"base config '{self.base}' not found (relative paths are relative to "
                            f"the repository root {REPO})")
        try:
            self.base_config = read_config_file(self.base_path)
        except (OSError, yaml.YAMLError) as e:
            raise UserError(self.doc.where(("base",), True) + f"cannot read '{self.base}': {e}")

        self.set = self._flat_mapping("set", lists=False)
        self.grid = self._flat_mapping("grid", lists=True)
        if "seeds" in d:
            if "train.seed" in self.grid:
                raise UserError(self.doc.where(("seeds",)) +
                                "seeds: and grid: train.seed both sweep the seed; keep one")
            seeds = d["seeds"]
            if isinstance(seeds, int) and not isinstance(seeds, bool):
                seeds = list(range(seeds))  # `seeds: 3` means 0, 1, 2
            self._check_list(("seeds",), seeds, "train.seed")
            self.grid["train.seed"] = seeds
            self._grid_paths["train.seed"] = ("seeds",)
        for key in self.grid:
            if key in self.set:
                raise UserError(self.doc.where(self._set_paths[key]) +
                                f"{key} is both set here and swept in grid:; keep one")

        self.width = str(d.get("width", "free"))
        if self.width not in WIDTH_RULES:
            hint = difflib.get_close_matches(self.width, WIDTH_RULES, 1)
            raise UserError(self.doc.where(("width",), True) + f"unknown width rule '{self.width}'"
                            + (f" (did you mean '{hint[0]}'?)" if hint else "")
                            + "; use fixed_width, fixed_d_head or free")
        if self.width == "fixed_width" and "model.d_head" in self.grid:
            raise UserError(self.doc.where(self._grid_paths["model.d_head"]) +
                            "width: fixed_width derives model.d_head from d_model / n_head; "
                            "do not sweep it too (or use width: free)")
        if self.width == "fixed_width" and "model.d_head" in self.set:
            raise UserError(self.doc.where(self._set_paths["model.d_head"]) +
                            "width: fixed_width derives model.d_head from d_model / n_head; "
                            "remove it here (or use width: fixed_d_head)")
        self.runs = self._expand()

    # -- parsing helpers

    def _section_key(self, key, keypath):
        """'n_head' -> 'model.n_head'; 'model.n_head' stays; anything else is an error."""
        if "." in key:
            section, name = key.split(".", 1)
            if section not in CONFIG_KEYS:
                hint = difflib.get_close_matches(section, CONFIG_KEYS, 1)
                raise UserError(self.doc.where(keypath) + f"unknown config section '{section}'"
                                + (f" (did you mean '{hint[0]}'?)" if hint else "")
                                + "; sections: " + ", ".join(CONFIG_KEYS))
            if name not in CONFIG_KEYS[section]:
                # Maybe a key added to the harness after this list was written: the harness
                # decides (every run is checked with `harness --shapes` before anything runs).
                pass
            return key
        owners = [s for s, names in CONFIG_KEYS.items() if key in names]
        if len(owners) == 1:
            return f"{owners[0]}.{key}"
        every = [f"{s}.{n}" for s, names in CONFIG_KEYS.items() for n in names]
        if owners:
            raise UserError(self.doc.where(keypath) + f"'{key}' is in several sections ("
                            + ", ".join(f"{s}.{key}" for s in owners) + "); write section.key")
        hint = difflib.get_close_matches(key, [k.split(".")[1] for k in every], 1)
        raise UserError(self.doc.where(keypath) + f"unknown config key '{key}'"
                        + (f" (did you mean '{hint[0]}'?)" if hint else "")
                        + "; write section.key, e.g. model.n_head or train.lr")

    def _check_list(self, keypath, values, key):
        if not isinstance(values, list) or not values:
            raise UserError(self.doc.where(keypath, True) +
                            f"{key}: expected a non-empty list of values, e.g. [1, 2, 4]")
        for i, v in enumerate(values):
            if isinstance(v, (dict, list)) or v is None:
                raise UserError(self.doc.where(keypath + (i,), True) +
                                f"{key}: each value must be a single number or word")
        seen = set()
        for i, v in enumerate(values):
            if format_value(v) in seen:
                raise UserError(self.doc.where(keypath + (i,), True) +
                                f"{key}: value {format_value(v)} is listed twice")
            seen.add(format_value(v))

    def _flat_mapping(self, what, lists):
        """`set:`/`grid:` as {'section.key': value}; accepts `section.key: v`, `key: v` and
        `section: {key: v}`."""
        d = self.doc.data.get(what, {}) or {}
        paths = {}
        setattr(self, f"_{what}_paths", paths)
        if not isinstance(d, dict):
            raise UserError(self.doc.where((what,), True) +
                            f"{what}: expected a mapping of section.key: value")
        out = {}
        items = []
        for key, value in d.items():
            if key in CONFIG_KEYS and isinstance(value, dict):
                items += [(f"{key}.{k}", v, (what, key, k)) for k, v in value.items()]
            else:
                items.append((key, value, (what, key)))
        for key, value, keypath in items:
            full = self._section_key(key, keypath)
            if full in out:
                raise UserError(self.doc.where(keypath) + f"{full} is given twice")
            if full in ("output.path", "train.threads"):
                raise UserError(self.doc.where(keypath) + f"{full} is chosen by the sweep "
                                "(results/<experiment>/<run>.h5; threads = nproc // -j); remove it")
            if lists:
                self._check_list(keypath, value, full)
            elif isinstance(value, (dict, list)) or value is None:
                raise UserError(self.doc.where(keypath, True) +
                                f"{full}: a sweep passes values with --set, so each must be a "
                                "single number or word (put lists in the base config)")
            out[full] = value
            paths[full] = keypath
        return out

    # -- expansion

    def value_of(self, key, run_values):
        for source in (run_values, self.set, self.base_config):
            if key in source:
                return source[key]
        return HARNESS_DEFAULTS.get(key)

    def where_key(self, key):
        """`file:line:col: ` of the place in the experiment file that sets this config key."""
        if key in self._grid_paths:
            return self.doc.where(self._grid_paths[key])
        if key in self._set_paths:
            return self.doc.where(self._set_paths[key])
        return self.doc.where(("base",), True)

    def _expand(self):
        keys = list(self.grid)
        # Seeds vary fastest within a grid point, so runs of one point sit together in listings;
        # head counts come first in names.
        ordered = [k for k in ("model.n_head", "model.d_head") if k in keys]
        ordered += [k for k in keys if k not in ordered and k != "train.seed"]
        if "train.seed" in keys:
            ordered.append("train.seed")
        show_heads = (self.width != "free" or "model.n_head" in keys or "model.d_head" in keys)
        runs, names = [], {}
        for index, combo in enumerate(itertools.product(*(self.grid[k] for k in ordered))):
            values = dict(zip(ordered, combo))
            overrides = dict(self.set)
            overrides.update(values)
            n_head = self.value_of("model.n_head", values)
            d_model = self.value_of("model.d_model", values)
            d_head = self.value_of("model.d_head", values)
            if self.width == "fixed_width":
                if not isinstance(n_head, int) or not isinstance(d_model, int) or n_head < 1 \
                        or d_model % n_head:
                    where = self.where_key("model.n_head" if "model.n_head" in self.grid
                                           else "model.d_model")
                    raise UserError(where + f"width: fixed_width needs d_model divisible by "
                                    f"n_head, but d_model {d_model} / n_head {n_head} is not whole")
                d_head = d_model // n_head
                overrides["model.d_head"] = d_head
            elif self.width == "fixed_d_head":
                if not isinstance(d_head, int) or d_head < 1:
                    raise UserError(f"{self.path}:1:1: width: fixed_d_head keeps model.d_head "
                                    "fixed, so it needs a value: add it under set: "
                                    "(e.g. model.d_head: 16) or to the base config")
                overrides["model.d_head"] = d_head
            elif not d_head and isinstance(n_head, int) and isinstance(d_model, int) \
                    and n_head > 0 and d_model % n_head == 0:
                d_head = d_model // n_head
            parts = []
            if show_heads:
                parts += [name_part("model.n_head", n_head), name_part("model.d_head", d_head)]
            parts += [name_part(k, values[k]) for k in ordered
                      if k not in ("model.n_head", "model.d_head", "train.seed")]
            parts.append(name_part("train.seed", self.value_of("train.seed", values)))
            name = "_".join(parts)
            if name in names:
                raise UserError(f"{self.path}:1:1: runs {names[name]} and {index} would both be "
                                f"named '{name}'; make the grid values distinct")
            names[name] = index
            runs.append(Run(name, overrides, values, index))
        return runs

    def swept_keys(self):
        return list(self.grid)


def harness_command(base_path, overrides, extra=()):
    cmd = [HARNESS, base_path]
    for key, value in overrides.items():
        cmd += ["--set", f"{key}={format_value(value)}"]
    return cmd + list(extra)


# ------------------------------------------------------------------------------------------------
# harness --shapes


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


# ------------------------------------------------------------------------------------------------
# results files


def _text(x):
    if isinstance(x, bytes):
        return x.decode("utf-8", "replace")
    if isinstance(x, np.ndarray) and x.shape == ():
        return _text(x[()])
    return str(x)


def read_status(path):
    """The status attribute of a results file: 'complete', ..., '' if unreadable or missing."""
    if not os.path.exists(path):
        return ""
    try:
        with h5py.File(path, "r") as f:
            return _text(f.attrs.get("status", ""))
    except (OSError, KeyError):
        return ""


def read_classes(f):
    """/scores/class as a [L][H] list of str (string or enum datasets)."""
    if "scores/class" not in f:
        return []
    ds = f["scores/class"]
    data = ds[()]
    enum = h5py.check_enum_dtype(ds.dtype)
    if enum:
        names = {v: k for k, v in enum.items()}
        return [[names.get(int(x), str(x)) for x in row] for row in np.atleast_2d(data)]
    return [[_text(x) for x in row] for row in np.atleast_2d(data)]


def read_strings(f, path):
    """A string dataset or attribute (e.g. /probe/labels) as a list of str, or None."""
    if path in f:
        return [_text(x) for x in np.atleast_1d(f[path][()])]
    parent, _, name = path.rpartition("/")
    parent = parent or "/"
    if parent in f and name in f[parent].attrs:
        return [_text(x) for x in np.atleast_1d(f[parent].attrs[name])]
    return None


class RunResult:
    """The summary-level contents of one results file (no attention maps)."""

    def __init__(self, path):
        self.path = path
        with h5py.File(path, "r") as f:
            self.status = _text(f.attrs.get("status", ""))
            self.config_yaml = _text(f.attrs.get("config_yaml", ""))
            self.config = {k: (_text(v) if isinstance(v, (bytes, np.bytes_)) else v)
                           for k, v in f["config"].attrs.items()} if "config" in f else {}
            get = lambda p: np.asarray(f[p][()]) if p in f else np.zeros(0)
            self.train_step, self.train_loss = get("train/step"), get("train/loss")
            self.train_elapsed = get("train/elapsed_s")
            self.eval_step, self.eval_loss = get("eval/step"), get("eval/loss")
            self.classes = read_classes(f)
            self.n_params = sum(int(np.prod(obj.shape)) for obj in _datasets(f["params"])) \
                if "params" in f else 0
        try:
            self.resolved = yaml.safe_load(self.config_yaml) or {}
        except yaml.YAMLError:
            self.resolved = {}

    def resolved_value(self, key):
        section, name = key.split(".", 1)
        return (self.resolved.get(section) or {}).get(name)

    def class_counts(self):
        counts = {c: 0 for c in CLASSES}
        for row in self.classes:
            for c in row:
                counts[c] = counts.get(c, 0) + 1
        return counts

    @property
    def final_eval_loss(self):
        return float(self.eval_loss[-1]) if len(self.eval_loss) else float("nan")

    @property
    def final_train_loss(self):
        return float(self.train_loss[-1]) if len(self.train_loss) else float("nan")


def _datasets(group):
    out = []
    group.visititems(lambda name, obj: out.append(obj) if isinstance(obj, h5py.Dataset) else None)
    return out


def config_mismatch(result, overrides, base_config):
    """Keys whose value in a finished run differs from what the experiment now asks for:
    [(key, was, now)]. Compares the base config's keys and every override, except the ones a
    sweep chooses per machine (threads, output path)."""
    want = dict(base_config)
    want.update(overrides)
    out = []
    for key, now in want.items():
        if key in ("train.threads", "output.path") or "." not in key:
            continue
        was = result.resolved_value(key)
        if key == "model.d_head" and not now:
            continue  # 0 = d_model / n_head: resolved to a number in the file
        if key == "data.path" and not now:
            continue
        if not values_equal(was, now):
            out.append((key, was, now))
    return out


def values_equal(a, b):
    if isinstance(a, list) or isinstance(b, list):
        a = a if isinstance(a, list) else [a]
        b = b if isinstance(b, list) else [b]
        return len(a) == len(b) and all(values_equal(x, y) for x, y in zip(a, b))
    a, b = (float(x) if isinstance(x, str) and _FLOAT.fullmatch(x) else x for x in (a, b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) \
            and not isinstance(a, bool) and not isinstance(b, bool):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=0.0)
    return format_value(a) == format_value(b)


# ------------------------------------------------------------------------------------------------
# the state of a run, however it was launched (a local sweep, a Slurm array task, --run by hand)
#
# Whoever runs a run holds an advisory lock on <results>/.run-locks/<run>.lock (flock) while its
# harness runs, and writes <run>.log: a '#' header line with the command, '# started TIME on
# WHERE', the harness's output, and a last line '# finished TIME: exit status N (meaning) after
# S'. From these, the results file and Slurm's queue, `sweep --status` tells complete, running,
# failed (with the error) and missing runs apart without knowing how they were started.

EXIT_MEANING = {0: "complete", 2: "bad input", 3: "diverged", 130: "interrupted"}
LOCK_DIR = ".run-locks"
SLURM_DIR = "slurm"
_STARTED = re.compile(r"^# started (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?: on (.*))?$")
_FINISHED = re.compile(r"^# finished (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d): exit status (-?\d+)")
_PROGRESS = re.compile(r"step (\d+)/(\d+)")
SLURM_ACTIVE = ("RUNNING", "COMPLETING", "CONFIGURING", "STAGE_OUT", "SIGNALING", "SUSPENDED",
                "STOPPED", "RESIZING")


def exit_meaning(rc):
    """'bad input', 'diverged', ..., 'killed by signal SIGKILL', 'error'."""
    if rc < 0 or (rc > 128 and rc != 130):
        sig = -rc if rc < 0 else rc - 128
        try:
            return f"killed by signal {signal.Signals(sig).name}"
        except ValueError:
            return f"killed by signal {sig}" if rc < 0 else "error"
    return EXIT_MEANING.get(rc, "error")


def available_cpus():
    """CPUs this process may use: $SLURM_CPUS_PER_TASK inside a Slurm job (--cpus-per-task),
    else the CPU affinity mask, else the CPU count."""
    v = os.environ.get("SLURM_CPUS_PER_TASK", "")
    if v.isdigit() and int(v) > 0:
        return int(v)
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def slurm_task_id():
    """'12_3' inside a Slurm array task, '12' inside another Slurm job, else ''."""
    job, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    if job and task:
        return f"{job}_{task}"
    return os.environ.get("SLURM_JOB_ID", "")


def launch_info():
    """Where this process runs, for logs and locks: 'HOST (pid N)' or
    'HOST (slurm job 12_3, pid N)'."""
    job = slurm_task_id()
    return f"{socket.gethostname()} (" + (f"slurm job {job}, " if job else "") + \
        f"pid {os.getpid()})"


def shell_quote(s):
    return s if re.fullmatch(r"[\w./=:+,@%-]+", s) else "'" + s.replace("'", "'\\''") + "'"


def now_text():
    return time.strftime("%Y-%m-%d %H:%M:%S")


def log_header(cmd):
    """The first two lines of a run's log: the command, and when and where it started."""
    return ("# " + " ".join(shell_quote(c) for c in cmd) + "\n"
            + f"# started {now_text()} on {launch_info()}\n")


def log_footer(rc, seconds):
    """The last line of a run's log, written when its harness has exited."""
    return f"# finished {now_text()}: exit status {rc} ({exit_meaning(rc)}) after {seconds:.1f} s\n"


def log_error_tail(lines, n=8):
    """The last lines of a log that are neither '#' lines nor progress lines (the error)."""
    body = [l for l in lines if not l.startswith("#")]
    errors = [l for l in body if not re.match(r"\s*step \d+/\d+", l)]
    return "\n".join((errors or body)[-n:])


class RunLog:
    """What a run's log says: started (time text), where, finished, rc (None: no footer: still
    running or killed), progress (done, total) steps, and tail (the error lines)."""

    def __init__(self, path):
        self.path = path
        self.exists = False
        self.started = self.where = self.finished = self.rc = self.progress = None
        self.tail = ""
        try:
            with open(path, errors="replace") as f:
                lines = f.read().splitlines()
        except OSError:
            return
        self.exists = True
        for line in lines[:4]:
            m = _STARTED.match(line)
            if m:
                self.started, self.where = m.group(1), m.group(2)
        for line in reversed(lines[-3:]):
            m = _FINISHED.match(line)
            if m:
                self.finished, self.rc = m.group(1), int(m.group(2))
                break
        for line in reversed(lines):
            m = _PROGRESS.search(line)
            if m and not line.startswith("#"):
                self.progress = (int(m.group(1)), int(m.group(2)))
                break
        self.tail = log_error_tail(lines)


class RunLock:
    """The lock a run's runner holds while its harness runs (flock on <results>/.run-locks/
    <run>.lock, which holds the holder's launch_info()). On a file system without flock the
    lock is a no-op, and `--status` falls back on the logs and Slurm's queue."""

    def __init__(self, outdir, name):
        self.path = os.path.join(outdir, LOCK_DIR, name + ".lock")
        self.file = None

    def acquire(self, attempts=20):
        """True when held (or when locks do not work here); False when another holds it."""
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        f = open(self.path, "a+")
        for i in range(attempts):
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if i == attempts - 1:  # held for 2 s: not just a `--status` peeking at it
                    f.close()
                    return False
                time.sleep(0.1)
            except OSError:  # no flock on this file system: run unlocked
                break
        f.seek(0)
        f.truncate()
        f.write(launch_info() + "\n")
        f.flush()
        self.file = f
        return True

    def release(self):
        if self.file is not None:
            self.file.close()
            self.file = None


def lock_holder(outdir, name):
    """launch_info() of the process that holds the run's lock, or None when nobody does (or
    locks do not work on this file system)."""
    try:
        f = open(os.path.join(outdir, LOCK_DIR, name + ".lock"))
    except OSError:
        return None
    with f:
        try:
            fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return f.read().strip() or "?"
        except OSError:
            return None
        fcntl.flock(f, fcntl.LOCK_UN)
    return None


class Submission:
    """One array task of a Slurm submission: its directory under <results>/slurm/, the array's
    job id (None for a script written with --dry-run and submitted by hand) and its index."""

    def __init__(self, directory, job, index):
        self.dir, self.job, self.index = directory, job, index

    @property
    def task(self):
        return f"{self.job}_{self.index}" if self.job else f"?_{self.index}"

    def output(self):
        """The task's Slurm output file (slurmstepd's messages, the runner's skip notes)."""
        pattern = os.path.join(self.dir, f"task-{self.job or '*'}_{self.index}.out")
        found = sorted(glob.glob(pattern), key=os.path.getmtime)
        return found[-1] if found else None


def slurm_submissions(outdir):
    """{run name: Submission} for the latest Slurm submission of each run in a results dir
    (the latest one submitted by the sweep, else the latest --dry-run)."""
    base = os.path.join(outdir, SLURM_DIR)
    out = {}
    try:
        dirs = sorted(d for d in os.listdir(base) if os.path.isdir(os.path.join(base, d)))
    except OSError:
        return out
    for d in dirs:
        path = os.path.join(base, d)
        job = None
        try:
            with open(os.path.join(path, "jobs")) as f:
                for line in f:
                    parts = line.split()
                    if len(parts) == 2 and parts[0] == "array":
                        job = parts[1]
        except OSError:
            pass
        try:
            with open(os.path.join(path, "runs.tsv")) as f:
                for line in f:
                    parts = line.rstrip("\n").split("\t")
                    if len(parts) >= 2 and parts[0].isdigit():
                        # a later --dry-run (no job id) does not hide a submitted one
                        if job or parts[1] not in out or not out[parts[1]].job:
                            out[parts[1]] = Submission(path, job, int(parts[0]))
        except OSError:
            pass
    return out


def slurm_queue():
    """{(array job id, index): (state, reason or node)} of this user's array tasks in Slurm's
    queue (pending and running); None when squeue is missing or fails."""
    if not shutil.which("squeue"):
        return None
    try:
        import pwd
        user = pwd.getpwuid(os.getuid()).pw_name
        p = subprocess.run(["squeue", "-h", "-r", "-u", user, "-o", "%F|%K|%T|%R"],
                           capture_output=True, text=True, timeout=30)
    except (OSError, KeyError, subprocess.TimeoutExpired):
        return None
    if p.returncode != 0:
        return None
    out = {}
    for line in p.stdout.splitlines():
        parts = line.strip().split("|", 3)
        if len(parts) == 4 and parts[1].isdigit():
            out[(parts[0], int(parts[1]))] = (parts[2], parts[3].strip("()"))
    return out


class RunState:
    """state: 'complete', 'running', 'failed' or 'missing'; detail: one line; error: the
    error lines (failed runs)."""

    def __init__(self, name, state, detail="", error=""):
        self.name, self.state, self.detail, self.error = name, state, detail, error


def run_state(outdir, name, submission=None, queue=None):
    """The state of one run of a results directory, from its results file, its lock, its log,
    its latest Slurm submission (a Submission or None) and Slurm's queue (slurm_queue())."""
    h5 = os.path.join(outdir, name + ".h5")
    if read_status(h5) == "complete":
        return RunState(name, "complete")
    log = RunLog(os.path.join(outdir, name + ".log"))
    holder = lock_holder(outdir, name)
    queued = None
    if submission is not None and submission.job and queue:
        queued = queue.get((submission.job, submission.index))
    current = holder is not None  # the log is the running one's (the holder wrote it)
    if holder is None and queued and queued[0] in SLURM_ACTIVE:
        holder = f"{queued[1]} (slurm job {submission.task})"
        # started in Slurm; its runner may not have taken the lock and begun the log yet
        current = bool(log.where and f"slurm job {submission.task}," in log.where)
    if holder is not None:
        detail = f"on {holder}"
        if current and log.started:
            detail += f", started {log.started}"
        if current and log.progress and log.rc is None:
            detail += f", step {log.progress[0]}/{log.progress[1]}"
        return RunState(name, "running", detail)
    if queued:
        return RunState(name, "missing", f"queued: slurm job {submission.task} {queued[0]} "
                                         f"({queued[1]})")
    if log.rc == 0 and read_status(h5) == "complete":  # finished since we looked
        return RunState(name, "complete")

    file_status = read_status(h5) or (read_status(h5 + ".tmp") and "left a .tmp")
    slurm_lines = ""
    task_out = submission.output() if submission is not None else None
    if task_out:
        try:
            with open(task_out, errors="replace") as f:
                text = f.read().splitlines()
            slurm_lines = "\n".join([l for l in text if re.search(
                r"slurmstepd|error|Error|Traceback|CANCELLED|DUE TO", l)][-6:])
        except OSError:
            pass
    where = f" [{log.where}]" if log.where else ""
    if log.exists and log.started:
        if log.rc is not None:
            if log.rc == 0:
                detail = ("the harness exited 0 but left no complete results file"
                          + (f" ({file_status})" if file_status else ""))
            else:
                detail = f"exit status {log.rc} ({exit_meaning(log.rc)})"
            detail += f" at {log.finished}{where}"
        else:
            detail = ("stopped without finishing: no exit status in its log (killed: node "
                      "failure, time limit, out of memory?)" + where)
            if file_status:
                detail += f"; results file: {file_status}"
        error = log.tail
        if slurm_lines:
            error = (error + "\n" if error else "") + f"slurm ({task_out}):\n" + slurm_lines
        return RunState(name, "failed", detail + f"; log {log.path}", error)
    if file_status in ("diverged", "interrupted"):
        return RunState(name, "failed", f"results file says {file_status} (no log)")
    if task_out and slurm_lines:
        return RunState(name, "failed", f"slurm job {submission.task} ended before running the "
                                        f"harness; output {task_out}", slurm_lines)
    if submission is not None and submission.job and queue is not None:
        return RunState(name, "missing", f"submitted as slurm job {submission.task}, which is "
                                         "no longer queued and left no log (cancelled?)")
    return RunState(name, "missing")


# ------------------------------------------------------------------------------------------------
# the sweep summary: one row per run


SUMMARY_FIXED = ["run", "status", "seed", "n_head", "d_head", "d_model", "n_layer", "E",
                 "params", "flops_per_token", "final_step", "final_train_loss", "final_eval_loss",
                 "min_eval_loss", "train_seconds"]


def summary_row(run, result, shapes):
    """One summary row (dict) for a run; result is a RunResult or None; shapes (params, flops)."""
    row = {"run": run.name, "status": result.status if result else "missing"}
    for key in run.swept:
        row[key] = run.swept[key]
    ov = run.overrides
    if result is not None:
        c = result.config
        row.update(seed=c.get("seed"), n_head=c.get("n_head"), d_head=c.get("d_head"),
                   d_model=c.get("d_model"), n_layer=c.get("n_layer"))
    else:
        row.update(seed=run.seed, n_head=ov.get("model.n_head"), d_head=ov.get("model.d_head"),
                   d_model=ov.get("model.d_model"), n_layer=ov.get("model.n_layer"))
    try:
        row["E"] = int(row["n_head"]) * int(row["d_head"])
    except (TypeError, ValueError):
        row["E"] = None
    row["params"], row["flops_per_token"] = shapes
    if result is not None and row["params"] is None:
        row["params"] = result.n_params
    ok = result is not None and result.status == "complete"
    row["final_step"] = int(result.train_step[-1]) + 1 if ok and len(result.train_step) else None
    row["final_train_loss"] = result.final_train_loss if ok else float("nan")
    row["final_eval_loss"] = result.final_eval_loss if ok else float("nan")
    row["min_eval_loss"] = float(np.min(result.eval_loss)) if ok and len(result.eval_loss) \
        else float("nan")
    row["train_seconds"] = float(result.train_elapsed[-1]) if ok and len(result.train_elapsed) \
        else float("nan")
    counts = result.class_counts() if ok else {}
    for c in CLASSES + sorted(set(counts) - set(CLASSES)):
        row[f"heads_{c}"] = counts.get(c, 0) if ok else None
    return row


def summary_columns(rows, swept):
    cols = ["run", "status"] + [k for k in swept] + [c for c in SUMMARY_FIXED[2:]]
    for row in rows:
        for k in row:
            if k not in cols:
                cols.append(k)
    return cols


def write_summary(outdir, rows, experiment):
    """summary.csv and summary.h5 (one dataset per column, one element per run)."""
    swept = experiment.swept_keys()
    cols = summary_columns(rows, swept)
    tmp = os.path.join(outdir, "summary.csv.tmp")
    with open(tmp, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for row in rows:
            w.writerow(["" if row.get(c) is None or (isinstance(row.get(c), float)
                                                     and math.isnan(row[c]))
                        else format_value(row[c]) for c in cols])
    os.replace(tmp, os.path.join(outdir, "summary.csv"))

    tmp = os.path.join(outdir, "summary.h5.tmp")
    with h5py.File(tmp, "w") as f:
        f.attrs["experiment"] = experiment.name
        f.attrs["experiment_yaml"] = experiment.text
        f.attrs["experiment_path"] = experiment.path
        f.attrs["base"] = experiment.base
        f.attrs["width"] = experiment.width
        f.attrs["description"] = experiment.description
        f.attrs["swept"] = np.array(swept, dtype=h5py.string_dtype())
        f.attrs["columns"] = np.array(cols, dtype=h5py.string_dtype())
        for c in cols:
            values = [row.get(c) for row in rows]
            present = [v for v in values if v is not None]
            if present and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                               for v in present) and len(present) == len(values):
                data = np.array(values, dtype=np.int64)
            elif present and all(isinstance(v, (int, float, np.number)) and not isinstance(v, bool)
                                 for v in present):
                data = np.array([np.nan if v is None else float(v) for v in values])
            else:
                data = np.array(["" if v is None else format_value(v) for v in values],
                                dtype=h5py.string_dtype())
            f.create_dataset(c, data=data)
    os.replace(tmp, os.path.join(outdir, "summary.h5"))


class Summary:
    """A sweep's summary.h5 as columns: s['final_eval_loss'] -> numpy array, one per run."""

    def __init__(self, results_dir):
        self.dir = results_dir.rstrip("/")
        path = os.path.join(self.dir, "summary.h5")
        if not os.path.exists(path):
            raise UserError(f"{path}: not found; run scripts/sweep on the experiment first "
                            "(it writes summary.h5 and summary.csv)")
        with h5py.File(path, "r") as f:
            self.name = _text(f.attrs.get("experiment", os.path.basename(self.dir)))
            self.width = _text(f.attrs.get("width", "free"))
            self.description = _text(f.attrs.get("description", ""))
            self.swept = [_text(x) for x in f.attrs.get("swept", [])]
            self.columns = [_text(x) for x in f.attrs.get("columns", list(f.keys()))]
            self.data = {}
            for c in self.columns:
                v = f[c][()]
                if v.dtype.kind in "OS":
                    v = np.array([_text(x) for x in v], dtype=object)
                self.data[c] = v
        self.n = len(self.data.get("run", []))

    def __getitem__(self, key):
        return self.data[key]

    def rows(self):
        return [{c: self.data[c][i] for c in self.columns} for i in range(self.n)]

    def other_keys(self):
        """Swept keys besides the head count, d_head and the seed (they split the comparison)."""
        return [k for k in self.swept if k not in ("model.n_head", "model.d_head", "train.seed")]

    def run_path(self, i):
        return os.path.join(self.dir, self.data["run"][i] + ".h5")


def group_runs(summary, keys):
    """{tuple of values of keys: [row indices]} over complete runs, in first-seen order."""
    groups = {}
    for i in range(summary.n):
        if summary["status"][i] != "complete":
            continue
        groups.setdefault(tuple(_plain(summary[k][i]) for k in keys), []).append(i)
    return groups


def _plain(v):
    if isinstance(v, np.generic):
        return v.item()
    return v


# ------------------------------------------------------------------------------------------------
# statistics


def mean_std(values):
    """Mean and sample standard deviation (ddof = 1; nan for fewer than 2 values)."""
    x = np.asarray([v for v in values if not math.isnan(v)], dtype=float)
    if len(x) == 0:
        return float("nan"), float("nan"), 0
    return float(x.mean()), float(x.std(ddof=1)) if len(x) > 1 else float("nan"), len(x)


def _betacf(a, b, x):
    """Continued fraction of the incomplete beta function (modified Lentz; Numerical Recipes 6.4)."""
    tiny, eps = 1e-300, 1e-15
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < eps:
            break
    return h


def betainc_regularized(a, b, x):
    """I_x(a, b), the regularized incomplete beta function, for a, b > 0 and 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                 + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betacf(b, a, 1.0 - x) / b


def t_two_sided_p(t, df, use_scipy=True):
    """P(|T| >= |t|) for Student's t with df (real) degrees of freedom."""
    if math.isnan(t) or math.isnan(df) or df <= 0:
        return float("nan")
    if math.isinf(t):
        return 0.0
    if use_scipy:
        try:
            from scipy import stats
            return float(2.0 * stats.t.sf(abs(t), df))
        except ImportError:
            pass
    return betainc_regularized(df / 2.0, 0.5, df / (df + t * t))


def welch_t_test(a, b, use_scipy=True):
    """Welch's t-test of mean(a) - mean(b): (t, df, two-sided p). df by Welch-Satterthwaite:
        t  = (ma - mb) / sqrt(va/na + vb/nb)
        df = (va/na + vb/nb)^2 / ((va/na)^2/(na-1) + (vb/nb)^2/(nb-1))
    with sample variances (ddof 1). nan when either side has fewer than 2 values or no spread."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    na, nb = len(a), len(b)
    if na < 2 or nb < 2:
        return float("nan"), float("nan"), float("nan")
    va, vb = a.var(ddof=1) / na, b.var(ddof=1) / nb
    se2 = va + vb
    if se2 == 0.0:
        return float("nan"), float("nan"), float("nan")
    t = (a.mean() - b.mean()) / math.sqrt(se2)
    df = se2 * se2 / (va * va / (na - 1) + vb * vb / (nb - 1))
    return float(t), float(df), t_two_sided_p(float(t), float(df), use_scipy)


# ------------------------------------------------------------------------------------------------
# gnuplot


_TERMINAL = None


def gnuplot_terminal():
    """'pngcairo' when this gnuplot has it, else 'png'."""
    global _TERMINAL
    if _TERMINAL is None:
        if not shutil.which("gnuplot"):
            raise UserError("gnuplot not found; install gnuplot-nox (scripts/install-deps)")
        p = subprocess.run(["gnuplot", "-e", "set terminal"], capture_output=True, text=True)
        listing = p.stdout + p.stderr
        _TERMINAL = "pngcairo" if re.search(r"^\s*pngcairo\b", listing, re.M) else "png"
    return _TERMINAL


def png_terminal(width, height, font_size=10):
    term = gnuplot_terminal()
    if term == "pngcairo":
        return (f"set terminal pngcairo size {int(width)},{int(height)} noenhanced "
                f"font 'DejaVu Sans,{font_size}'")
    return f"set terminal png size {int(width)},{int(height)} noenhanced font ',{font_size}'"


def run_gnuplot(script, png_path, workdir=None):
    """Run a gnuplot script that writes png_path; raise UserError with gnuplot's message if it
    fails or leaves no (or an empty) file."""
    with tempfile.TemporaryDirectory() as tmp:
        script_path = os.path.join(workdir or tmp, os.path.basename(png_path) + ".gp")
        with open(script_path, "w") as f:
            f.write(script)
        p = subprocess.run(["gnuplot", script_path], capture_output=True, text=True,
                           cwd=workdir or tmp)
    if p.returncode != 0 or not os.path.exists(png_path) or os.path.getsize(png_path) == 0:
        raise UserError(f"gnuplot failed on {png_path}:\n{p.stderr.strip()}")
    noise = [l for l in p.stderr.splitlines() if l.strip() and "warning" not in l.lower()]
    if noise:
        print("\n".join(noise), file=sys.stderr)


def gp_string(s):
    """A gnuplot double-quoted string literal: backslash, quote and newline escaped."""
    s = str(s).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return '"' + s.replace("\t", "\\t").replace("\r", "\\r") + '"'


def write_columns(path, header, rows):
    with open(path, "w") as f:
        f.write("# " + " ".join(header) + "\n")
        for row in rows:
            f.write(" ".join("nan" if v is None or (isinstance(v, float) and math.isnan(v))
                             else repr(float(v)) if isinstance(v, (float, np.floating))
                             else str(v) for v in row) + "\n")


def write_matrix(path, matrix):
    np.savetxt(path, np.asarray(matrix, dtype=float), fmt="%.6g")


def token_label(byte):
    """A byte of a text probe as a one-character axis label: visible space and newline."""
    c = chr(byte) if isinstance(byte, int) else byte
    return {" ": "␣", "\n": "↵", "\t": "→", "\r": "␍"}.get(c, c if c.isprintable() else "·")
