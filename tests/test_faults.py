#!/usr/bin/python3
# suite: fault injection: the N-th write/fsync/rename/malloc fails (LD_PRELOAD shim)
# suite-args: {harness}
"""tests/test_faults.py HARNESS [--all]: fault injection in the spirit of SQLite's I/O-error tests.

A tiny run (tests/injection.py: 20 steps, a checkpoint at step 10, every dataset written) is
first counted under the LD_PRELOAD shim (tests/faultshim.c): how many write (write, pwrite64:
HDF5's sec2 driver), fsync, rename and malloc calls it makes. Then the run is repeated with the
N-th call of one kind failing, for N over the run:
  write, fsync, rename  every point (they are ~150 in all)
  malloc                a stride over the ~13600 points (the kernels' per-step scratch buffers
                        make most of them): 40 points by default, 300 with --all
Every case must end in one of two ways:
  failed     a non-zero exit status below 128 (no crash, no abort), a last stderr line that
             says what went wrong (not "internal error"), the previous result at output.path
             bitwise intact (odd N: a complete result of another seed was there, replaced only
             by --force), or no file at output.path (even N: there was none), and no other file
             claiming "complete" but a temporary the message names as keeping the run's own
             complete result (its final rename failed: docs/reliability.md); and when a
             checkpoint of the run survives (the write that failed came after it), a last line
             naming it, its step and the exact command that continues it ("kept: a checkpoint at
             step 10 of 20 in run.h5.ckpt; ... `harness tiny.yaml --resume` continues from
             there"), which, run as it is, ends with the undisturbed run's bits
  hdf5       as failed, but HDF5 itself ended the process (exit(-1), or a crash in its error
             paths when an allocation fails: HDF5 1.10.8 defects), and the harness's last line
             says so (src/base/fatal.c); only under malloc failures
  completed  exit 0 and output.path holding the run's own result (every dataset but the
             timing column bitwise equal to an undisturbed run, and `harness check` passes it):
             the failed call was one the program can do without (a stdio buffer, the lock
             file's note, a directory fsync)
The last line before the counts says how many points were tried. The malloc points start after
HDF5's library initialisation (~2200 allocations, counted with `harness --version`, which
stops right after it): HDF5 1.10.8 overflows its stack when one of those fails (H5_init_library ->
H5E_init, or H5dont_atexit -> H5TS_cancel_count_inc, pushing onto its error stack, which
allocates, recursively), before the harness has done anything: a library defect, not ours.
Under the sanitizers (make SAN=1 test) the ASan runtime comes first in LD_PRELOAD and keeps its
own malloc: the write, fsync and rename points run, the malloc points do not.
"""
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import injection as inj  # noqa: E402
from checks import check, finish  # noqa: E402

CRASH = re.compile(r"internal error|Segmentation|Traceback|core dumped|Aborted")


def one_case(harness, shim, work, ref, prev, kind, n):
    """Run with the n-th call of kind failing; return (ok, how it ended, details)."""
    path = os.path.join(work, "run.h5")
    for f in os.listdir(work):
        if f != "tiny.yaml":
            os.unlink(os.path.join(work, f))
    had_previous = n % 2 == 1
    if had_previous:
        shutil.copyfile(prev, path)
    config = os.path.join(work, "tiny.yaml")
    p = inj.run(harness, config, "--force", env=inj.shim_env(shim, fail=f"{kind}:{n}"))
    last = inj.last_line(p.stderr)
    others = [f for f in inj.stray_files(work, {"tiny.yaml", "run.h5"})
              if inj.status(os.path.join(work, f)) == "complete"]
    # a complete result that could not be moved into place is kept in its temporary (never
    # deleted): it must be the run's own, and the message must name it
    stranded = [f for f in others if ".tmp." in f and os.path.join(work, f) in p.stderr
                and not inj.differences(os.path.join(work, f), ref)]
    if set(others) - set(stranded):
        return False, "bad", f"other files claim complete: {sorted(set(others) - set(stranded))}"
    if p.returncode == 0:
        if inj.status(path) != "complete":
            return False, "bad", "exit 0 but no complete result"
        differ = inj.differences(path, ref)
        if differ:
            return False, "bad", f"exit 0 but the result differs in {differ[:4]}"
        passes, said = inj.harness_check(harness, path)
        return passes, "completed", f"exit 0 but harness check says: {said[-300:]}"
    how = "failed"
    if not 0 < p.returncode < 128:
        # HDF5's own defects under memory exhaustion, which the harness names (src/base/fatal.c)
        if not re.match(r"harness: .*(inside \S*hdf5|the HDF5 library stopped)", last):
            return False, "bad", f"exit status {p.returncode}: {last}"
        how = "hdf5"
    elif not last or CRASH.search(p.stderr):
        return False, "bad", f"exit {p.returncode} without a clear message: {p.stderr[-300:]!r}"
    if had_previous:
        with open(path, "rb") as a, open(prev, "rb") as b:
            if a.read() != b.read():
                return False, "bad", "the previous result was changed"
    elif os.path.exists(path):
        return False, "bad", f"left {path} (status {inj.status(path)!r})"
    if how == "failed" and kind != "malloc":
        problem = survivor(path, last, ref)
        if problem:
            return False, "bad", problem
    return True, how, last


def survivor(path, last, ref):
    """'' when no checkpoint of the run survives, or when the last line names the one that does
    (its step, the command) and that command, run as it is, ends with the reference's bits."""
    ckpt = path + ".ckpt"
    if inj.status(ckpt) not in ("running", "trained"):
        return ""
    # the checkpoint, or the complete result kept in its temporary (the last rename failed),
    # which --resume moves into place
    found = re.search(r"kept: .*(at step \d+ of \d+|every step of \d+ done|a complete run)\)? in (\S+); "
                      r".*`([^`]+)`", last)
    named = found and (found.group(2) == ckpt or (found.group(1) == "a complete run" and ".tmp." in found.group(2)
                                                  and inj.status(found.group(2)) == "complete"))
    if not named or "--resume" not in found.group(3):
        return f"a checkpoint survives, but the last line does not name it and its command: {last}"
    p = subprocess.run(shlex.split(found.group(3)), capture_output=True, text=True, timeout=120,
                       cwd=os.path.dirname(path))
    differ = inj.differences(path, ref) if p.returncode == 0 else [f"exit {p.returncode}"]
    if differ:
        return f"`{found.group(3)}` does not end with the undisturbed bits: {differ[:4]} {p.stderr[-200:]}"
    return ""


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    full = "--all" in sys.argv
    harness = os.path.abspath(args[0] if args else "harness")
    t0 = time.time()
    started = inj.start(harness, "heads-faults-", sanitizers=True)
    if not started:
        return finish()
    shim, top, ref, work = started
    try:
        ref_dir = os.path.dirname(ref)
        config = os.path.join(ref_dir, "tiny.yaml")
        prev = os.path.join(ref_dir, "prev.h5")
        p = inj.run(harness, config, "--set", f"output.path={prev}", "--set", "train.seed=7")
        check("a previous result of another seed", p.returncode == 0, p.stderr[-300:])
        calls, p = inj.count_calls(harness, shim, os.path.join(work, "tiny.yaml"), "--force")
        check(f"counting under the shim changes nothing: {calls}",
              p.returncode == 0 and not inj.differences(os.path.join(work, "run.h5"), ref),
              p.stderr[-300:])
        os.unlink(os.path.join(work, "run.h5"))  # the same start (reading a result there allocates)
        again, _ = inj.count_calls(harness, shim, os.path.join(work, "tiny.yaml"), "--force")
        check("the call counts are the same in a second run", again == calls, f"{again}")

        plan = {}
        for kind in ("write", "fsync", "rename"):
            plan[kind] = list(range(1, calls[kind] + 1))
        # HDF5's own start-up allocations (H5_init_library, which the harness's first line
        # triggers) are counted by `harness --version`, which stops right after them.
        counts = os.path.join(work, "counts.txt")
        subprocess.run([harness, "--version"], capture_output=True,
                       env=inj.shim_env(shim, count=counts))
        with open(counts) as f:
            hdf5_init = dict(line.split() for line in f)["malloc"]
        first = int(hdf5_init) + 1
        want = 300 if full else 40
        stride = max(1, (calls["malloc"] - first) // want)
        if not os.environ.get("SANITIZER_REPORTS"):  # ASan's malloc stands under the sanitizers
            plan["malloc"] = list(range(first, calls["malloc"] + 1, stride))
        tried = 0
        for kind, points in plan.items():
            ended = {"failed": 0, "completed": 0, "hdf5": 0}
            bad = []
            for n in points:
                ok, how, details = one_case(harness, shim, work, ref, prev, kind, n)
                tried += 1
                if ok:
                    ended[how] += 1
                else:
                    bad.append(f"{kind}:{n}: {details}")
            check(f"{kind}: {len(points)} of {calls[kind]} points"
                  + (f" (every {stride}th from {first})" if kind == "malloc" else "")
                  + f": {ended['failed']} failed cleanly, {ended['completed']} completed with "
                  "their own result" + (f", {ended['hdf5']} ended inside HDF5 (named)"
                                        if ended["hdf5"] else ""),
                  not bad, "\n    ".join([""] + bad[:10]))
        print(f"fault injection: {tried} injection points tried "
              f"({sum(calls.values())} calls counted) in {time.time() - t0:.0f} s")
    finally:
        shutil.rmtree(top, ignore_errors=True)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
