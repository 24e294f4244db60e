"""heads.sweep.summary: a sweep's summary, written: one row per run (swept values, parameters, FLOPs per
token, final losses, the held-out loss and its tokens per split (validation, test: /heldout),
heads needed within the experiment's tolerance (relative, with a floor; both in the
attributes), the heads that carry 80% of the patching effect (heads.read.causal), head-class
counts; the tune: keys an attribute) as summary.csv and summary.h5, with the size, mtime and
CRC-32 of every run's file it was made from and a CRC-32 of its own bytes (read back, and checked, by heads.sweep.sweepread.Summary).

Knows the results reader and the experiment's runs; knows nothing of how runs are launched.
"""
import csv
import errno
import io
import math
import os
import sys
import tempfile
import zlib

import numpy as np

from ..read import causal, pruning
from ..core.cli import UserError
from ..core.configs import format_value
from ..read.results import CLASSES, RunResult

try:
    import h5py
except ImportError:  # pragma: no cover
    h5py = None


FILES = "run_files"  # summary.h5's group of what it records of each run's file: size, mtime_ns, crc
SUMMARY_FIXED = ["run", "status", "seed", "n_head", "d_head", "d_model", "n_layer", "E",
                 "params", "flops_per_token", "final_step", "final_train_loss", "final_eval_loss",
                 "min_eval_loss", "val_loss", "val_tokens", "test_loss", "test_tokens",
                 "train_seconds", "icl_score", "formed_prev_after", "formed_prev",
                 "formed_induction_after", "formed_induction"]
# the held-out columns: (column prefix, split name in /heldout/split)
HELDOUT = (("val", "validation"), ("test", "test"))


def summary_row(run, result, shapes, tolerance=pruning.DEFAULT_TOLERANCE,
                floor=pruning.DEFAULT_FLOOR):
    """One summary row (dict) for a run; result is a RunResult or None; shapes (params, flops);
    tolerance and floor: the heads-needed columns' tolerance, max(tolerance x the unpruned loss,
    floor nats) (heads.read.pruning)."""
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
    heldout = (getattr(result, "heldout", None) or {}) if ok else {}  # {}: a file before /heldout
    for prefix, split in HELDOUT:  # NaN where the run has no such split
        there = split in heldout
        row[f"{prefix}_loss"] = float(heldout[split]["loss"]) if there else float("nan")
        row[f"{prefix}_tokens"] = int(heldout[split]["tokens"]) if there else float("nan")
    row["train_seconds"] = float(result.train_elapsed[-1]) if ok and len(result.train_elapsed) \
        else float("nan")
    row["icl_score"] = result.final_icl_score if ok else float("nan")
    for p in ("prev", "induction"):  # heads.read.steps.formation: formed after `after`, by `step`
        m = result.formation.get(p) if ok else None
        row[f"formed_{p}_after"] = float(m["after"]) if m else float("nan")
        row[f"formed_{p}"] = float(m["step"]) if m else float("nan")
    row.update(pruning.summary_values(result.prune if ok else {}, tolerance, floor))
    row[causal.CARRY_COLUMN] = result.causal[causal.CARRY_COLUMN] if ok else None
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


class SummaryWriteError(Exception):
    """summary.csv / summary.h5 (or another file of write_pair) could not be written (the disk,
    not the input): one line."""


def row_of(exp, outdir, run, st, shapes, stopped=(), failed=()):
    """The summary row of one run from its file's state st (heads.sweep.states.FileState): the file's
    values when it reads whole (a stale run's row says stale: no reader uses it), none for a
    damaged or missing one; a run without a file says interrupted or failed when this session
    or its log says so (stopped, failed: names of this session's runs)."""
    from .runstate import RunLog  # runstate -> states -> results: not at import time
    result = None
    if st.state not in ("missing", "damaged"):
        try:
            result = RunResult(st.path)
        except Exception as e:  # noqa: BLE001 - named, and the row holds no values
            print(f"warning: {e if isinstance(e, UserError) else f'{st.path}: cannot read ({e})'}"
                  "; left out of the summary values", file=sys.stderr)
            st.state, st.detail = "damaged", str(e)
    row = summary_row(run, result, shapes, exp.tolerance, exp.tolerance_floor)
    row["status"] = st.state
    log = RunLog(os.path.join(outdir, run.name + ".log"))
    if st.state == "missing" and (run.name in stopped or log.rc not in (None, 0) and log.interrupted):
        row["status"] = "interrupted"  # killed by the signal passed on to it, unsaved
    elif st.state == "missing" and (run.name in failed or log.rc not in (None, 0)):
        row["status"] = "failed"  # this session's failure, or the log of an earlier one
    return row


def rows_of(exp, outdir, found, shapes, stopped=(), failed=()):
    """The summary rows of every run of exp (row_of), found: {name: FileState}."""
    return [row_of(exp, outdir, run, found[run.name], shapes[run.name], stopped, failed)
            for run in exp.runs]


def write_summary(outdir, rows, experiment, found=None):
    """summary.csv and summary.h5 (one dataset per column, one element per run), as one pair:
    both are made in memory and written to temporaries first, then renamed into place, so that
    a full disk or an I/O error leaves the previous pair (SummaryWriteError says which). found
    ({run: heads.sweep.states.FileState}): what summary.h5 records of each run's file (size, mtime,
    CRC-32), for its readers to check (heads.sweep.sweepread); None: it records none."""
    swept = experiment.swept_keys()
    cols = summary_columns(rows, swept)
    text = io.StringIO(newline="")
    w = csv.writer(text)
    w.writerow(cols)
    for row in rows:
        w.writerow(["" if row.get(c) is None or (isinstance(row.get(c), float)
                                                 and math.isnan(row[c]))
                    else format_value(row[c]) for c in cols])
    h5 = io.BytesIO()  # HDF5 never writes to the disk itself: it crashes on some failed writes
    _summary_h5(h5, rows, cols, swept, experiment, found)
    write_pair(outdir, {"summary.csv": text.getvalue().encode("utf-8"),
                        "summary.h5": seal(h5.getvalue())})


USERBLOCK = 512  # summary.h5 starts with a block HDF5 skips: the CRC-32 of everything after it
SEAL = b"heads summary.h5 crc32 "


def seal(data):
    """summary.h5's bytes with the CRC-32 of all its HDF5 bytes written into its user block: one
    sum over every attribute, dataset and string (HDF5 checksums none of a file's strings)."""
    head = SEAL + b"%08x\n" % zlib.crc32(data[USERBLOCK:])
    return head + data[len(head):]


def seal_problem(data):
    """Why summary.h5's bytes are not what seal() wrote ('' when they are)."""
    if not data.startswith(SEAL):
        return "it carries no checksum (written by an older scripts/sweep, or damaged)"
    stored = data[len(SEAL):len(SEAL) + 8]
    if stored != b"%08x" % zlib.crc32(data[USERBLOCK:]):
        return "damaged: its checksum fails: the stored bytes are not what scripts/sweep wrote"
    return ""


def _failure(e):
    """A disk's refusal in words: 'disk full (No space left on device)', 'I/O error (...)'."""
    if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return f"disk full ({e.strerror})"
    return f"I/O error ({e.strerror or e})"


def write_pair(outdir, contents):
    """Write {name: bytes} into outdir as one set: every temporary written and fsync'ed first
    (a failure removes them: the old files stay), then each renamed into place; should a rename
    fail, the files already renamed get their old contents back (kept as hard links until the
    set is in place). A crash between the renames (no disk space is needed there) is the only
    way to mix old and new files."""
    temps, backups = {}, {}
    try:
        for name, data in contents.items():
            temps[name] = _write_temp(os.path.join(outdir, name), data)
        for name in contents:
            path = os.path.join(outdir, name)
            if os.path.exists(path):
                backup = path + ".old.tmp." + os.path.basename(temps[name]).rsplit(".", 1)[-1]
                try:
                    os.link(path, backup)
                    backups[name] = backup
                except OSError:  # no hard links here: no way back for this one
                    pass
        done = []
        try:
            for name in contents:
                os.replace(temps[name], os.path.join(outdir, name))
                done.append(name)
        except OSError:
            for name in done:
                if name in backups:
                    os.replace(backups.pop(name), os.path.join(outdir, name))
            raise
    except OSError as e:
        raise SummaryWriteError(f"{outdir}: cannot write {' and '.join(contents)}: "
                                f"{_failure(e)}; the previous ones are kept") from None
    finally:
        for tmp in list(temps.values()) + list(backups.values()):
            try:
                os.unlink(tmp)
            except OSError:
                pass
    _sync_directory(outdir, " and ".join(contents))


def _write_temp(path, data):
    """A temporary beside path (mkstemp: a unique name, the permissions an ordinary create
    gives) holding data, fsync'ed; its path."""
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".tmp.",
                               dir=os.path.dirname(os.path.abspath(path)))
    try:
        mask = os.umask(0)
        os.umask(mask)
        os.fchmod(fd, 0o666 & ~mask)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.close(fd)
    return tmp


def _sync_directory(directory, what):
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    except OSError as e:  # some file systems refuse: the files are in place (as the harness)
        print(f"warning: {directory}: the directory could not be synced ({e.strerror}); "
              f"{what} are in place but may not survive a power loss", file=sys.stderr)
    finally:
        os.close(fd)


def column_array(values, h5=True):
    """One summary column as the array summary.h5 stores (h5) or its reader holds: int64 when
    every value is an integer, float64 (NaN for none) when every value is a number, else text."""
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                       for v in present) and len(present) == len(values):
        return np.array(values, dtype=np.int64)
    if present and all(isinstance(v, (int, float, np.number)) and not isinstance(v, bool)
                       for v in present):
        return np.array([np.nan if v is None else float(v) for v in values])
    texts = ["" if v is None else format_value(v) for v in values]
    return np.array(texts, dtype=h5py.string_dtype() if h5 else object)


def _summary_h5(target, rows, cols, swept, experiment, found):
    with h5py.File(target, "w", userblock_size=USERBLOCK) as f:
        f.attrs["experiment"] = experiment.name
        f.attrs["experiment_yaml"] = experiment.text
        f.attrs["experiment_path"] = experiment.path
        f.attrs["base"] = experiment.base
        f.attrs["width"] = experiment.width
        f.attrs["description"] = experiment.description
        f.attrs["tolerance"] = getattr(experiment, "tolerance", pruning.DEFAULT_TOLERANCE)
        f.attrs["tolerance_floor"] = getattr(experiment, "tolerance_floor", pruning.DEFAULT_FLOOR)
        f.attrs["swept"] = np.array(swept, dtype=h5py.string_dtype())
        if getattr(experiment, "tuned", None):  # the swept keys whose value the answers choose
            f.attrs["tuned"] = np.array(experiment.tuned, dtype=h5py.string_dtype())
        if getattr(experiment, "points", None):  # what the 'layout' column's labels name
            f.attrs["layout_keys"] = np.array(experiment.layout_keys, dtype=h5py.string_dtype())
        f.attrs["columns"] = np.array(cols, dtype=h5py.string_dtype())
        for c in cols:
            f.create_dataset(c, data=column_array([row.get(c) for row in rows]))
        if found is not None:  # each run's file as the rows were made from it (-1: none)
            verdicts = [found[row["run"]].verdict if row["run"] in found else None for row in rows]
            for name in ("size", "mtime_ns", "crc"):
                f.create_dataset(f"{FILES}/{name}", data=np.array(
                    [-1 if v is None or getattr(v, name) is None else getattr(v, name)
                     for v in verdicts], dtype=np.int64))
