"""heads.summary: a sweep's summary, written: one row per run (swept values, parameters, FLOPs per
token, final losses, heads needed within the experiment's tolerance (relative, with a floor; both
in the attributes), head-class counts) as summary.csv and summary.h5 (read back by
heads.results.Summary).

Knows the results reader and the experiment's runs; knows nothing of how runs are launched.
"""
import csv
import math
import os
import sys
import tempfile

import numpy as np

from . import pruning
from .configs import format_value
from .results import CLASSES

try:
    import h5py
except ImportError:  # pragma: no cover
    h5py = None


SUMMARY_FIXED = ["run", "status", "seed", "n_head", "d_head", "d_model", "n_layer", "E",
                 "params", "flops_per_token", "final_step", "final_train_loss", "final_eval_loss",
                 "min_eval_loss", "train_seconds"]


def summary_row(run, result, shapes, tolerance=pruning.DEFAULT_TOLERANCE,
                floor=pruning.DEFAULT_FLOOR):
    """One summary row (dict) for a run; result is a RunResult or None; shapes (params, flops);
    tolerance and floor: the heads-needed columns' tolerance, max(tolerance x the unpruned loss,
    floor nats) (heads.pruning)."""
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
    row.update(pruning.summary_values(result.prune if ok else {}, tolerance, floor))
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

    def csv_file(tmp):
        with open(tmp, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(cols)
            for row in rows:
                w.writerow(["" if row.get(c) is None or (isinstance(row.get(c), float)
                                                         and math.isnan(row[c]))
                            else format_value(row[c]) for c in cols])
    write_durably(os.path.join(outdir, "summary.csv"), csv_file)
    write_durably(os.path.join(outdir, "summary.h5"),
                  lambda tmp: _summary_h5(tmp, rows, cols, swept, experiment))


def write_durably(path, write):
    """Write `path` through write(temporary path) the way the harness writes its results: a
    temporary beside it with a unique name (mkstemp), fsync'ed, renamed into place, and the
    directory fsync'ed, so a crash or power loss leaves the old file or the new one."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".tmp.", dir=directory)
    os.close(fd)
    try:
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)  # mkstemp makes it 0600
        write(tmp)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    except OSError as e:  # some file systems refuse: the file is in place (as the harness)
        print(f"warning: {directory}: the directory could not be synced ({e.strerror}); "
              f"{os.path.basename(path)} is in place but may not survive a power loss",
              file=sys.stderr)
    finally:
        os.close(fd)


def _summary_h5(tmp, rows, cols, swept, experiment):
    with h5py.File(tmp, "w") as f:
        f.attrs["experiment"] = experiment.name
        f.attrs["experiment_yaml"] = experiment.text
        f.attrs["experiment_path"] = experiment.path
        f.attrs["base"] = experiment.base
        f.attrs["width"] = experiment.width
        f.attrs["description"] = experiment.description
        f.attrs["tolerance"] = getattr(experiment, "tolerance", pruning.DEFAULT_TOLERANCE)
        f.attrs["tolerance_floor"] = getattr(experiment, "tolerance_floor", pruning.DEFAULT_FLOOR)
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
