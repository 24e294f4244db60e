"""heads.results: reading results files (one run's HDF5 file; layout in docs/results-format.md)
and a sweep's summary.h5: the one reader that the scripts, the tests and users share.

For users (docs/python.md):
    run = Run("results/heads12.h5")       # status, config, losses, classes
    maps = run.maps()                     # Named: dims (step, layer, head, probe, query, key)
    maps.isel(step=-1, layer=1, head=3, probe=0)   # a [query, key] numpy array
    run.token_labels(0)                   # axis labels of probe 0 (bytes, subword pieces or ids)
    run.params()                          # {"tok_emb": array, "layer0/w_qkv": array, ...}
    Summary("results/heads").rows()       # a sweep's summary, one dict per run

Every file is read whole in a child process before this process opens it (damage()): HDF5 can
crash or hang on a damaged file, and a reader must name the file and the problem instead.

Knows nothing of how runs are launched; never writes a results file (only its cache of which
files read whole, under $XDG_CACHE_HOME).
"""
import os
import select
import signal
import subprocess
import sys

from .. import require

require("numpy", "yaml")
import numpy as np  # noqa: E402
import yaml  # noqa: E402

from . import causal, pruning  # noqa: E402
from ..core.cli import UserError  # noqa: E402
from ..core.configs import values_equal  # noqa: E402
from ..core import tokens  # noqa: E402

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


# ---- the guard: a damaged file is named, never read by this process
#
# HDF5 trusts a file's metadata: one damaged byte (in a file of the older format, or a place no
# checksum covers) can crash the library inside h5py, which no try/except catches. So every file
# is first read whole -- every attribute, every dataset (each chunk's Fletcher-32 checksum
# verified) -- by one child process for all the files a command asks about; a file the child
# dies on, or takes too long over, is damaged, and the child is started again for the rest.
# Results are kept per (path, size, mtime, inode): for the life of this process, and in a cache
# file ($XDG_CACHE_HOME/heads/verified, else ~/.cache/heads/verified) so that a file is read
# whole once, not by every command (a rewritten file is a new inode or mtime: read again).

_WALKER = r"""
import os, sys
import h5py, numpy
def why(e):
    t = str(e)
    if "Fletcher32" in t or "checksum" in t:
        return "its checksum fails: the stored bytes are damaged"
    return "the file is damaged there (" + " ".join(t.split())[:160] + ")"
def walk(path):
    try:
        f = h5py.File(path, "r")
    except Exception as e:
        return "not an HDF5 results file (not HDF5 at all, or truncated)"
    bad = []
    def attrs(name, obj):
        for key in list(obj.attrs):
            try:
                obj.attrs[key]
            except Exception as e:
                bad.append(name + ": attribute " + key + " cannot be read: " + why(e))
                return
    def visit(name, obj):
        if bad:
            return True
        attrs("/" + name, obj)
        if isinstance(obj, h5py.Dataset) and not bad:
            try:
                step = max(1, (64 << 20) // max(1, obj.dtype.itemsize * int(numpy.prod(obj.shape[1:]))))
                if obj.shape == () or obj.size == 0:
                    obj[()]
                else:
                    for at in range(0, obj.shape[0], step):
                        obj[at:at + step]
            except Exception as e:
                bad.append("/" + name + " cannot be read: " + why(e))
        return True if bad else None
    try:
        with f:
            attrs("/", f)
            if not bad:
                f.visititems(visit)
    except Exception as e:
        bad.append("its groups cannot be listed: " + why(e))
    return "damaged: " + bad[0] if bad else ""
out = sys.stdout
for line in sys.stdin.buffer:
    path = os.fsdecode(line.rstrip(b"\n"))
    out.write("B\n")
    out.flush()
    out.write("R " + walk(path).encode("ascii", "backslashreplace").decode() + "\n")
    out.flush()
"""

_DAMAGE = {}  # (path, size, mtime_ns, inode) -> "" or the problem
# Verdicts that may be the machine's, not the file's: a read that did not finish in time (a loaded
# machine, a slow disk) or a child killed by SIGKILL (the kernel's out-of-memory killer, a user).
# They hold for this process only; the cache file keeps only what the file's bytes decide.
_UNCERTAIN = set()
_CACHE_LOADED = []
_CACHE_LIMIT = 4 << 20  # bytes of the cache file before it starts again


def _cache_path():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "heads", "verified")


def _load_cache():
    """The verdicts earlier commands stored (lines 'size mtime_ns inode problem|path')."""
    if _CACHE_LOADED:
        return
    _CACHE_LOADED.append(True)
    try:
        with open(_cache_path(), encoding="utf-8", errors="surrogateescape") as f:
            for line in f:
                head, sep, path = line.rstrip("\n").partition("\t")
                size, mtime, ino, problem = (head.split(" ", 3) + ["", "", "", ""])[:4]
                if sep and size.isdigit() and mtime.isdigit() and ino.isdigit():
                    _DAMAGE[(path, int(size), int(mtime), int(ino))] = problem
    except (OSError, ValueError):
        pass


def _store(verdicts):
    """Append verdicts {key: problem} to the cache file (one short line each, O_APPEND: lines of
    concurrent commands do not mix); a cache that cannot be written is no cache."""
    path = _cache_path()
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if os.path.exists(path) and os.path.getsize(path) > _CACHE_LIMIT:
            os.unlink(path)
        text = "".join(f"{k[1]} {k[2]} {k[3]} {' '.join(p.split())}\t{k[0]}\n"
                       for k, p in verdicts.items() if "\n" not in k[0] and "\t" not in k[0])
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, text.encode("utf-8", "surrogateescape"))
        finally:
            os.close(fd)
    except OSError:
        pass


def _key(path):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (os.path.abspath(path), st.st_size, st.st_mtime_ns, st.st_ino)


def _seconds(path):
    """Seconds the child may spend on a file: a minute, plus one per 20 MB (as harness check)."""
    try:
        return 60 + os.path.getsize(path) / (20 << 20)
    except OSError:
        return 60


def damages(paths):
    """{path: problem} for the files of paths that are there: '' when the file reads whole,
    else one line without the path ('damaged: /train/loss cannot be read: its checksum fails:
    ...', 'damaged: the HDF5 library crashed reading it (SIGSEGV)', 'not an HDF5 results file
    ...'). One child process reads all the files not seen before."""
    _load_cache()
    todo = []
    for p in dict.fromkeys(paths):
        k = _key(p)
        if k is not None and k not in _DAMAGE and os.path.isfile(p):
            todo.append((p, k))
    keys = [k for _, k in todo]
    while todo:
        todo = _walk(todo)
    if keys:
        _store({k: _DAMAGE[k] for k in keys if k in _DAMAGE and k not in _UNCERTAIN})
    return {p: _DAMAGE[_key(p)] for p in paths if _key(p) in _DAMAGE}


def _walk(todo):
    """Read the files of todo in one child; returns the files it did not reach (it died)."""
    child = subprocess.Popen([sys.executable, "-c", _WALKER], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             env=dict(os.environ, PYTHONWARNINGS="ignore"),
                             preexec_fn=_limit_memory)
    try:
        child.stdin.write(b"".join(os.fsencode(p) + b"\n" for p, _ in todo))
        child.stdin.close()
    except BrokenPipeError:
        pass
    for i, (path, key) in enumerate(todo):
        line = _read_line(child.stdout, 60)
        if line == "B":
            line = _read_line(child.stdout, _seconds(path))
        if line is not None and line.startswith("R "):
            _DAMAGE[key] = line[2:]
            continue
        if line is None:  # still busy with this file: stuck in it
            child.kill()
            _DAMAGE[key] = (f"damaged: reading it did not finish in {_seconds(path):.0f} s "
                            "(the HDF5 library is stuck in its metadata)")
            _UNCERTAIN.add(key)
        else:
            rc = child.wait()
            how = f"signal {_signal_name(-rc)}" if rc < 0 else f"exit status {rc}"
            _DAMAGE[key] = f"damaged: the HDF5 library crashed reading it ({how})"
            if rc == -signal.SIGKILL:
                _UNCERTAIN.add(key)
        child.wait()
        return todo[i + 1:]
    child.wait()
    return []


def _limit_memory():
    """In the child: at most _CHILD_MEMORY of address space, so that sizes read from a damaged
    file end in a MemoryError (the file is damaged), not in a machine out of memory."""
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (_CHILD_MEMORY, _CHILD_MEMORY))


_CHILD_MEMORY = 8 << 30  # the child reads in slabs of 64 MiB: a few of them, and h5py itself


def _read_line(stream, seconds):
    """One line of the child's output (without the newline): '' at its end, None when none came
    within seconds."""
    ready, _, _ = select.select([stream], [], [], seconds)
    if not ready:
        return None
    return stream.readline().decode("ascii", "replace").rstrip("\n")


def _signal_name(n):
    try:
        return signal.Signals(n).name
    except ValueError:
        return str(n)


def damage(path):
    """The problem of one file ('' when it reads whole, or when it is not there)."""
    return damages([path]).get(path, "")


def refuse_damaged(path):
    """UserError naming the file and its problem, unless it reads whole."""
    problem = damage(path)
    if problem:
        raise UserError(f"{path}: {problem}")


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
    from ..sweep.runstate import harness_lock_holder, leftover  # runstate reads results: not at import
    writer, left = harness_lock_holder(path), leftover(path)
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
    if damage(path):
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
    def final_train_loss(self):
        return float(self.train_loss[-1]) if len(self.train_loss) else float("nan")


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


def stale_runs(results_dir, names):
    """{run: 'key: old -> new, ...'} of the complete runs among names, in a sweep's results
    directory, whose files were made with values its experiment.yaml (the copy the last sweep
    wrote) no longer asks for (config_mismatch); {} without a readable experiment.yaml."""
    from ..sweep.experiments import Experiment  # experiments -> harness -> ...: not at import time
    from ..core.configs import format_value
    exp_file = os.path.join(results_dir, "experiment.yaml")
    try:
        exp = Experiment(exp_file) if os.path.exists(exp_file) else None
    except UserError:
        exp = None
    if exp is None:
        return {}
    runs = {r.name: r for r in exp.runs}
    stale = {}
    for name in names:
        path = os.path.join(results_dir, name + ".h5")
        if name not in runs or read_status(path) != "complete":
            continue
        try:
            changed = config_mismatch(RunResult(path), runs[name].overrides, exp.base_config)
        except Exception:  # noqa: BLE001 - unreadable: not stale (its status says what it is)
            continue
        if changed:
            stale[name] = ", ".join(f"{k}: {format_value(a)} -> {format_value(b)}"
                                    for k, a, b in changed[:4])
    return stale


class Summary:
    """A sweep's summary.h5 as columns: s['final_eval_loss'] -> numpy array, one per run."""

    def __init__(self, results_dir):
        self.dir = results_dir.rstrip("/")
        path = os.path.join(self.dir, "summary.h5")
        if not os.path.exists(path):
            raise UserError(f"{path}: not found; run scripts/sweep on the experiment first "
                            "(it writes summary.h5 and summary.csv)")
        refuse_damaged(path)
        try:
            self._load(path)
        except (OSError, KeyError, ValueError, TypeError) as e:
            raise UserError(f"{path}: cannot be read ({' '.join(str(e).split())[:200]})") from None

    def _load(self, path):
        with h5py.File(path, "r") as f:
            self.name = text(f.attrs.get("experiment", os.path.basename(self.dir)))
            self.width = text(f.attrs.get("width", "free"))
            self.description = text(f.attrs.get("description", ""))
            self.tolerance = float(f.attrs.get("tolerance", pruning.DEFAULT_TOLERANCE))
            self.tolerance_floor = float(f.attrs.get("tolerance_floor", 0.0))  # older: none
            self.swept = [text(x) for x in f.attrs.get("swept", [])]
            # the config keys an experiment's points set (its 'layout' column names them)
            self.layout_keys = [text(x) for x in f.attrs.get("layout_keys", [])]
            self.columns = [text(x) for x in f.attrs.get("columns", list(f.keys()))]
            self.data = {}
            for c in self.columns:
                v = f[c][()]
                if v.dtype.kind in "OS":
                    v = np.array([text(x) for x in v], dtype=object)
                self.data[c] = v
        self.n = len(self.data.get("run", []))
        # runs made with values the experiment no longer asks for are no longer its results:
        # every reader of the summary (compare, plot-sweep, the report) leaves them out
        self.stale = stale_runs(self.dir, [text(r) for r in self.data.get("run", [])])
        if self.stale and "status" in self.data:
            status = np.array(self.data["status"], dtype=object)
            for i, run in enumerate(self.data["run"]):
                if run in self.stale and status[i] == "complete":
                    status[i] = "stale"
            self.data["status"] = status

    def left_out_note(self):
        """One line naming the stale runs left out ('' when there are none)."""
        if not self.stale:
            return ""
        named = "; ".join(f"{run} ({why})" for run, why in list(self.stale.items())[:6])
        more = f"; and {len(self.stale) - 6} more" if len(self.stale) > 6 else ""
        return (f"left out: {len(self.stale)} stale run{'s' if len(self.stale) != 1 else ''}, "
                f"made with values the experiment no longer asks for: {named}{more}; "
                "scripts/sweep on the experiment reruns them")

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
        groups.setdefault(tuple(plain(summary[k][i]) for k in keys), []).append(i)
    return groups


def plain(v):
    if isinstance(v, np.generic):
        return v.item()
    return v
