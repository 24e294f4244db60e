"""heads.sweep.pool: running runs here: a pool of N harnesses at a time (progress line, ETA, signals
forwarded once, failures reported with their log's tail), or one run under its lock (`sweep
--run NAME`, what a Slurm array task runs).

Knows the harness command line, run locks and logs (heads.sweep.runstate); knows nothing of Slurm's
batch scripts or of the summary.
"""
import ctypes
import math
import os
import re
import signal
import subprocess
import sys
import time

from ..core import safefile
from ..core.cli import UserError, die, indent
from ..core.harness import REPO, harness_command
from ..read.results import RunResult, heldout_summary
from .states import file_states
from ..read.ondisk import harness_lock_holder
from .runstate import (RunLock, available_cpus, exit_meaning, launch_info, lock_holder, log_error_tail,
                       log_footer, open_log, resume_args, stopped_by)


PROGRESS = re.compile(rb"step (\d+)/(\d+)")


def fmt_time(seconds):
    if seconds is None or math.isnan(seconds) or math.isinf(seconds):
        return "?"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def log_progress(path):
    """Fraction of training steps done, from the last 'step X/Y' line of a run's log."""
    try:
        with safefile.open_read(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 4096))
            tail = f.read()
    except OSError:
        return 0.0
    found = PROGRESS.findall(tail)
    if not found:
        return 0.0
    done, total = (int(x) for x in found[-1])
    return min(1.0, done / total) if total else 1.0


def log_tail(path, lines=8):
    """The last lines of a log that are not progress lines (where the error message is)."""
    try:
        with safefile.open_read(path, errors="replace") as f:
            text = f.read().splitlines()
    except OSError:
        return "(no log)"
    return log_error_tail(text, lines) or "(empty log)"


_libc = None


# How long a launch keeps trying while the harness cannot be executed: `make` relinking it
# (the linker writing build/harness: ETXTBSY, ENOEXEC or EACCES on a half-written file, ENOENT
# between unlink and create) takes well under a second; after this the run fails with the reason.
START_RETRY_SECONDS = 10.0


class StartFailed(Exception):
    """The harness could not be started; the message (one line) is also in the run's log."""


def start_harness(cmd, log):
    """The harness of cmd started with its output to log, in a process group of its own (see
    _child_setup). While the program cannot be executed it tries again every 0.2 s for
    START_RETRY_SECONDS; then StartFailed, its reason written to log too."""
    end = time.time() + START_RETRY_SECONDS
    while True:
        try:
            return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    cwd=REPO, preexec_fn=lambda pid=os.getpid(): _child_setup(pid))
        except OSError as e:
            if time.time() < end:
                time.sleep(0.2)
                continue
            message = (f"cannot start {cmd[0]}: {e.strerror or e} (tried for "
                       f"{START_RETRY_SECONDS:.0f} s; is it being rebuilt, or was it removed?)")
            log.write(f"# {message}\n")
            raise StartFailed(message) from e


def _child_setup(parent_pid):
    """In the child before exec: its own process group (a terminal ^C reaches only the sweep,
    which forwards it once), and SIGTERM when the sweep dies, so no harness outlives it."""
    os.setsid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent_pid:  # the sweep died before prctl took effect
        os._exit(130)


# results a sweep does not run again unless the experiment changed or --force says so: a
# diverged run diverges again (batches and initialisation are functions of the seed)
FINISHED = ("complete", "diverged")


class Job:
    def __init__(self, run, proc, log_path, h5_path, started, log_file, lock):
        self.run, self.proc, self.log_path, self.h5_path = run, proc, log_path, h5_path
        self.started, self.log_file, self.lock = started, log_file, lock


class RunPool:
    """Runs an experiment's runs here, `jobs` at a time, each with train.threads = nproc // jobs
    (or `threads`), under its run lock, its output in <run>.log."""

    def __init__(self, exp, outdir, jobs, force, threads=None):
        self.exp, self.outdir, self.jobs, self.force = exp, outdir, jobs, force
        self.nproc = available_cpus()
        self.threads = threads or max(1, self.nproc // jobs)
        self.signals = 0
        self.forwarded = set()  # the signals passed on to the running harnesses
        self.running = []
        self.durations = {}   # run point -> [wall seconds] of runs finished this session
        self.failed = []      # (run, message)
        self.ok = []
        self.interrupted = []
        self.busy = []        # (run, where it runs): another process holds its lock
        self.tty = sys.stdout.isatty()
        self.last_status = 0.0

    def h5(self, run):
        return os.path.join(self.outdir, run.name + ".h5")

    def overrides(self, run):
        ov = dict(run.overrides)
        ov["train.threads"] = self.threads
        ov["output.path"] = os.path.abspath(self.h5(run))
        return ov

    # -- output

    def say(self, line):
        if self.tty:
            sys.stdout.write("\r\033[K")
        print(line, flush=True)
        if self.tty:
            self.status(force=True)

    def status(self, force=False):
        now = time.time()
        if not force and now - self.last_status < (1.0 if self.tty else 60.0):
            return
        self.last_status = now
        total = len(self.todo)
        finished = len(self.ok) + len(self.failed)
        partial = sum(log_progress(j.log_path) for j in self.running)
        frac = (finished + partial) / total if total else 1.0
        bar = "#" * int(round(20 * frac))
        line = (f"[{bar:<20}] {100 * frac:5.1f}%  {finished}/{total} runs done"
                f"  {len(self.running)} running" + (f"  {len(self.failed)} failed" if self.failed
                                                    else "")
                + f"  elapsed {fmt_time(now - self.t0)}  ETA {fmt_time(self.eta())}")
        if self.tty:
            sys.stdout.write("\r\033[K" + line)
            sys.stdout.flush()
        else:
            print(line, flush=True)

    def counts(self):
        finished = len(self.ok) + len(self.failed) + len(self.interrupted)
        return f"[{finished}/{len(self.todo)}, ETA {fmt_time(self.eta())}]"

    def eta(self):
        """Seconds left: every pending run costs what runs of its grid point took this session
        (else the mean of all finished runs, else the projection of the running ones), packed
        greedily onto the -j slots after the running runs' remaining time."""
        now = time.time()
        everything = [d for ds in self.durations.values() for d in ds]
        projected = []
        for j in self.running:
            f = log_progress(j.log_path)
            if f > 0.05:
                projected.append((now - j.started) / f)
        default = (sum(everything) / len(everything) if everything
                   else sum(projected) / len(projected) if projected else None)
        if default is None:
            return float("nan")

        def cost(run):
            ds = self.durations.get(run.point)
            if ds:
                return sum(ds) / len(ds)
            guess = self.by_head_count(run)
            return guess if guess is not None else default

        slots = []
        for j in self.running:
            f = log_progress(j.log_path)
            total = (now - j.started) / f if f > 0.05 else cost(j.run)
            slots.append(max(0.0, total - (now - j.started)))
        slots += [0.0] * (self.jobs - len(slots))
        for run in self.pending:
            i = slots.index(min(slots))
            slots[i] += cost(run)
        return max(slots) if slots else 0.0

    def by_head_count(self, run):
        """Time of a run whose grid point has not finished yet, from finished runs that differ
        only in the head count: a straight line through log(time) against log(n_head)."""
        heads = run.overrides.get("model.n_head")
        if not isinstance(heads, int) or heads < 1:
            return None
        rest = tuple(kv for kv in run.point if kv[0] not in ("model.n_head", "model.d_head"))
        xs, ys = [], []
        for point, ds in self.durations.items():
            h = dict(point).get("model.n_head")
            if isinstance(h, int) and h > 0 and tuple(
                    kv for kv in point if kv[0] not in ("model.n_head", "model.d_head")) == rest:
                xs.append(math.log(h))
                ys.append(math.log(sum(ds) / len(ds)))
        if len(set(xs)) < 2:
            return None
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
        return math.exp(my + slope * (math.log(heads) - mx))

    # -- running

    def launch(self, run, force):
        h5_path = self.h5(run)
        log_path = os.path.join(self.outdir, run.name + ".log")
        lock = RunLock(self.outdir, run.name)
        try:
            acquired = lock.acquire()
        except UserError as e:  # a link or a FIFO at the lock's path: refused, never written through
            self.failed.append((run, str(e)))
            self.say(f"FAILED {run.name}: {e}")
            return
        if not acquired:
            where = lock_holder(self.outdir, run.name) or "?"
            self.busy.append((run, where))
            self.say(f"skip   {run.name}: running elsewhere, on {where}")
            return
        writer = harness_lock_holder(h5_path)  # a harness started by hand on this output
        if writer:
            lock.release()
            self.busy.append((run, writer))
            self.say(f"skip   {run.name}: {h5_path} is being written by {writer}")
            return
        extra, left = resume_args(h5_path, force, START_RETRY_SECONDS)
        cmd = harness_command(self.exp.base_path, self.overrides(run), extra)
        log_file = None
        try:
            log_file = open_log(log_path, cmd, left)
            proc = start_harness(cmd, log_file)
        except (StartFailed, UserError) as e:
            if log_file:
                log_file.close()
            lock.release()
            self.failed.append((run, str(e)))
            self.say(f"FAILED {run.name}: {e}")
            return
        self.running.append(Job(run, proc, log_path, h5_path, time.time(), log_file, lock))
        self.say(f"start  {run.name}" + (f" (resuming {left.describe()})" if left else ""))

    def reap(self):
        for job in list(self.running):
            rc = job.proc.poll()
            if rc is None:
                continue
            self.running.remove(job)
            wall = time.time() - job.started
            job.log_file.close()
            try:
                with safefile.open_write(job.log_path, "a") as f:
                    f.write(log_footer(rc, wall, self.forwarded, job.log_path))
            except (OSError, UserError):  # swapped for a link during the run: no footer
                pass
            job.lock.release()
            if rc == 0:
                self.durations.setdefault(job.run.point, []).append(wall)
                self.ok.append(job.run)
                loss = ""
                try:
                    r = RunResult(job.h5_path)
                    loss = f"  {heldout_summary(r)}"
                except Exception as e:  # noqa: BLE001 - report and carry on
                    loss = f"  (cannot read results: {e})"
                self.say(f"done   {job.run.name}  {fmt_time(wall)}{loss}  {self.counts()}")
            elif stopped_by(rc, self.forwarded):
                self.interrupted.append(job.run)
                self.say(f"stopped {job.run.name} after {fmt_time(wall)} ("
                         + ("saved with status interrupted" if rc == 130 else
                            f"killed by the {signal.Signals(-rc).name} passed on to it, before "
                            "it could save") + "; the next sweep resumes it)")
            else:
                why = exit_meaning(rc, job.log_path)
                message = f"exit status {rc} ({why}) after {fmt_time(wall)}; log {job.log_path}"
                tail = log_tail(job.log_path)
                self.failed.append((job.run, message + "\n" + indent(tail)))
                self.say(f"FAILED {job.run.name}: {message}\n{indent(tail)}")

    def on_signal(self, signum, frame):
        self.signals += 1
        forward = signum if self.signals == 1 else signal.SIGKILL
        self.forwarded.add(forward)
        for job in self.running:
            try:
                os.killpg(job.proc.pid, forward)
            except ProcessLookupError:
                pass
        if self.signals == 1:
            self.say(f"\n{signal.Signals(signum).name}: launching nothing more; waiting for "
                     f"{len(self.running)} running harness(es) to save their results "
                     "(signal again to kill them)")
        else:
            self.say(f"{signal.Signals(signum).name} again: killing the running harnesses")

    def run_all(self, todo, rerun):
        self.todo = todo
        self.pending = list(todo)
        self.t0 = time.time()
        signal.signal(signal.SIGINT, self.on_signal)
        signal.signal(signal.SIGTERM, self.on_signal)
        try:
            while self.pending or self.running:
                while self.pending and len(self.running) < self.jobs and not self.signals:
                    run = self.pending.pop(0)
                    self.launch(run, force=self.force or run.name in rerun)
                if self.signals and not self.running:
                    break
                time.sleep(0.2)
                self.reap()
                self.status()
        finally:
            for job in self.running:  # only on an exception in this loop
                try:
                    os.killpg(job.proc.pid, signal.SIGTERM)
                    job.proc.wait(30)
                except (ProcessLookupError, subprocess.TimeoutExpired):
                    pass
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if self.tty:
            sys.stdout.write("\r\033[K")
        return time.time() - self.t0


def run_one(exp, outdir, name, force, threads, redo_damaged=False):
    """--run NAME: one run of the grid, here (what a Slurm array task does). Skipped (exit 0)
    when its complete result exists with the config the experiment asks for, or when another
    process is running it; a damaged results file is kept (exit 1) unless redo_damaged; else the harness runs under the run's lock, its output in
    <run>.log, and its exit status is this one's."""
    runs = {r.name: r for r in exp.runs}
    if name not in runs:
        names = ", ".join(list(runs)[:8]) + (", ..." if len(runs) > 8 else "")
        die(f"{exp.path}: no run named '{name}' in this experiment (its runs: {names}; "
               "scripts/sweep EXPERIMENT --list shows them all)")
    run = runs[name]
    try:
        os.makedirs(outdir, exist_ok=True)
    except OSError as e:
        die(f"{outdir}: cannot create the results directory: {e.strerror}")
    sweep = RunPool(exp, outdir, 1, force, threads)
    path = sweep.h5(run)
    lock = RunLock(outdir, name)
    if not lock.acquire():
        print(f"skip   {name}: already running, on {lock_holder(outdir, name) or '?'}",
              flush=True)
        return 0
    try:
        extra = ["--force"] if force else []
        st = None if force else file_states(outdir, [name], exp)[name]  # the rule of every command
        if st is not None and st.state == "damaged":
            if not redo_damaged:
                print(f"damaged {name}: {st.detail}; kept as it is "
                      "(--redo-damaged retrains it)", flush=True)
                return 1
            extra = ["--force"]
        elif st is not None and st.state in FINISHED:
            print(f"skip   {name}: its {st.state} result exists ({path})", flush=True)
            return 0
        elif st is not None and st.state == "stale":
            print(f"rerun  {name}: its {st.status} result was made with other values ({st.detail})")
            extra = ["--force"]
        extra, left = resume_args(path, bool(extra), START_RETRY_SECONDS)
        cmd = harness_command(exp.base_path, sweep.overrides(run), extra)
        log_path = os.path.join(outdir, name + ".log")
        t0 = time.time()
        with open_log(log_path, cmd, left) as log:
            try:
                proc = start_harness(cmd, log)
            except StartFailed as e:
                print(f"FAILED {name}: {e}", flush=True)
                return 1
        print(f"start  {name} on {launch_info()}: train.threads={sweep.threads}, "
              f"log {log_path}", flush=True)

        def forward(signum, frame):
            # scancel and Slurm's time limit send SIGTERM: the harness saves its results with
            # status "interrupted" (the next submission reruns it); this runner waits for it.
            print(f"{signal.Signals(signum).name}: passed on to the harness", flush=True)
            forwarded.add(signum)
            try:
                os.killpg(proc.pid, signum)
            except ProcessLookupError:
                pass

        forwarded = set()
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1):
            signal.signal(sig, forward)
        rc = proc.wait()
        wall = time.time() - t0
        try:
            with safefile.open_write(log_path, "a") as log:
                log.write(log_footer(rc, wall, forwarded, log_path))
        except (OSError, UserError):  # swapped for a link during the run: no footer
            pass
        if rc == 0:
            loss = ""
            try:
                loss = f"  {heldout_summary(RunResult(path))}"
            except Exception:  # noqa: BLE001
                pass
            print(f"done   {name}  {fmt_time(wall)}{loss}", flush=True)
        elif stopped_by(rc, forwarded):
            print(f"stopped {name} after {fmt_time(wall)} (exit status {rc}: interrupted; the "
                  "next submission resumes it)", flush=True)
        else:
            print(f"FAILED {name}: exit status {rc} ({exit_meaning(rc, log_path)}) after "
                  f"{fmt_time(wall)}; log {log_path}\n{indent(log_tail(log_path))}", flush=True)
        return rc if rc >= 0 else 128 - rc
    finally:
        lock.release()
