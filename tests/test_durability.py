#!/usr/bin/python3
# suite: one writer per results file, durable write order (strace), sweep statuses
# suite-args: {harness}
"""tests/test_durability.py HARNESS: one writer per results file, the durable write order, and
honest statuses at the sweep's edges. Checks, one line each, then "N passed, M failed":
  two writers   a second run on the same output.path, started while the first trains, exits 2 at
                once naming the first's pid, host and start time; the first completes with its
                own config; the lock file names its holder while it runs
  stale lock    a run killed with SIGKILL leaves <path>.lock; the next run is not blocked
  temporaries   the temporaries are <path>.tmp.XXXXXX (mkstemp), not a shared <path>.tmp
  durable order strace -f -e trace=fsync,fdatasync,rename,renameat,renameat2 -y of a run with a
                checkpoint and of `sweep --summary-only`: for the .ckpt, the results file and
                summary.csv / summary.h5, fsync of the temporary, then its rename, then fsync
                of the directory
  --resume      with another config: the harness lists the keys that differ, old -> new
  sweep | head  `sweep EXP | head -1`: no traceback, every run still completes
  interrupted   a harness killed by the SIGINT the sweep passed on (here before it could save)
                is reported "stopped", its log footer and summary row say interrupted
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import injection as inj  # noqa: E402
from checks import check, finish, read_csv, run_check  # noqa: E402

PY = "/usr/bin/python3"
SWEEP = os.path.join(inj.ROOT, "scripts", "sweep")
TMP = tempfile.mkdtemp(prefix="heads-durability-")
HARNESS = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "harness")


def wait_for(path, pattern, seconds=60):
    end = time.time() + seconds
    while time.time() < end:
        try:
            with open(path) as f:
                if re.search(pattern, f.read(), re.M):
                    return True
        except OSError:
            pass
        time.sleep(0.05)
    return False


def config_attr(path, key):
    return inj.h5py.File(path, "r")["config"].attrs[key]


def test_two_writers():
    d = os.path.join(TMP, "two")
    os.makedirs(d)
    same = os.path.join(d, "same.h5")
    sanitizers = bool(os.environ.get("SANITIZER_REPORTS"))  # slow anyway; no shim under them
    config = inj.write_config(d, same, steps=400 if sanitizers else 40, checkpoint_every=0)
    log = open(os.path.join(d, "first.log"), "w")
    # slowed down (every allocation waits 200 us: a few seconds in all) so it is still training
    slow = None if sanitizers else inj.shim_env(inj.shim_path(HARNESS), delay="malloc:200")
    first = subprocess.Popen([HARNESS, config, "--set", "train.seed=0"], stdout=log,
                             stderr=subprocess.STDOUT, cwd=d, env=slow)
    check("first run trains", wait_for(log.name, r"^step \d+/"), open(log.name).read()[-300:])
    with open(same + ".lock") as f:
        note = f.read()
    check(f"the lock file names its holder: {note.strip()!r}",
          re.match(rf"pid {first.pid} on \S+ since \d{{4}}-\d\d-\d\dT", note), note)
    started = time.time()
    second = inj.run(HARNESS, config, "--set", "train.seed=5")
    took = time.time() - started
    check(f"second run on the same path: exit 2 at once ({took:.1f} s), naming pid, host, time: "
          f"{inj.last_line(second.stderr)}",
          second.returncode == 2 and re.search(rf"same\.h5 is being written by pid {first.pid} "
                                               r"on \S+ since \d{4}-", second.stderr)
          and not re.search(r"^step \d+/", second.stderr, re.M), second.stderr)
    check("temporaries have unique names (mkstemp), no shared same.h5.tmp",
          any(re.fullmatch(r"same\.h5\.tmp\.\w{6}", f) for f in os.listdir(d))
          and not os.path.exists(same + ".tmp"), str(os.listdir(d)))
    rc = first.wait(300)
    log.close()
    check("the first run completes with its own config (seed 0), the lock file is gone",
          rc == 0 and inj.status(same) == "complete" and config_attr(same, "seed") == 0
          and not os.path.exists(same + ".lock"), f"exit {rc}, {os.listdir(d)}")


def start_logged(config, log, *args):
    """A harness on config in the background, its output in log."""
    with open(log, "w") as f:
        return subprocess.Popen([HARNESS, config, *args], stdout=f, stderr=subprocess.STDOUT,
                                cwd=os.path.dirname(config))


def training(name, checkpoint_every, step_pattern):
    """A long run in TMP/name, started in the background and past step_pattern: (process,
    config, output path)."""
    d = os.path.join(TMP, name)
    os.makedirs(d)
    path = os.path.join(d, "run.h5")
    config = inj.write_config(d, path, steps=100000, checkpoint_every=checkpoint_every)
    log = os.path.join(d, "run.log")
    proc = start_logged(config, log)
    wait_for(log, step_pattern)
    return proc, config, path


def test_stale_lock():
    proc, config, path = training("stale", 0, r"^step \d+/")
    d = os.path.dirname(path)
    proc.kill()
    proc.wait()
    check("SIGKILL leaves the lock file behind", os.path.exists(path + ".lock"))
    p = inj.run(HARNESS, config, "--set", "train.steps=20")
    check("a stale lock (its holder killed) does not block the next run",
          p.returncode == 0 and inj.status(path) == "complete", p.stderr[-300:])
    check("the next run removed the killed run's temporary",
          not [f for f in os.listdir(d) if ".tmp" in f], str(os.listdir(d)))


def durable_order(trace, target, what):
    """Check fsync(temporary) < rename(temporary, target) < fsync(directory) in an strace log."""
    name = os.path.basename(target)
    directory = os.path.dirname(target)
    lines = trace.splitlines()
    renames = [i for i, l in enumerate(lines)
               if re.search(rf'rename(at2?)?\(.*"(\S*/)?({re.escape(name)}\.tmp\.\w+)", '
                            rf'.*"(\S*/)?{re.escape(name)}"', l)]
    if not renames:
        return check(f"{what}: renamed into place", False, "no rename of a temporary to " + name)
    i = renames[-1]
    tmp = re.search(rf"({re.escape(name)}\.tmp\.\w+)", lines[i]).group(1)
    synced_file = [j for j, l in enumerate(lines[:i]) if re.search(
        rf"f(data)?sync\(\d+<{re.escape(os.path.join(directory, tmp))}>\) = 0", l)]
    synced_dir = [j for j, l in enumerate(lines[i + 1:], i + 1) if re.search(
        rf"f(data)?sync\(\d+<{re.escape(directory)}>\) = 0", l)]
    return check(f"{what}: fsync({tmp}), rename to {name}, fsync(directory), in that order",
                 synced_file and synced_dir, "\n".join(lines[max(0, i - 3):i + 3]))


def test_durable_order():
    if not shutil.which("strace"):
        return check("strace installed (scripts/install-deps, test set)", False)
    d = os.path.join(TMP, "strace")
    os.makedirs(d)
    path = os.path.join(d, "run.h5")
    config = inj.write_config(d, path, steps=20, checkpoint_every=10)
    trace = os.path.join(d, "trace")
    p = subprocess.run(["strace", "-f", "-y", "-o", trace, "-e",
                        "trace=fsync,fdatasync,rename,renameat,renameat2", HARNESS, config],
                       capture_output=True, text=True, cwd=d)
    if not check("the run under strace completes", p.returncode == 0, p.stderr[-300:]):
        return
    text = open(trace).read()
    durable_order(text, path + ".ckpt", "checkpoint")
    durable_order(text, path, "results file")
    exp = os.path.join(d, "exp.yaml")
    with open(exp, "w") as f:
        f.write(f"base: {config}\ngrid: {{n_head: [1, 2]}}\n")
    res = os.path.join(d, "results")
    p = subprocess.run(["strace", "-f", "-y", "-o", trace, "-e",
                        "trace=fsync,fdatasync,rename,renameat,renameat2", PY, SWEEP, exp,
                        "--results", res, "--summary-only"], capture_output=True, text=True)
    outdir = os.path.join(os.path.realpath(res), "exp")
    if check("sweep --summary-only under strace writes the summary", p.returncode in (0, 1)
             and os.path.exists(os.path.join(outdir, "summary.csv")), p.stderr[-300:]):
        text = open(trace).read()
        durable_order(text, os.path.join(outdir, "summary.csv"), "summary.csv")
        durable_order(text, os.path.join(outdir, "summary.h5"), "summary.h5")


def test_resume_diff():
    proc, config, path = training("diff", 10, r"^step [2-9]\d/")
    proc.send_signal(signal.SIGINT)
    proc.wait(60)
    p = inj.run(HARNESS, config, "--resume", "--set", "train.lr=0.001", "--set",
                "model.n_head=4")
    check(f"--resume with another config names the keys: {inj.last_line(p.stderr)[:150]}...",
          p.returncode == 2 and "model.n_head 2 -> 4" in p.stderr
          and "train.lr 0.003 -> 0.001" in p.stderr, p.stderr)


def sweep_env(harness):
    env = dict(os.environ, HARNESS=harness)
    return env


def test_sweep_head():
    d = os.path.join(TMP, "head")
    os.makedirs(d)
    config = inj.write_config(d, os.path.join(d, "unused.h5"), steps=60, checkpoint_every=0)
    exp = os.path.join(d, "pipe.yaml")
    with open(exp, "w") as f:
        f.write(f"base: {config}\ngrid: {{n_head: [1, 2]}}\n")
    res = os.path.join(d, "results")
    p = subprocess.run(f"{PY} {SWEEP} {exp} --results {res} | head -1", shell=True,
                       capture_output=True, text=True, timeout=300, env=sweep_env(HARNESS))
    outdir = os.path.join(res, "pipe")
    done = sorted(f for f in os.listdir(outdir) if f.endswith(".h5") and f != "summary.h5"
                  and inj.status(os.path.join(outdir, f)) == "complete")
    check(f"sweep | head -1: quiet ({len(p.stdout.splitlines())} line), every run completes",
          "Traceback" not in p.stderr and "BrokenPipe" not in p.stderr
          and len(p.stdout.splitlines()) == 1 and len(done) == 2, p.stderr[-500:] + str(done))


def test_interrupted_before_handlers():
    d = os.path.join(TMP, "intr")
    os.makedirs(d)
    # A harness that is killed by SIGINT before it has installed its handlers: --shapes and
    # --keys go to the real one (the sweep's checks), a run is a process that dies of the signal.
    fake = os.path.join(d, "harness")
    with open(fake, "w") as f:
        f.write(f'#!/bin/sh\ncase " $* " in *" --shapes "*|*" --keys"*|*" --version "*|" rules "*) '
                f'exec {HARNESS} "$@";; esac\necho "step 0/20"\nexec sleep 60\n')
    os.chmod(fake, 0o755)
    config = inj.write_config(d, os.path.join(d, "unused.h5"), steps=20, checkpoint_every=0)
    exp = os.path.join(d, "intr.yaml")
    with open(exp, "w") as f:
        f.write(f"base: {config}\ngrid: {{n_head: [1]}}\n")
    res = os.path.join(d, "results")
    outdir = os.path.join(res, "intr")
    proc = subprocess.Popen([PY, SWEEP, exp, "--results", res], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=sweep_env(fake))
    wait_for(os.path.join(outdir, "h1_dh8_s1.log"), r"^step 0/")
    proc.send_signal(signal.SIGINT)
    out = proc.communicate(timeout=60)[0]
    footer = open(os.path.join(outdir, "h1_dh8_s1.log")).read().splitlines()[-1]
    rows = read_csv(os.path.join(outdir, "summary.csv"))
    check("a harness killed by the SIGINT the sweep passed on: 'stopped', not FAILED; exit 130",
          proc.returncode == 130 and re.search(r"^stopped h1_dh8_s1 .*SIGINT", out, re.M)
          and "FAILED" not in out, out)
    check(f"... its log footer says interrupted: {footer}",
          "exit status -2 (interrupted" in footer, footer)
    check("... and its summary row too", rows and rows[0]["status"] == "interrupted", str(rows))


def main():
    try:
        for name, fn in [("two writers", test_two_writers), ("stale lock", test_stale_lock),
                         ("durable order", test_durable_order),
                         ("--resume with another config", test_resume_diff),
                         ("sweep | head", test_sweep_head),
                         ("interrupted before its handlers", test_interrupted_before_handlers)]:
            run_check(name, fn)
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
