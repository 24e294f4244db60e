"""heads.sweep.runstate: the state of a run however it was launched (a local sweep, a Slurm array task,
`sweep --run` by hand): its lock, its log's header and footer, and from them, the results file,
its checkpoint and Slurm's queue: complete / stale / running / interrupted / unreadable / failed
/ missing (`sweep --status`, docs/reliability.md, docs/slurm.md); and what a harness left that
its --resume continues (`leftover`), which sweeps resume instead of training afresh.

Knows the results reader, an experiment's run names and heads.sweep.slurm's queue; knows
nothing of how runs are launched.
"""
import fcntl
import os
import re
import signal
import socket
import time

from ..core.cli import UserError, now_text, shell_quote
from ..core import safefile
from ..read.ondisk import flock_holder, harness_lock_holder, leftover, leftover_temp, unreadable_why
from ..read.results import read_status
from .slurm import SLURM_ACTIVE, slurm_task_id
from .states import file_states


# the state of a run, however it was launched (a local sweep, a Slurm array task, --run by hand)
#
# Whoever runs a run holds an advisory lock on <results>/.run-locks/<run>.lock (flock) while its
# harness runs, and writes <run>.log: a '#' header line with the command, '# started TIME on
# WHERE', the harness's output, and a last line '# finished TIME: exit status N (meaning) after
# S'. From these, the results file and Slurm's queue, `sweep --status` tells complete, running,
# failed (with the error) and missing runs apart without knowing how they were started.

EXIT_MEANING = {0: "complete", 2: "bad input", 3: "diverged", 130: "interrupted"}
LOCK_DIR = ".run-locks"
_STARTED = re.compile(r"^# started (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?: on (.*))?$")
_FINISHED = re.compile(r"^# finished (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d): exit status (-?\d+)"
                       r"(?: \((interrupted))?")
_PROGRESS = re.compile(r"step (\d+)/(\d+)")


# What the harness says when the disk, not the input, failed it (it exits 2 for both): the
# system's words for a write it refused, or the harness's own refusal at start when the disk
# has too little room for the run (src/cli/main.c: "... MiB are free; refused before step 1").
_IO_FAILURES = [("disk full", ("No space left on device", "Disk quota exceeded", "File too large",
                               "MiB are free; refused before step 1")),
                ("I/O error", ("Input/output error", "Read-only file system"))]


def exit_meaning(rc, log_path=None):
    """'bad input', 'diverged', ..., 'killed by signal SIGKILL', 'error'; 'disk full' or 'I/O
    error' for an exit status 2 whose log (log_path) says the system refused a write."""
    if rc == 2 and log_path:
        try:
            with safefile.open_read(log_path, errors="replace") as f:
                tail = f.read()[-4000:]
        except OSError:
            tail = ""
        for meaning, words in _IO_FAILURES:
            if any(w in tail for w in words):
                return meaning
    if rc < 0 or (rc > 128 and rc != 130):
        sig = -rc if rc < 0 else rc - 128
        try:
            return f"killed by signal {signal.Signals(sig).name}"
        except ValueError:
            return f"killed by signal {sig}" if rc < 0 else "error"
    return EXIT_MEANING.get(rc, "error")


def available_cpus():
    """CPUs this process may use: $SLURM_CPUS_PER_TASK inside a Slurm job (--cpus-per-task),
    else the CPU affinity mask, else the CPU count."""
    v = os.environ.get("SLURM_CPUS_PER_TASK", "")
    if v.isdigit() and int(v) > 0:
        return int(v)
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def launch_info():
    """Where this process runs, for logs and locks: 'HOST (pid N)' or
    'HOST (slurm job 12_3, pid N)'."""
    job = slurm_task_id()
    return f"{socket.gethostname()} (" + (f"slurm job {job}, " if job else "") + \
        f"pid {os.getpid()})"


def log_header(cmd):
    """The first two lines of a run's log: the command, and when and where it started."""
    return ("# " + " ".join(shell_quote(c) for c in cmd) + "\n"
            + f"# started {now_text()} on {launch_info()}\n")


def stopped_by(rc, forwarded):
    """Whether a harness that exited with rc was stopped by a signal its runner passed on to it
    (forwarded: the signal numbers): it saved its results (130), or died of that signal before
    it could install its handlers. Either way the run was interrupted, not failed."""
    return bool(forwarded) and (rc == 130 or -rc in forwarded)


def log_footer(rc, seconds, forwarded=(), log_path=None):
    """The last line of a run's log, written when its harness has exited; forwarded: the
    signals its runner passed on to it; log_path: the log so far (what the harness said)."""
    meaning = exit_meaning(rc, log_path)
    if stopped_by(rc, forwarded) and rc != 130:
        meaning = (f"interrupted: killed by the {signal.Signals(-rc).name} passed on to it, "
                   "before it could save")
    return f"# finished {now_text()}: exit status {rc} ({meaning}) after {seconds:.1f} s\n"


def log_error_tail(lines, n=8):
    """The last lines of a log that are neither '#' lines nor progress lines (the error)."""
    body = [l for l in lines if not l.startswith("#")]
    errors = [l for l in body if not re.match(r"\s*step \d+/\d+", l)]
    return "\n".join((errors or body)[-n:])


class RunLog:
    """What a run's log says: started (time text), where, finished, rc (None: no footer: still
    running or killed), interrupted (the footer says so: stopped by a signal, not failed),
    progress (done, total) steps, and tail (the error lines)."""

    def __init__(self, path):
        self.path = path
        self.exists = False
        self.started = self.where = self.finished = self.rc = self.progress = None
        self.interrupted = False
        self.tail = ""
        try:
            with safefile.open_read(path, errors="replace") as f:
                lines = f.read().splitlines()
        except OSError:
            return
        self.exists = True
        session = 0  # the first line of the last session
        for i, line in enumerate(lines):  # a resumed run's log has one header per session: the last one's
            m = _STARTED.match(line) if line.startswith("# started") else None
            if m:
                self.started, self.where, session = m.group(1), m.group(2), i
        for line in reversed(lines[-3:]):
            m = _FINISHED.match(line)
            if m:
                self.finished, self.rc = m.group(1), int(m.group(2))
                self.interrupted = m.group(3) is not None
                break
        for line in reversed(lines[session:]):  # not an earlier session's last step
            m = _PROGRESS.search(line)
            if m and not line.startswith("#"):
                self.progress = (int(m.group(1)), int(m.group(2)))
                break
        self.tail = log_error_tail(lines)


class RunLock:
    """The lock a run's runner holds while its harness runs (flock on <results>/.run-locks/
    <run>.lock, which holds the holder's launch_info()). On a file system without flock the
    lock is a no-op, and `--status` falls back on the logs and Slurm's queue."""

    def __init__(self, outdir, name):
        self.path = os.path.join(outdir, LOCK_DIR, name + ".lock")
        self.file = None

    def acquire(self, attempts=20):
        """True when held (or when locks do not work here); False when another holds it."""
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        f = safefile.open_write(self.path, "a+")
        for i in range(attempts):
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if i == attempts - 1:  # held for 2 s: not just a `--status` peeking at it
                    f.close()
                    return False
                time.sleep(0.1)
            except OSError:  # no flock on this file system: run unlocked
                break
        f.seek(0)
        f.truncate()
        f.write(launch_info() + "\n")
        f.flush()
        self.file = f
        return True

    def release(self):
        if self.file is not None:
            self.file.close()
            self.file = None


def lock_holder(outdir, name):
    """launch_info() of the process that holds the run's lock, or None when nobody does (or
    locks do not work on this file system)."""
    return flock_holder(os.path.join(outdir, LOCK_DIR, name + ".lock"), "?")


def resume_args(h5_path, force, wait=0.0):
    """The harness options for a sweep's run of h5_path and what it resumes: (["--force"],
    None) when asked to train afresh, (["--resume"], Leftover) when a harness left a state
    there, ([], None) otherwise. A harness that cannot say (tried for `wait` seconds) gets no
    option: a plain run refuses to replace anything a run left and says what, and one that
    cannot start fails as it does."""
    if force:
        return ["--force"], None
    try:
        left = leftover(h5_path, wait)
    except UserError:
        return [], None
    return (["--resume"], left) if left is not None else ([], None)


def open_log(log_path, cmd, left):
    """A run's log opened for its harness, the header written: a fresh log, or, when the run
    resumes (left: a Leftover), the old one appended to after a '# resumed at step N' line."""
    log = safefile.open_write(log_path, "a" if left is not None else "w")
    if left is not None:
        log.write(f"# resumed at step {left.step} from {left.describe()}\n")
    log.write(log_header(cmd))
    log.flush()
    return log


STATES = ("complete", "stale", "running", "interrupted", "unreadable", "damaged", "failed", "missing")
# the count line: the four every sweep has, then the others that occur
SHOWN_ORDER = ("complete", "running", "failed", "missing", "stale", "interrupted", "unreadable", "damaged")


class RunState:
    """state: one of STATES ('damaged': its results file cannot be read
    whole, heads.read.verify); detail: one line; error: the error lines (failed runs)."""

    def __init__(self, name, state, detail="", error=""):
        self.name, self.state, self.detail, self.error = name, state, detail, error


def run_state(outdir, name, submission=None, queue=None, found=None):
    """The state of one run of a results directory: its file's state (found: a
    heads.sweep.states.FileState, the rule every command uses: complete, stale, damaged, ...), and,
    for a run without a finished file, what else its harness left (leftover), its lock, its log,
    its latest Slurm submission (a Submission or None) and Slurm's queue (slurm_queue())."""
    h5 = os.path.join(outdir, name + ".h5")
    if found is None:
        found = file_states(outdir, [name])[name]
    if found.state == "damaged":
        return RunState(name, "damaged", f"{found.detail}; kept as it is (sweep --redo-damaged "
                                         "retrains it)")
    if found.state == "complete":
        return RunState(name, "complete")
    if found.state == "stale":
        return RunState(name, "stale", f"{found.detail}; the next sweep reruns it")
    log = RunLog(os.path.join(outdir, name + ".log"))
    holder = lock_holder(outdir, name) or harness_lock_holder(h5)
    queued = None
    if submission is not None and submission.job and queue:
        queued = queue.get((submission.job, submission.index))
    current = holder is not None  # the log is the running one's (the holder wrote it)
    if holder is None and queued and queued[0] in SLURM_ACTIVE:
        holder = f"{queued[1]} (slurm job {submission.task})"
        # started in Slurm; its runner may not have taken the lock and begun the log yet
        current = bool(log.where and f"slurm job {submission.task}," in log.where)
    if holder is not None:
        detail = f"on {holder}"
        if current and log.started:
            detail += f", started {log.started}"
        if current and log.progress and log.rc is None:
            detail += f", step {log.progress[0]}/{log.progress[1]}"
        return RunState(name, "running", detail)
    if queued:
        return RunState(name, "missing", f"queued: slurm job {submission.task} {queued[0]} "
                                         f"({queued[1]})")
    if log.rc == 0 and read_status(h5) == "complete":  # finished since we looked
        return RunState(name, "complete")

    file_status = read_status(h5) or leftover_temp(h5)
    slurm_lines = ""
    task_out = submission.output() if submission is not None else None
    if task_out:
        try:
            with safefile.open_read(task_out, errors="replace") as f:
                text = f.read().splitlines()
            slurm_lines = "\n".join([l for l in text if re.search(
                r"slurmstepd|error|Error|Traceback|CANCELLED|DUE TO", l)][-6:])
        except OSError:
            pass
    where = f" [{log.where}]" if log.where else ""
    left = leftover(h5)
    if left is not None:
        how = f"; last session: exit status {log.rc} ({exit_meaning(log.rc)})" \
            if log.rc not in (None, 0) else ""
        error = f"slurm ({task_out}):\n" + slurm_lines if slurm_lines else ""
        return RunState(name, "interrupted", left.describe() + how + where +
                        "; the next sweep resumes it", error)
    why = unreadable_why(h5)
    if why:
        return RunState(name, "unreadable", f"{h5}: {why}" + (
            f" (its log ends: exit status {log.rc}, {exit_meaning(log.rc)})"
            if log.rc is not None else "") + "; sweep --force trains it afresh")
    if log.exists and log.started:
        if log.rc is not None:
            if log.rc == 0:
                detail = ("the harness exited 0 but left no complete results file"
                          + (f" ({file_status})" if file_status else ""))
            else:
                detail = f"exit status {log.rc} ({exit_meaning(log.rc, log.path)})"
            detail += f" at {log.finished}{where}"
        else:
            detail = ("stopped without finishing: no exit status in its log (killed: node "
                      "failure, time limit, out of memory?)" + where)
            if file_status:
                detail += f"; results file: {file_status}"
        error = log.tail
        if slurm_lines:
            error = (error + "\n" if error else "") + f"slurm ({task_out}):\n" + slurm_lines
        return RunState(name, "failed", detail + f"; log {log.path}", error)
    if file_status in ("diverged", "interrupted"):
        return RunState(name, "failed", f"results file says {file_status} (no log)")
    if task_out and slurm_lines:
        return RunState(name, "failed", f"slurm job {submission.task} ended before running the "
                                        f"harness; output {task_out}", slurm_lines)
    if submission is not None and submission.job and queue is not None:
        return RunState(name, "missing", f"submitted as slurm job {submission.task}, which is "
                                         "no longer queued and left no log (cancelled?)")
    return RunState(name, "missing")
