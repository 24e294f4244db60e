"""heads.read.ondisk: what is at a run's results path besides (or instead of) a results file: the
harness writing it (the holder of its <path>.lock, src/results/outlock.c's rule, which
tests/test_rules.py checks this against), what a harness left there that its --resume continues
(asked of the harness: `harness rules`), and why a file that is there cannot be read.

Reads the files with h5py directly, attributes only; knows nothing of sweeps (heads.sweep.runstate
builds a run's state on these).
"""
import fcntl
import os
import re
import time

from ..core import harness, safefile
from ..core.cli import UserError


def flock_holder(lock_path, anonymous):
    """What the holder of an flock on lock_path wrote into it (anonymous if nothing), or None
    when nobody holds it (or locks do not work on this file system). Peeks with a shared lock
    for an instant, which the harness and RunLock.acquire wait out."""
    try:
        safefile.check_regular(lock_path)  # a FIFO there would block the open
        f = open(lock_path, errors="replace")
    except (OSError, UserError):
        return None
    with f:
        try:
            fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return holder_line(f) or anonymous
        except OSError:
            return None
        fcntl.flock(f, fcntl.LOCK_UN)
    return None


def holder_line(f):
    """The first line of a held lock file, as src/results/outlock.c reads it: the holder writes it
    right after locking (and over itself, never truncating first), so an empty file is read again
    for up to a second; a file with any bytes gives its first line as it is."""
    for _ in range(40):
        f.seek(0)
        text = f.read(479)  # outlock.c's buffer
        if text:
            return text.split("\n")[0]
        time.sleep(0.025)
    return ""


def harness_lock_holder(h5_path):
    """'pid N on HOST since TIME' when a harness holds the lock of its output path
    (<path>.lock, src/results/outlock.c), else None: a run started by hand counts as running too."""
    return flock_holder(h5_path + ".lock", "a harness")


def temporaries(h5_path):
    """The temporaries beside h5_path (<path>.tmp.XXXXXX, or <path>.tmp of older versions)."""
    directory, base = os.path.split(h5_path)
    try:
        names = os.listdir(directory or ".")
    except OSError:
        return []
    return sorted(os.path.join(directory, n) for n in names
                  if n == base + ".tmp" or re.fullmatch(re.escape(base) + r"\.tmp\.\w{6}", n))


def h5py_file(path):
    import h5py  # heads.results says how to install it when it is missing
    safefile.check_regular(path)  # a FIFO would block h5py's open
    return h5py.File(path, "r")


class Leftover:
    """What `harness --resume` continues for a results path: step (of total), where (the file)
    and what (a phrase: 'an interrupted run', 'a checkpoint', 'a trained run (the study only)',
    'a complete result that could not be moved into place')."""

    def __init__(self, step, total, where, what):
        self.step, self.total, self.where, self.what = step, total, where, what

    def describe(self):
        return f"{self.what}, resumable at step {self.step}" + \
            (f" of {self.total}" if self.total is not None else "") + f" ({self.where})"


WHAT = {"interrupted": "an interrupted run", "running": "a checkpoint",
        "trained": "a trained run (the study only)"}


def leftover(h5_path, wait=0.0):
    """The latest state a harness left at h5_path that its --resume continues (an interrupted
    results file, its .ckpt, a stranded temporary: docs/reliability.md), or None, as the harness
    decides it (src/results/run_files.c, results_resume_from, asked through `harness rules`): a
    sweep passes --resume exactly when the harness would continue something. UserError when the
    harness cannot answer (tried for `wait` seconds while it cannot be executed)."""
    left = harness.file_rules([h5_path], wait)[0]["resume"]
    if left is None:
        return None
    if left["place"]:
        return Leftover(left["steps"], left["steps"], left["from"],
                        f"a {left['status']} result that could not be moved into place")
    return Leftover(left["step"], None if left["steps"] < 0 else left["steps"], left["from"],
                    WHAT.get(left["status"], left["status"]))


def unreadable_why(h5_path):
    """Why a results file that is there cannot be read ('' when it can, or is not there)."""
    if not os.path.exists(h5_path):
        return ""
    try:
        with h5py_file(h5_path) as f:
            f.attrs.get("status")
        return ""
    except UserError as e:
        return str(e).split(": ", 1)[-1]
    except OSError as e:
        return str(e).split(" (")[0] or "not an HDF5 file"


def leftover_temp(h5_path):
    """'left a .tmp' when a harness left a temporary beside h5_path, '' when there is none."""
    return "left a .tmp" if temporaries(h5_path) else ""
