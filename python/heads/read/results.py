"""heads.results: reading results files (one run's HDF5 file; layout in docs/results-format.md)
and a sweep's summary.h5: the one reader that the scripts, the tests and users share.

For users (docs/python.md):
    run = Run("results/heads12.h5")       # status, config, losses, classes
    maps = run.maps()                     # Named: dims (step, layer, head, probe, query, key)
    maps.isel(step=-1, layer=1, head=3, probe=0)   # a [query, key] numpy array
    run.token_labels(0)                   # axis labels of probe 0 (bytes, subword pieces or ids)
    run.params()                          # {"tok_emb": array, "layer0/w_qkv": array, ...}
    run.at(200).params, run.at(200)["heads/ablation_delta"]   # a weight snapshot and its study
    Summary("results/heads").rows()       # a sweep's summary, one dict per run (heads.results
                                          # only: it is heads.sweep.sweepread's)

Every file is read whole in a child process before this process opens it (heads.read.verify: its
checksums, the strings' text checksum included): HDF5 can crash or hang on a damaged file, and a
reader must name the file and the problem instead.

Knows nothing of how runs are launched; never writes a results file (only its cache of which
files read whole, under $XDG_CACHE_HOME).
"""
import os

from .. import require

require("numpy", "yaml")
import numpy as np  # noqa: E402
import yaml  # noqa: E402

from . import causal, pruning, steps  # noqa: E402
from ..core.cli import UserError  # noqa: E402
from ..core import tokens  # noqa: E402
from .ondisk import harness_lock_holder, leftover  # noqa: E402
from .verify import damage, damages, refuse_damaged  # noqa: E402,F401  (the readers' guard)

try:
    import h5py
except ImportError:  # reported by open_file, when a results file is first opened
    h5py = None

# The results-file format this reader understands (docs/results-format.md): a file of another
# major version is refused; a newer minor one only adds datasets.
FORMAT_MAJOR = 1


PATTERNS = ["prev", "self", "first", "induction", "duplicate"]
CLASSES = PATTERNS + ["mixed"]


def text(x):
    if isinstance(x, bytes):
        return x.decode("utf-8", "replace")
    if isinstance(x, np.ndarray) and x.shape == ():
        return text(x[()])
    return str(x)


def open_file(path):
    """A results file opened for reading (h5py.File), if this reader understands its format:
    UserError (one line) when it is not HDF5, or of another major format_version. A file without
    format_version predates 1.0 and is read."""
    require("h5py")
    if not os.path.exists(path):
        raise UserError(not_there(path))
    refuse_damaged(path)
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise UserError(f"{path}: cannot open as an HDF5 results file ({e})") from None
    version = text(f.attrs.get("format_version", ""))
    if version and version.split(".")[0] != str(FORMAT_MAJOR):
        f.close()
        raise UserError(f"{path}: the file is results format {version}, but this reader reads "
                        f"format {FORMAT_MAJOR}.x only; use the scripts of a matching harness")
    return f


def not_there(path):
    """One line for a results path with no file: the run writing it (its harness's lock: pid,
    host, since, step) and the checkpoint beside it, which every reader accepts; or what a run
    left there; or just that there is none."""
    writer = harness_lock_holder(path)
    try:
        left = leftover(path)
    except UserError:  # no harness beside the files: what a run left there goes unsaid
        left = None
    ckpt = (f"; its last checkpoint, {left.describe()}, can be read instead (scripts/plot and "
            f"scripts/report accept it)" if left is not None and left.where != path else "")
    if writer:
        return f"{path}: a run in progress, not a results file yet: being written by {writer}{ckpt}"
    if left is not None:
        return (f"{path}: no results file, but the run left {left.describe()}: harness --resume "
                "with its config finishes it")
    return f"{path}: no such results file"


def read_status(path):
    """The status attribute of a results file: 'complete', ..., 'damaged' (damage() names the
    problem), '' if unreadable or missing."""
    if not os.path.exists(path):
        return ""
    if not os.path.isfile(path) or damage(path):
        return "damaged"
    try:
        with h5py.File(path, "r") as f:
            return text(f.attrs.get("status", ""))
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
    return [[text(x) for x in row] for row in np.atleast_2d(data)]


def read_marked(f):
    """The class at the task's marked rows (/scores/marked_*) as a [L][H] list of str, as the
    console's head table prints it: "prev 0.76", or "mixed (2 back 0.50)" where no pattern passes
    0.5 there; [] for a run without marked rows (text, tokens)."""
    if "scores/marked_class" not in f:
        return []
    cls = np.atleast_2d(f["scores/marked_class"][()])
    top = np.atleast_2d(f["scores/marked_top"][()])
    score = np.atleast_2d(f["scores/marked_score"][()])
    return [[f"{text(t)} {s:.2f}" if text(c) != "mixed" else f"mixed ({text(t)} {s:.2f})"
             for c, t, s in zip(cr, tr, sr)] for cr, tr, sr in zip(cls, top, score)]


def read_strings(f, path):
    """A string dataset or attribute (e.g. /probe/labels) as a list of str, or None."""
    if path in f:
        return [text(x) for x in np.atleast_1d(f[path][()])]
    parent, _, name = path.rpartition("/")
    parent = parent or "/"
    if parent in f and name in f[parent].attrs:
        return [text(x) for x in np.atleast_1d(f[parent].attrs[name])]
    return None


class RunResult:
    """The summary-level contents of one results file (no attention maps)."""

    def __init__(self, path):
        self.path = path
        try:
            self._load(path)
        except (OSError, KeyError, ValueError, TypeError, IndexError) as e:
            raise UserError(f"{path}: cannot be read ({' '.join(str(e).split())[:200]})") from None
        try:
            self.resolved = yaml.safe_load(self.config_yaml) or {}
        except yaml.YAMLError:
            self.resolved = {}

    def _load(self, path):
        with open_file(path) as f:
            self.status = text(f.attrs.get("status", ""))
            self.config_yaml = text(f.attrs.get("config_yaml", ""))
            self.config = {k: (text(v) if isinstance(v, (bytes, np.bytes_)) else v)
                           for k, v in f["config"].attrs.items()} if "config" in f else {}
            get = lambda p: np.asarray(f[p][()]) if p in f else np.zeros(0)
            self.train_step, self.train_loss = get("train/step"), get("train/loss")
            self.train_elapsed = get("train/elapsed_s")
            self.eval_step, self.eval_loss = get("eval/step"), get("eval/loss")
            self.eval_tokens = get("eval/tokens")
            self.icl_score = get("eval/icl_score")  # [M]; empty before format 1.7
            self.formation = steps.formation(*steps.scores_over_steps(f))
            self.heldout = read_heldout(f)
            self.classes = read_classes(f)
            self.prune = pruning.read_curves(f)
            self.causal = causal.summary_values(f)
            self.n_params = sum(int(np.prod(obj.shape)) for obj in datasets(f["params"])) \
                if "params" in f else 0

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
    def final_icl_score(self):
        return float(self.icl_score[-1]) if len(self.icl_score) else float("nan")

    @property
    def final_train_loss(self):
        return float(self.train_loss[-1]) if len(self.train_loss) else float("nan")


HELDOUT_FIELDS = ("loss", "tokens", "windows", "split_windows", "source", "first_token")


def read_heldout(f):
    """/heldout (format 1.5: the end-of-training figure of each split) as {split: {"loss",
    "tokens", "windows", "split_windows", "source", "first_token"}}; {} for a file without it
    (an older format, or a run that did not complete)."""
    if "heldout" not in f or "split" not in f["heldout"]:
        return {}
    g = f["heldout"]
    out = {}
    for i, name in enumerate(text(x) for x in g["split"][()]):
        row = {}
        for field in HELDOUT_FIELDS:
            if field in g:
                v = g[field][i]
                row[field] = text(v) if isinstance(v, (bytes, np.bytes_, str)) else \
                    (float(v) if field == "loss" else int(v))
        out[name] = row
    return out


def heldout_summary(result):
    """One short phrase of a run's end-of-training figures for progress lines: "validation 2.3887,
    test 2.4012 (1,728 tokens each)"; the last periodic figure for a file without /heldout."""
    h = result.heldout
    if not h:
        return f"eval loss {result.final_eval_loss:.4f} (periodic; no /heldout)"
    tokens = sorted({v.get("tokens") for v in h.values()})
    count = f"{tokens[0]:,} tokens each" if len(tokens) == 1 and len(h) > 1 else \
        ", ".join(f"{v.get('tokens', 0):,}" for v in h.values()) + " tokens"
    return ", ".join(f"{name} {v['loss']:.4f}" for name, v in h.items()) + f" ({count})"


class Named:
    """A numpy array with named dimensions (and, where the file has them, coordinates): enough
    of xarray's DataArray for one results file without the dependency. np.asarray(named) and
    named.data give the array."""

    def __init__(self, data, dims, coords=None):
        self.data, self.dims, self.coords = np.asarray(data), tuple(dims), dict(coords or {})
        if self.data.ndim != len(self.dims):
            raise ValueError(f"{self.data.ndim}-D data with {len(self.dims)} dimension names")

    shape = property(lambda self: self.data.shape)

    def __array__(self, dtype=None, copy=None):
        return self.data if dtype is None else self.data.astype(dtype)

    def __repr__(self):
        return "Named(" + ", ".join(f"{d}: {n}" for d, n in zip(self.dims, self.shape)) + ")"

    def isel(self, **index):
        """Select by position along named dimensions (ints, negative from the end, or slices):
        Named while more than two dimensions are left, then the plain numpy array (a map
        [query, key], a row, a value)."""
        unknown = set(index) - set(self.dims)
        if unknown:
            raise KeyError(f"no dimension {sorted(unknown)}; the dimensions are {self.dims}")
        key = tuple(index.get(d, slice(None)) for d in self.dims)
        kept = [d for d in self.dims if not isinstance(index.get(d, slice(None)), (int, np.integer))]
        coords = {d: np.asarray(c)[index.get(d, slice(None))] for d, c in self.coords.items() if d in kept}
        out = self.data[key]
        return Named(out, kept, coords) if len(kept) > 2 else out


def token_labels(f, probe):
    """Axis labels of one probe's tokens, from an open results file (heads.core.tokens: subword pieces
    when the run stored a tokenizer, characters for the byte-level text task, readable names for
    the synthetic tasks' ids)."""
    ids = [int(t) for t in f["probe/tokens"][probe]] if "probe/tokens" in f else []
    pieces = [text(x) for x in f["tokenizer/pieces"][()]] if "tokenizer/pieces" in f else None
    cfg = f["config"].attrs if "config" in f else {}
    return tokens.token_labels(text(cfg.get("task", "")), int(cfg.get("vocab_size", 0)), ids,
                               pieces)


class Run(RunResult):
    """One results file for analysis: what RunResult holds, plus the arrays, read on demand."""

    def _read(self, name):
        with open_file(self.path) as f:
            if name not in f:
                raise UserError(f"{self.path}: no /{name} (status {self.status}; docs/results-format.md's "
                                "table says which runs write it)")
            return np.asarray(f[name][()])

    def maps(self):
        """/attn/maps as Named (step, layer, head, probe, query, key); coordinate step = /attn/step."""
        return Named(self._read("attn/maps"), ("step", "layer", "head", "probe", "query", "key"),
                     {"step": self._read("attn/step")})

    def scores(self):
        """{pattern: Named (step, layer, head)} of /scores."""
        step = self._read("attn/step")
        return {p: Named(self._read(f"scores/{p}"), ("step", "layer", "head"), {"step": step})
                for p in PATTERNS}

    def at(self, step):
        """What the file holds of the weight snapshot of `step` (heads.read.steps.AtStep):
        .params {name: array} as params(), and at["heads/ablation_delta"] (any dataset of
        /study_steps/<step>, named as the final one) once `harness analyze --step` stored it."""
        with open_file(self.path) as f:
            try:
                return steps.AtStep(f, step, self.path)
            except KeyError as e:
                raise UserError(str(e.args[0])) from None

    def probe_tokens(self):
        return self._read("probe/tokens")

    def token_labels(self, probe=0):
        with open_file(self.path) as f:
            return token_labels(f, probe)

    def params(self):
        """{name under /params: float32 array}, e.g. "tok_emb", "layer0/w_qkv"."""
        out = {}
        with open_file(self.path) as f:
            if "params" not in f:
                raise UserError(f"{self.path}: no /params; not a harness results file")
            f["params"].visititems(lambda name, obj: out.__setitem__(name, np.asarray(obj[()]))
                                   if isinstance(obj, h5py.Dataset) else None)
        return out


def datasets(group):
    out = []
    group.visititems(lambda name, obj: out.append(obj) if isinstance(obj, h5py.Dataset) else None)
    return out


def group_runs(summary, keys):
    """{tuple of values of keys: [row indices]} over complete runs, in first-seen order."""
    groups = {}
    for i in range(summary.n):
        if summary["status"][i] != "complete":
            continue
        groups.setdefault(tuple(plain(summary[k][i]) for k in keys), []).append(i)
    return groups


def plain(v):
    if isinstance(v, np.generic):
        return v.item()
    return v
