"""heads.sweep.sweepread: a sweep's summary.h5 read back for its readers (compare, plot-sweep, the
report, l0curve), answering only from verified runs. summary.h5 is a cache of what the run files
said when scripts/sweep wrote it, so before a row is used:

  - summary.h5's own bytes are checked (its CRC-32, heads.sweep.summary.seal); a damaged one is rebuilt
    from the run files (with the experiment.yaml the sweep left beside them);
  - each run's file is checked against what the summary recorded of it (size, mtime, CRC-32 of
    its bytes): a file that changed since has its row rebuilt from the file;
  - each run's state is decided now (heads.sweep.states, the rule every command uses): only complete
    runs are used; stale, damaged and vanished ones are named and counted in left_out_note().

Knows the summary's layout (heads.sweep.summary) and the runs' states (heads.sweep.states); never writes.
"""
import math
import os
import sys

import numpy as np

from ..core import harness, safefile
from ..read import pruning, verify
from . import states, summary
from ..core.cli import UserError
from ..read.results import text
from ..core.words import plural

try:
    import h5py
except ImportError:  # pragma: no cover  (results.open_file says how to install it)
    h5py = None

ONE_RUN = ("scripts/plot RUN.h5 draws one run, scripts/report RUN.h5 is its page, harness check "
           "RUN.h5 checks it")


def results_dir_of(target, command):
    """target as a sweep's results directory for command ('compare', ...), or UserError: a run's
    results file is named as one, with the commands for one run."""
    if os.path.isfile(target) and target.endswith(".h5"):
        raise UserError(f"{target}: a run's results file, not a sweep's results directory: "
                        f"{command} reads results/<experiment>/; for one run, {ONE_RUN}")
    return target.rstrip("/")


class Summary:
    """A sweep's summary.h5 as columns: s['final_eval_loss'] -> numpy array, one per run; s.n
    rows; status per row the run's state now (only 'complete' rows are answers)."""

    def __init__(self, results_dir, command="this command"):
        self.dir = results_dir_of(results_dir, command)
        self.notes, self.warnings = [], []
        path = os.path.join(self.dir, "summary.h5")
        if not os.path.exists(path):
            raise UserError(f"{path}: not found; run scripts/sweep on the experiment first "
                            "(it writes summary.h5 and summary.csv)")
        exp = self._exp = states.load_experiment(self.dir)
        try:
            with safefile.open_read(path, "rb") as f:  # a FIFO refused, never waited on
                problem = summary.seal_problem(f.read())
        except OSError as e:
            raise UserError(f"{path}: cannot be read ({e.strerror})") from None
        recorded = None
        if problem.startswith("damaged"):
            self._rebuild_all(path, problem, exp)
        else:
            if problem:  # an older summary: read it through the guard, check every run
                verify.refuse_damaged(path)
            try:
                recorded = self._load(path)
            except (OSError, KeyError, ValueError, TypeError) as e:
                raise UserError(f"{path}: cannot be read ({' '.join(str(e).split())[:200]})") from None
        self._check_runs(exp, recorded)

    def _load(self, path):
        """The attributes and columns; returns what it records of each run's file, or None."""
        with h5py.File(path, "r") as f:
            self.name = text(f.attrs.get("experiment", os.path.basename(self.dir)))
            self.width = text(f.attrs.get("width", "free"))
            self.description = text(f.attrs.get("description", ""))
            self.tolerance = float(f.attrs.get("tolerance", pruning.DEFAULT_TOLERANCE))
            self.tolerance_floor = float(f.attrs.get("tolerance_floor", 0.0))  # older: none
            self.swept = [text(x) for x in f.attrs.get("swept", [])]
            self.columns = [text(x) for x in f.attrs.get("columns", list(f.keys()))]
            # the config keys an experiment's points set (its 'layout' column names them)
            self.layout_keys = [text(x) for x in f.attrs.get("layout_keys", [])]
            self.tuned = [text(x) for x in f.attrs.get("tuned", [])]  # tune: keys (none before)
            self.data = {}
            for c in self.columns:
                v = f[c][()]
                if v.dtype.kind in "OS":
                    v = np.array([text(x) for x in v], dtype=object)
                self.data[c] = v
            if summary.FILES not in f:
                return None
            return {k: [int(x) for x in f[f"{summary.FILES}/{k}"][()]] for k in ("size", "mtime_ns", "crc")}

    def _rebuild_all(self, path, problem, exp):
        if exp is None:
            raise UserError(f"{path}: {problem}, and there is no experiment.yaml beside it to rebuild "
                            "it from the runs: scripts/sweep EXPERIMENT --summary-only rewrites it")
        self.notes.append(f"summary.h5 is {problem}: answered from the run files (scripts/sweep "
                          f"{exp.path} --summary-only rewrites it)")
        self.name, self.width, self.description = exp.name, exp.width, exp.description
        self.tolerance, self.tolerance_floor = exp.tolerance, exp.tolerance_floor
        self.swept = exp.swept_keys()
        self.layout_keys = list(getattr(exp, "layout_keys", []) if getattr(exp, "points", None) else [])
        self.tuned = list(getattr(exp, "tuned", []))
        self.columns, self.data = [], {}
        self._set_rows([{"run": r.name, "status": "missing"} for r in exp.runs])

    def _set_rows(self, rows):
        self.columns = summary.summary_columns(rows, self.swept)
        self.data = {c: summary.column_array([row.get(c) for row in rows], h5=False)
                     for c in self.columns}

    def _check_runs(self, exp, recorded):
        """Each row's run: its file checked against the record, its row rebuilt when it changed
        (or was never recorded), its status its state now."""
        names = [text(r) for r in self.data.get("run", [])]
        self.n = len(names)
        found = states.file_states(self.dir, names, exp)
        runs = {r.name: r for r in exp.runs} if exp is not None else {}
        rows, rebuilt, gone, unverified = self._rows(), [], [], 0
        for i, name in enumerate(names):
            st = found[name]
            v = st.verdict
            now = (v.size, v.mtime_ns, -1 if v.crc is None else v.crc) if v else (-1, -1, -1)
            was = tuple(recorded[k][i] for k in ("size", "mtime_ns", "crc")) if recorded else None
            if st.state == "missing":
                if was is not None and was[0] >= 0:
                    gone.append(name)
                    rows[i] = self._row(name, rows[i], st, runs)
                elif was is None and rows[i].get("status") == "complete":  # nothing to check
                    unverified += 1
                continue
            if was != now:
                rebuilt.append(name)
                rows[i] = self._row(name, rows[i], st, runs)
            rows[i]["status"] = st.state
        if rebuilt or gone:
            self._set_rows(rows)
        elif "status" in self.data:  # the states now: stale, damaged, ...
            self.data["status"] = np.array([r["status"] for r in rows], dtype=object)
        self.states = [found[n] for n in names]
        if rebuilt and recorded is not None:
            self.notes.append(f"summary.h5 is older than {plural(len(rebuilt), 'run file')} ("
                              + ", ".join(rebuilt[:6]) + (", ..." if len(rebuilt) > 6 else "")
                              + "): their rows were made again from the files; scripts/sweep "
                              "EXPERIMENT --summary-only rewrites it")
        if rebuilt and recorded is None and exp is not None:
            self.notes.append(f"summary.h5 records no run files (an older scripts/sweep wrote it): "
                              f"{plural(len(rebuilt), 'row')} made again from the files")
        if gone:
            self.notes.append(f"left out: {plural(len(gone), 'run')} whose file is gone since the "
                              "summary was written: " + ", ".join(gone[:6]))
        if unverified:
            self.warnings.append(f"warning: {self.dir}/summary.h5 records no run files to check "
                                 f"it against (an older scripts/sweep wrote it) and {unverified} "
                                 f"of its complete runs {'has' if unverified == 1 else 'have'} no "
                                 "file here: answered from it as written")
        for w in self.warnings:
            print(w, file=sys.stderr)

    def _row(self, name, old, st, runs):
        """The row of a run made again from its file (heads.sweep.summary.row_of), with the shapes the
        harness gives its config; without the experiment, the old row's swept values and shapes."""
        run = runs.get(name)
        if run is not None:
            ok, params, flops, _, _ = harness.run_shapes(self._exp.base_path, run.overrides) \
                if st.state != "missing" else (False, None, None, None, "")
            shapes = (params, flops) if ok else (old.get("params"), old.get("flops_per_token"))
            return summary.row_of(self._exp, self.dir, run, st, shapes)
        fake = _OldRun(name, {k: old.get(k) for k in self.swept}, old.get("seed"))
        return summary.row_of(_OldExperiment(self), self.dir, fake, st,
                              (old.get("params"), old.get("flops_per_token")))

    def left_out_note(self):
        """One line naming what the answers leave out (stale, damaged, vanished runs) and what
        was rebuilt ('' when nothing)."""
        parts = [states.stale_note(self.states)]
        damaged = [s for s in self.states if s.state == "damaged"]
        if damaged:
            parts.append(f"left out: {plural(len(damaged), 'damaged run')}: " + "; ".join(
                s.detail for s in damaged[:6]) + "; scripts/sweep --redo-damaged retrains them")
        return "; ".join(p for p in parts + self.notes if p)

    def __getitem__(self, key):
        return self.data[key]

    def rows(self):
        return [{c: self.data[c][i] for c in self.columns} for i in range(self.n)]

    def _rows(self):
        """rows() as plain Python values, None for a missing number (what the writer takes)."""
        return [{c: _plain(self.data[c][i]) for c in self.columns}
                for i in range(len(self.data.get("run", [])))]

    def other_keys(self):
        """Swept keys besides the head count, d_head and the seed (they split the comparison)."""
        return [k for k in self.swept if k not in ("model.n_head", "model.d_head", "train.seed")]

    def run_path(self, i):
        return os.path.join(self.dir, self.data["run"][i] + ".h5")


def _plain(v):
    if isinstance(v, np.generic):
        v = v.item()
    return None if isinstance(v, float) and math.isnan(v) else v


class _OldRun:
    """A run known only from its old summary row (no experiment.yaml to expand it from)."""

    def __init__(self, name, swept, seed):
        self.name, self.swept, self.overrides, self.seed = name, swept, {}, seed


class _OldExperiment:
    def __init__(self, s):
        self.tolerance, self.tolerance_floor = s.tolerance, s.tolerance_floor
