"""heads.sweep.sweep_cli: the command `scripts/sweep` (its usage text is that script's docstring): the
command line checked, then --status, --run, --list, the sweep lock, every run checked with
`harness --shapes`, the plan (what is complete, what is rerun because the experiment changed),
the local pool or a Slurm submission, and the summary.

Owns the order of those steps, the sweep lock and the messages and exit statuses of the command;
the steps themselves are the package's (experiments, pool, slurm, runstate, summary). Knows
nothing of the harness's internals beyond its command line.
"""
import fcntl
import os
import re
import sys
import time

from ..core import cli, configs, harness
from ..core import safefile
from . import experiments, pool, runstate, slurm, states, status_cli, summary


def parse_args(doc):
    """The command line, checked: options that only go with others, values in range."""
    ap = cli.arg_parser(doc)
    ap.add_argument("experiment", nargs="?")
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    ap.add_argument("-j", "--jobs", type=int)
    ap.add_argument("--threads", type=int)
    ap.add_argument("--results", default=os.path.join(harness.REPO, "results"))
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--redo-damaged", action="store_true")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--summary-only", action="store_true")
    ap.add_argument("--run", metavar="NAME")
    ap.add_argument("--status", metavar="RESULTS_DIR")
    ap.add_argument("--slurm", action="store_true")
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--cpus-per-task", type=int)
    for opt in slurm.SLURM_OPTIONS:
        ap.add_argument(f"--{opt}")
    ap.add_argument("--sbatch-arg", action="append", default=[])
    args = ap.parse_args()
    if args.status is not None and args.experiment:
        cli.die("sweep: --status takes a results directory (results/<experiment>), "
                "not an experiment file too")
    if args.status is None and not args.experiment:
        cli.die("usage: scripts/sweep EXPERIMENT.yaml [options] | --status RESULTS_DIR "
                "(--help for more)")
    if args.jobs is not None and args.jobs < 1:
        cli.die(f"sweep: -j must be >= 1, got {args.jobs}")
    if args.threads is not None and args.threads < 1:
        cli.die(f"sweep: --threads must be >= 1, got {args.threads}")
    given = [f"--{o.replace('_', '-')}" for o in slurm.SLURM_OPTIONS + ["cpus_per_task", "dry_run"]
             if getattr(args, o) not in (None, False)] + (["--sbatch-arg"] if args.sbatch_arg
                                                          else [])
    if given and not args.slurm:
        cli.die(f"sweep: {', '.join(given)}: only with --slurm")
    args.cpus = check_slurm_args(args) if args.slurm else None
    return args


def check_slurm_args(args):
    """--slurm's options checked; returns the CPUs per array task."""
    clash = [o for o, v in (("--list", args.list), ("--summary-only", args.summary_only),
                            ("--run", args.run)) if v]
    if clash:
        cli.die(f"sweep: --slurm and {clash[0]} do not go together")
    if args.cpus_per_task is not None and args.cpus_per_task < 1:
        cli.die(f"sweep: --cpus-per-task must be >= 1, got {args.cpus_per_task}")
    if args.threads and args.cpus_per_task and args.threads != args.cpus_per_task:
        cli.die("sweep: with --slurm, a run's threads are its --cpus-per-task; give one of "
                "--threads and --cpus-per-task")
    for a in args.sbatch_arg:
        if not a.startswith("-") or "\n" in a:
            cli.die(f"sweep: --sbatch-arg={a!r}: expected an sbatch option such as "
                    "--sbatch-arg=--gres=gpu:1")
    for opt in slurm.SLURM_OPTIONS:
        v = getattr(args, opt)
        if v is not None and (not v or re.search(r"\s", v)):
            cli.die(f"sweep: --{opt} {v!r}: expected one word")
    return args.cpus_per_task or args.threads or 1


def list_runs(exp, sweep, outdir):
    """--list: every run with its state (heads.sweep.states) and overrides."""
    found = states.file_states(outdir, [run.name for run in exp.runs], exp)
    for run in exp.runs:
        st = found[run.name]
        print(f"{run.name:<28} {st.state if st.state != 'missing' else '-':<11} " + " ".join(
            f"{k}={configs.format_value(v)}" for k, v in run.overrides.items()))
        if st.state in ("damaged", "stale"):
            print(f"  {st.detail}")
    print(f"{len(exp.runs)} runs -> {outdir}/")
    return 0


_HELD = []  # the sweep lock's open file: the lock lasts as long as this process


def lock_sweep(outdir, wait_seconds):
    """The experiment's sweep lock (results/<experiment>/.sweep.lock), held until exit; a
    Slurm submission or a summary may wait a little for another one, a local sweep does not."""
    try:
        os.makedirs(outdir, exist_ok=True)
    except OSError as e:
        cli.die(f"{outdir}: cannot create the results directory: {e.strerror}")
    try:
        lock = safefile.open_write(os.path.join(outdir, ".sweep.lock"), "a+")
    except cli.UserError as e:
        cli.die(str(e))
    end = time.time() + wait_seconds
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.time() >= end:
                lock.seek(0)
                holder = lock.read().strip() or "?"
                cli.die(f"{outdir}: another sweep is running on this experiment ("
                        + (f"pid {holder}" if holder.isdigit() else f"on {holder}")
                        + "); wait for it or stop it")
            time.sleep(0.5)
    lock.seek(0)
    lock.truncate()
    lock.write(runstate.launch_info())
    lock.flush()
    _HELD.append(lock)


def check_runs(exp, sweep):
    """Every run checked with `harness --shapes` before anything trains: {run: (params,
    FLOPs per token)}, or exit 2 with one line per distinct error, pointing at the experiment
    file's line that sets the key the harness rejects."""
    shapes, errors = {}, {}
    for run in exp.runs:
        ok, params, flops, _, message = harness.run_shapes(exp.base_path, sweep.overrides(run))
        if not ok:
            errors.setdefault(message, []).append(run.name)
        shapes[run.name] = (params, flops)
    for message, names in errors.items():
        m = re.search(r"\b((?:model|train|data|output)\.\w+)", message) \
            if message.startswith("--set") else None
        where = exp.where_key(m.group(1)) if m else ""
        which = f"run {names[0]}" if len(names) == 1 else \
            f"{len(names)} runs ({names[0]}, ...)" if len(names) < len(exp.runs) else \
            f"all {len(names)} runs"
        print(f"{where}{which}: {message}", file=sys.stderr)
    if errors:
        sys.exit(2)
    return shapes


def plan(exp, sweep, outdir, force, redo_damaged=False):
    """(runs to run, names of those rerun (stale: the experiment asks for other values; or a
    damaged file that redo_damaged retrains), runs skipped), from the runs' states
    (heads.sweep.states, the rule every command uses). A damaged results file is kept as it is and
    named, unless redo_damaged (or force)."""
    if force:
        return list(exp.runs), set(), 0
    todo, rerun, skipped = [], set(), 0
    found = states.file_states(outdir, [run.name for run in exp.runs], exp)
    for run in exp.runs:
        st = found[run.name]
        if st.state == "damaged":
            if redo_damaged:
                print(f"redo   {run.name}: {st.detail}")
                todo.append(run)
                rerun.add(run.name)
            else:
                print(f"damaged {run.name}: {st.detail}; kept as it is (--redo-damaged retrains it)",
                      file=sys.stderr)
                skipped += 1
        elif st.state == "stale":
            print(f"rerun  {run.name}: its {st.status} result was made with other values "
                  f"({st.detail})")
            todo.append(run)
            rerun.add(run.name)
        elif st.state in states.FINISHED:
            skipped += 1
        else:
            todo.append(run)
    return todo, rerun, skipped


def run_here(exp, sweep, outdir, todo, rerun, skipped):
    """Run the runs to do in the local pool and report; returns the exit status."""
    grid = exp.shape_text()
    print(f"sweep {exp.name}: {len(exp.runs)} runs ({grid}; width {exp.width}), "
          f"{skipped} complete already, {len(todo)} to run; -j {sweep.jobs} x "
          f"{sweep.threads} thread(s) (nproc {sweep.nproc}) -> {outdir}/", flush=True)
    wall = sweep.run_all(todo, rerun) if todo else 0.0
    interrupted = sweep.signals > 0
    not_run = len(todo) - len(sweep.ok) - len(sweep.failed) - len(sweep.interrupted) \
        - len(sweep.busy)
    print(f"{'interrupted' if interrupted else 'finished'} after {pool.fmt_time(wall)}: "
          f"{len(sweep.ok)} ran, {len(sweep.failed)} failed, {skipped} skipped (complete)"
          + (f", {len(sweep.busy)} running elsewhere" if sweep.busy else "")
          + (f", {len(sweep.interrupted)} stopped" if sweep.interrupted else "")
          + (f", {not_run} not started" if not_run else ""))
    for run, message in sweep.failed:
        print(f"  failed {run.name}: {message}")
    for run, where in sweep.busy:
        print(f"  running elsewhere {run.name}: on {where}")
    return 130 if interrupted else 1 if sweep.failed or sweep.busy else 0


def write_summary(exp, sweep, outdir, shapes):
    """summary.csv and summary.h5 from every run's results file, each row with its run's state
    (heads.sweep.states: a damaged or stale run's row says so and holds no values) and the file's size,
    mtime and CRC-32 (what every reader checks before it answers from the row); (whether every
    run is complete, whether one is damaged). SummaryWriteError when the pair cannot be written."""
    found = states.file_states(outdir, [run.name for run in exp.runs], exp)
    stopped = {run.name for run in sweep.interrupted}
    failed = {run.name for run, _ in sweep.failed}
    rows = summary.rows_of(exp, outdir, found, shapes, stopped, failed)
    summary.write_summary(outdir, rows, exp, found)
    n_complete = sum(r["status"] == "complete" for r in rows)
    print(f"summary: {outdir}/summary.csv, summary.h5 ({n_complete}/{len(rows)} runs complete)")
    return n_complete == len(rows), any(r["status"] == "damaged" for r in rows)


def command(doc, script):
    """The sweep command: what the options ask, in order; returns the exit status."""
    cli.survive_closed_stdout()  # `sweep EXP | head -1`: the runs go on, quietly
    args = parse_args(doc)
    if args.status is not None:
        return status_cli.show_status(args.status)
    try:
        exp = experiments.Experiment(args.experiment, args.set)
    except cli.UserError as e:
        cli.die(str(e))
    outdir = os.path.join(args.results, exp.name)
    if args.run:
        return pool.run_one(exp, outdir, args.run, args.force, args.threads, args.redo_damaged)
    if args.slurm and re.search(r"\s", os.path.abspath(outdir) + harness.REPO):
        cli.die(f"sweep: {os.path.abspath(outdir)}: Slurm's #SBATCH lines cannot hold paths "
                "with spaces; use --results DIR without spaces")
    sweep = pool.RunPool(exp, outdir, args.jobs or 1, args.force, args.cpus or args.threads)
    if args.list:
        return list_runs(exp, sweep, outdir)
    lock_sweep(outdir, 60 if args.slurm or args.summary_only else 0)
    shapes = check_runs(exp, sweep)
    try:  # atomically: a full disk leaves the previous copy, not a truncated one
        copies = {"experiment.yaml": exp.text.encode("utf-8")}
        if args.set:  # what --status and the readers compare the runs with: these too
            copies[states.SET_FILE] = "".join(a + "\n" for a in args.set).encode("utf-8")
        summary.write_pair(outdir, copies)
        if not args.set and os.path.exists(os.path.join(outdir, states.SET_FILE)):
            os.unlink(os.path.join(outdir, states.SET_FILE))
    except (summary.SummaryWriteError, OSError) as e:
        cli.die(f"sweep: {e}", 1)
    todo, rerun, skipped = plan(exp, sweep, outdir, args.force, args.redo_damaged)
    if args.slurm:
        grid = exp.shape_text()
        print(f"sweep {exp.name}: {len(exp.runs)} runs ({grid}; width {exp.width}), "
              f"{skipped} complete already, {len(todo)} to submit to Slurm -> {outdir}/",
              flush=True)
        if todo:
            return slurm.submit_slurm(args, exp, outdir, todo, args.cpus, script)
        print("nothing to submit: every run is complete")
    status = 0 if args.slurm or args.summary_only else \
        run_here(exp, sweep, outdir, todo, rerun, skipped)
    try:
        all_complete, damaged = write_summary(exp, sweep, outdir, shapes)
    except summary.SummaryWriteError as e:  # the disk: the previous pair is kept
        print(f"summary: {e}", file=sys.stderr)
        return max(status, 1)
    except cli.UserError as e:  # the runs' states cannot be decided (the harness cannot run)
        print(f"summary: not written: {e}", file=sys.stderr)
        return max(status, 1)
    if (args.summary_only and not all_complete) or damaged:
        status = max(status, 1)
    return status


def main(doc, script):
    """scripts/sweep: doc is its usage text (--help), script its path (Slurm's tasks run it)."""
    try:
        return command(doc, script)
    except cli.UserError as e:  # the runs' states cannot be decided: the harness cannot say
        cli.die(str(e))
    except (KeyboardInterrupt, cli.Stopped):  # before any run started (while checking the runs)
        print("\ninterrupted before any run started", file=sys.stderr)
        return 130
