"""heads.sweep.states: the state of a sweep's run files, decided in one place for every command
(scripts/sweep's plan, --run, --list and its final lines, --status, the summary and every reader
of it: compare, plot-sweep, the report): file_states(). A file is

  missing      not there
  damaged      it does not read whole (heads.read.verify: a checksum, the text checksum, a crash)
  complete     status complete, made with the config the experiment asks for
  stale        finished (complete or diverged) with another config: what differs, old -> new
  diverged     status diverged, with the config asked for (rerunning gives the same)
  interrupted, running, trained   its status (what the harness left; heads.sweep.runstate says more)

"The config asked for" is decided by the harness (`harness state --batch`, src/results/runstate.c, the
rule --resume uses too): both the run's recorded config and the experiment's values are resolved
there -- defaults, 0-means-auto keys, derived widths -- so a value written out that equals what
the harness would choose is never a difference; output.path and train.threads are not compared.

Knows the results reader, the experiment's runs and the harness's command line; nothing of
locks, logs or Slurm (heads.sweep.runstate adds those).
"""
import os

from ..core import harness, safefile
from ..read import verify
from ..core.cli import UserError
from ..read.results import text

FINISHED = ("complete", "diverged")  # a rerun with the same config computes the same


class FileState:
    """name, path; state (the module's list); status (the file's status attribute, '' when
    none); detail (one line: what is damaged, what differs); verdict (heads.read.verify.Verdict: its
    size, mtime and CRC-32, None when no file)."""

    def __init__(self, name, path, state, status="", detail="", verdict=None):
        self.name, self.path, self.state, self.status = name, path, state, status
        self.detail, self.verdict = detail, verdict

    def __repr__(self):
        return f"FileState({self.name!r}, {self.state!r})"


SET_FILE = "experiment.set"  # beside experiment.yaml: the last sweep's --set values, one a line


def load_experiment(outdir, quiet=False):
    """The experiment of a results directory as the last sweep ran it (experiment.yaml, the
    copy it wrote, with its --set values from experiment.set), or None when there is none; one
    that cannot be read is a warning (unless quiet) and None."""
    from .experiments import Experiment  # experiments -> harness: not at import time
    path = os.path.join(outdir, "experiment.yaml")
    if not os.path.exists(path):
        return None
    try:
        sets = []
        if os.path.exists(os.path.join(outdir, SET_FILE)):
            with safefile.open_read(os.path.join(outdir, SET_FILE), encoding="utf-8") as f:
                sets = [line.rstrip("\n") for line in f if line.strip()]
        return Experiment(path, sets)
    except (UserError, OSError) as e:
        if not quiet:
            import sys
            print(f"warning: {e}; the runs' configs are not compared with it", file=sys.stderr)
        return None


def _head(path):
    """(status, config_yaml) of a file that reads whole."""
    import h5py
    try:
        safefile.check_regular(path)
        with h5py.File(path, "r") as f:
            return text(f.attrs.get("status", "")), text(f.attrs.get("config_yaml", ""))
    except (OSError, KeyError, ValueError, UserError):
        return "", ""


def file_states(outdir, names, exp=None):
    """{name: FileState} of the runs names of a results directory, against what the experiment
    exp (an Experiment, or None: nothing to compare with) asks for: one reader child for every
    file (heads.read.verify), one harness process for every comparison."""
    paths = {n: os.path.join(outdir, n + ".h5") for n in names}
    verdicts = verify.verdicts(list(paths.values()))
    runs = {r.name: r for r in exp.runs} if exp is not None else {}
    out, asks = {}, []
    for name, path in paths.items():
        v = verdicts.get(path)
        if v is None:
            out[name] = FileState(name, path, "missing" if not os.path.exists(path) else "damaged",
                                  detail="" if not os.path.exists(path) else
                                  f"{path}: not a regular file")
            continue
        if v.problem:
            out[name] = FileState(name, path, "damaged", detail=f"{path}: {v.problem}", verdict=v)
            continue
        status, recorded = _head(path)
        out[name] = FileState(name, path, status or "damaged", status,
                              "" if status else f"{path}: no status attribute", v)
        if status in FINISHED and name in runs:
            asks.append((name, exp.base_path, recorded, runs[name].overrides))
    for name, (kind, said) in harness.compare_configs(asks).items():
        st = out[name]
        if kind == "differs":
            st.state, st.detail = "stale", said
        elif kind != "same":
            st.state = "stale"
            st.detail = f"the harness cannot compare its config with the experiment's ({said})"
    return out


def stale_note(states):
    """'left out: N stale runs, made with values the experiment no longer asks for: NAME (what
    differs); ...; scripts/sweep on the experiment reruns them', or '' when none is stale."""
    stale = [s for s in states if s.state == "stale"]
    if not stale:
        return ""
    named = "; ".join(f"{s.name} ({s.detail})" for s in stale[:6])
    more = f"; and {len(stale) - 6} more" if len(stale) > 6 else ""
    return (f"left out: {len(stale)} stale run{'s' if len(stale) != 1 else ''}, made with values "
            f"the experiment no longer asks for: {named}{more}; scripts/sweep on the experiment "
            "reruns them")
