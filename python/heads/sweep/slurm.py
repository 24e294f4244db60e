"""heads.sweep.slurm: a sweep handed to Slurm: the job-array and summary batch scripts, sbatch, the
submissions recorded under results/<experiment>/slurm/, and this user's squeue.

Knows nothing of how a run's state is judged (heads.sweep.runstate) or of the local pool.
"""
import glob
import os
import shutil
import subprocess
import sys
import time

from ..core.cli import now_text, shell_quote
from ..core import safefile
from ..core.configs import format_value
from ..core.harness import HARNESS, REPO


SLURM_DIR = "slurm"
SLURM_ACTIVE = ("RUNNING", "COMPLETING", "CONFIGURING", "STAGE_OUT", "SIGNALING", "SUSPENDED",
                "STOPPED", "RESIZING")


def slurm_task_id():
    """'12_3' inside a Slurm array task, '12' inside another Slurm job, else ''."""
    job, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    if job and task:
        return f"{job}_{task}"
    return os.environ.get("SLURM_JOB_ID", "")


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
            with safefile.open_read(os.path.join(path, "jobs")) as f:
                for line in f:
                    parts = line.split()
                    if len(parts) == 2 and parts[0] == "array":
                        job = parts[1]
        except OSError:
            pass
        try:
            with safefile.open_read(os.path.join(path, "runs.tsv")) as f:
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


SLURM_OPTIONS = ["partition", "time", "mem", "account", "qos", "constraint"]


def shown_path(path):
    """A path as the user would type it: relative when under the current directory."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def sbatch_lines(args, cpus):
    lines = []
    for opt in SLURM_OPTIONS:
        value = getattr(args, opt)
        if value is not None:
            lines.append(f"#SBATCH --{opt}={value}")
    lines += [f"#SBATCH {a}" for a in args.sbatch_arg]
    return lines


def new_submission_dir(outdir):
    """A fresh results/<experiment>/slurm/<time>/ (absolute path)."""
    base = os.path.join(outdir, SLURM_DIR)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    subdir, n = os.path.join(base, stamp), 2
    while os.path.exists(subdir):
        subdir, n = os.path.join(base, f"{stamp}-{n}"), n + 1
    os.makedirs(subdir)
    return os.path.abspath(subdir)


def write_array_script(path, args, exp, outdir, todo, cpus, sweep_cmd):
    """The job array: one task per run in todo, each `sweep --run NAME`."""
    q = shell_quote
    throttle = f"%{args.jobs}" if args.jobs else ""
    subdir = os.path.dirname(path)
    with safefile.open_write(path, "w") as f:
        f.write("\n".join([
            "#!/bin/bash",
            f"# The sweep '{exp.name}' as a Slurm job array: one array task per run "
            f"({len(todo)} runs), written by",
            f"# scripts/sweep --slurm on {now_text()}. Each task runs one run with "
            "`scripts/sweep --run NAME`",
            "# into " + os.path.abspath(outdir) + "/<run>.h5 and <run>.log, and exits at once "
            "if its complete result",
            "# exists: `sbatch` this file again to rerun only what is missing. The run's "
            "train.threads",
            "# is --cpus-per-task ($SLURM_CPUS_PER_TASK).",
            f"#SBATCH --job-name=sweep-{exp.name}",
            f"#SBATCH --array=0-{len(todo) - 1}{throttle}",
            "#SBATCH --nodes=1",
            "#SBATCH --ntasks=1",
            f"#SBATCH --cpus-per-task={cpus}",
            f"#SBATCH --output={subdir}/task-%A_%a.out",
            f"#SBATCH --chdir={REPO}",
        ] + sbatch_lines(args, cpus) + [
            "set -eu",
            "runs=(",
        ] + [f"    {run.name}  # {i}: " + " ".join(
            f"{k}={format_value(v)}" for k, v in run.overrides.items())
            for i, run in enumerate(todo)] + [
            ")",
            f"export HARNESS={q(os.path.abspath(HARNESS))}",
            "exec " + " ".join(q(c) for c in sweep_cmd) + ' --run "${runs[$SLURM_ARRAY_TASK_ID]}"'
            + (" --force" if args.force else "")
            + (" --redo-damaged" if getattr(args, "redo_damaged", False) else ""),
        ]) + "\n")
    os.chmod(path, 0o755)


def write_summary_script(path, args, exp, cpus, sweep_cmd):
    """The summary job, run after the array (afterany): `sweep --summary-only`."""
    q = shell_quote
    with safefile.open_write(path, "w") as f:
        f.write("\n".join([
            "#!/bin/bash",
            f"# Writes summary.csv and summary.h5 of the sweep '{exp.name}' once its job array "
            "has ended",
            "# (submitted with --dependency=afterany:<array job id>). Exit 0 also when some "
            "runs failed:",
            "# `scripts/sweep --status` reports those.",
            f"#SBATCH --job-name=sweep-{exp.name}-summary",
            "#SBATCH --nodes=1",
            "#SBATCH --ntasks=1",
            "#SBATCH --cpus-per-task=1",
            "#SBATCH --time=10:00",
            f"#SBATCH --output={os.path.dirname(path)}/summary-%j.out",
            f"#SBATCH --chdir={REPO}",
        ] + [l for l in sbatch_lines(args, cpus)
             if l.split("=")[0] in ("#SBATCH --partition", "#SBATCH --account", "#SBATCH --qos")]
            + [
            f"export HARNESS={q(os.path.abspath(HARNESS))}",
            " ".join(q(c) for c in sweep_cmd) + " --summary-only || [ $? -eq 1 ]",
        ]) + "\n")
    os.chmod(path, 0o755)


def submit_slurm(args, exp, outdir, todo, cpus, sweep_script):
    """--slurm: write the job array (one task per run in todo) and the summary job into
    results/<experiment>/slurm/<time>/, and submit both unless --dry-run."""
    subdir = new_submission_dir(outdir)
    # What the tasks run: a frozen copy of the experiment file (same name, so the same runs and
    # results directory), the sweep and the harness of this checkout, this python.
    frozen = os.path.join(subdir, exp.name + ".yaml")
    with safefile.open_write(frozen, "w") as f:
        f.write(exp.text)
    sweep_cmd = [sys.executable or "/usr/bin/python3", os.path.abspath(sweep_script), frozen,
                 "--results", os.path.abspath(args.results)]
    for assignment in getattr(args, "set", []):  # sweep --set: the tasks get the same overrides
        sweep_cmd += ["--set", assignment]
    with safefile.open_write(os.path.join(subdir, "runs.tsv"), "w") as f:
        f.write("# index\trun\n")
        for i, run in enumerate(todo):
            f.write(f"{i}\t{run.name}\n")
    array = os.path.join(subdir, "array.sbatch")
    summary = os.path.join(subdir, "summary.sbatch")
    write_array_script(array, args, exp, outdir, todo, cpus, sweep_cmd)
    write_summary_script(summary, args, exp, cpus, sweep_cmd)
    rel = shown_path(subdir)
    print(f"wrote {rel}/array.sbatch ({len(todo)} array tasks"
          + (f", at most {args.jobs} at a time" if args.jobs else "")
          + f", {cpus} cpu(s) each) and {rel}/summary.sbatch", flush=True)
    if args.dry_run:
        print("dry run: nothing submitted. To submit:\n"
              f"  sbatch {rel}/array.sbatch\n"
              f"  sbatch --dependency=afterany:<its job id> {rel}/summary.sbatch")
        return 0
    return sbatch_array_and_summary(args, outdir, subdir, array, summary, len(todo))


def sbatch_array_and_summary(args, outdir, subdir, array, summary, n_tasks):
    """Submit the array, then the summary job after it; record both ids in <subdir>/jobs."""
    rel = shown_path(subdir)
    if not shutil.which("sbatch"):
        print("sweep: sbatch not found: run this on a Slurm login node (or use --dry-run and "
              f"submit {rel}/array.sbatch there)", file=sys.stderr)
        return 1
    p = subprocess.run(["sbatch", "--parsable", array], capture_output=True, text=True,
                       timeout=120)
    job = p.stdout.strip().split(";")[0]
    if p.returncode != 0 or not job.isdigit():
        print(f"sweep: sbatch failed (exit status {p.returncode}):\n"
              f"{(p.stderr or p.stdout).strip()}", file=sys.stderr)
        return 1
    with safefile.open_write(os.path.join(subdir, "jobs"), "w") as f:
        f.write(f"array {job}\n")
    p = subprocess.run(["sbatch", "--parsable", f"--dependency=afterany:{job}", summary],
                       capture_output=True, text=True, timeout=120)
    summary_job = p.stdout.strip().split(";")[0]
    if p.returncode == 0 and summary_job.isdigit():
        with safefile.open_write(os.path.join(subdir, "jobs"), "a") as f:
            f.write(f"summary {summary_job}\n")
        after = (f"summary job {summary_job} writes summary.csv and summary.h5 after the "
                 "array")
    else:
        after = (f"the summary job was not submitted ({(p.stderr or p.stdout).strip()}); run "
                 f"scripts/sweep {args.experiment} --summary-only when the array is done")
    print(f"submitted job array {job}: {n_tasks} tasks, task output in {rel}/; {after}\n"
          f"follow it: scripts/sweep --status {shown_path(outdir)}   (or squeue -j {job})",
          flush=True)
    return 0
