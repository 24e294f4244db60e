"""heads.sweep.status_cli: `scripts/sweep --status`: the state of every run of a results directory
(heads.sweep.runstate.STATES), with what each is waiting for, or of one run given its results file.

Knows the runs' states (heads.sweep.states for their files, heads.sweep.runstate for locks, logs and Slurm);
prints, and returns the exit status.
"""
import os
import re

from ..core.cli import die, indent
from .runstate import SHOWN_ORDER, STATES, run_state
from .slurm import slurm_queue, slurm_submissions
from .states import file_states, load_experiment


def show_status(results_dir):
    """--status: the state of every run of a results directory (STATES), with what each is
    waiting for; given a run's results file, that run's state."""
    outdir = os.path.normpath(results_dir)
    if os.path.isfile(outdir):
        return show_run_status(outdir)
    if outdir.endswith(".h5") and not os.path.exists(outdir):
        from ..read.results import not_there
        die(not_there(results_dir) + " (sweep --status takes results/<experiment>/ or a run's file)")
    if not os.path.isdir(outdir):
        die(f"{results_dir}: no such results directory (scripts/sweep writes "
               "results/<experiment>/)")
    exp = load_experiment(outdir)
    names = [r.name for r in exp.runs] if exp is not None else None
    subs = slurm_submissions(outdir)
    if names is None:  # no copy of the experiment: whatever runs left files here
        found = set(subs)
        for f in os.listdir(outdir):
            f = re.sub(r"\.h5\.tmp\.\w{6}$", ".h5", f)
            for ext in (".h5", ".log", ".h5.tmp"):
                if f.endswith(ext) and f != "summary.h5":
                    found.add(f[:-len(ext)])
        names = sorted(found)
    queue = slurm_queue() if subs else None
    found = file_states(outdir, names, exp)  # one reader child, one harness, for them all
    states = [run_state(outdir, n, subs.get(n), queue, found[n]) for n in names]
    count = {k: sum(s.state == k for s in states) for k in STATES}
    shown = [k for k in STATES if k in ("complete", "running", "failed", "missing") or count[k]]
    print(f"{os.path.basename(outdir)}: {len(states)} runs in {outdir}/: "
          + ", ".join(f"{count[k]} {k}" for k in sorted(shown, key=SHOWN_ORDER.index)))
    width = max([len(s.name) for s in states] + [8])
    for kind in STATES[1:]:
        for st in states:
            if st.state == kind:
                print(f"{kind:<11} {st.name:<{width}}" + (f"  {st.detail}" if st.detail else ""))
                if st.error:
                    print(indent(st.error))
    if subs and queue is None:
        print("(squeue not available: queued Slurm tasks show as missing)")
    summary = os.path.join(outdir, "summary.csv")
    if count["complete"]:
        newest = max(os.path.getmtime(os.path.join(outdir, s.name + ".h5"))
                     for s in states if s.state == "complete")
        if not os.path.exists(summary):
            print("no summary.csv yet: scripts/sweep EXPERIMENT.yaml --summary-only writes it")
        elif os.path.getmtime(summary) < newest:
            print("summary.csv is older than some results: scripts/sweep EXPERIMENT.yaml "
                  "--summary-only rewrites it")
    return 0 if count["complete"] == len(states) and states else 1


def show_run_status(path):
    """--status RUN.h5: one run's state, against its results directory's experiment when the
    file is one of its runs; a file no sweep made is named with the commands for one run."""
    outdir, base = os.path.split(os.path.abspath(path))
    name = base[:-3] if base.endswith(".h5") else base
    exp = load_experiment(outdir, quiet=True)
    if exp is None or name not in [r.name for r in exp.runs]:
        found = file_states(outdir, [name])[name]
        print(f"{path}: {found.state}" + (f": {found.detail}" if found.detail else "")
              + "; no sweep's experiment.yaml beside it names this run, so its config is not "
              "compared (harness state CONFIG.yaml [--set ...] RUN.h5 compares it with a config; "
              "harness check RUN.h5 checks it)")
        return 0 if found.state == "complete" else 1
    st = run_state(outdir, name, found=file_states(outdir, [name], exp)[name])
    print(f"{path}: run {name} of {exp.name}: {st.state}" + (f"  {st.detail}" if st.detail else ""))
    if st.error:
        print(indent(st.error))
    return 0 if st.state == "complete" else 1
