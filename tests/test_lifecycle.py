#!/usr/bin/python3
# suite: no trained step thrown away: reruns refuse, --resume finishes (signals, the study, the last write)
# suite-args: {harness}
"""tests/test_lifecycle.py HARNESS: the run lifecycle keeps every trained step
(docs/reliability.md, "Run states"). One check per line, then "N passed, M failed".

A small run (200 steps, a checkpoint every 25, one progress line per step, one thread) is
trained undisturbed once: the reference. Then:
  signals     SIGINT, SIGTERM and SIGKILL, each at two random steps (seeded, printed) after the
              first checkpoint: a plain rerun exits 2 naming the state and --resume, and leaves
              every file of the run byte-identical (sha256); --resume then completes, and every
              dataset but the timing column equals the reference's bit for bit
  gates       a run with learned head gates (train.head_l0), stopped by SIGINT and by SIGKILL at
              random steps: --resume equals its undisturbed run bit for bit
  study       out of memory (the first allocation after the trained checkpoint's rename fails,
              LD_PRELOAD shim, FAULT_AFTER) and SIGKILL at the same point: the checkpoint says
              "trained", `harness check` and a plain rerun name the pending study, --resume (or
              `harness analyze`) prints that no training step is repeated, prints no step line,
              and ends equal to the reference
  last write  the final rename fails: the complete run is kept in its temporary, named in the
              message; `check` on the path names it, `check` on the temporary says it is kept;
              a plain rerun refuses and does not delete it; --resume moves it into place: the
              reference's bits, and nothing left over
  checkpoint  the first (then the third) periodic checkpoint's rename fails: training goes on to
              complete (exit 0), one warning naming that step, the reference's bits
  memory      the T = 4096 case (seq_len 4096, n_head 32, d_head 4, d_model 128, batch_size 4,
              two layers) with output.max_memory below its estimated peak (so that the
              machine's memory does not decide): refused at once (exit 2, no file, no step
              line) naming the peak, the largest part and the keys that shrink it; --shapes
              prints both peaks by part, the parts adding up to them
  small disk  (root: a 64 KiB tmpfs, else skipped) a run whose file and checkpoint cannot fit
              is refused before step 1, naming the space it needs and has; nothing is left
  full disk   (root: a 1 MiB tmpfs, else skipped) the disk filled by another process at step 60:
              the periodic checkpoints after it are skipped with a warning each, and the run
              completes with the reference's bits (the room for its end was reserved at step 0)
  write fails a disk that stays full from the first write after the last periodic checkpoint
              (and after the trained one): the shim's FAULT_FULL, which no reserve can help:
              exit 2, and the last line names the checkpoint that survives, its step and the
              exact command that continues it; that command, run as it is, ends with the
              reference's bits
  refused     a refused run (--resume with nothing to resume, a train.init_from that is not
              there) removes the directories of output.path it created
  in progress `harness check`, scripts/plot and scripts/report on the path of a run that is
              training: exit 2, no traceback, naming the writer (pid, host, since, step) and its
              checkpoint, which plot then reads (exit 0) and check passes, naming the run
              that writes it instead of --resume
  sweep       a `-j 2` sweep of three runs, stopped with SIGINT, SIGTERM, or SIGKILL (the sweep
              and its harnesses) once both running runs passed a random step: `--status` calls
              them interrupted (resumable at step N); the same sweep again resumes each with
              --resume, its log appended to ("# resumed at step N"), and every run file equals
              the uninterrupted sweep's; a complete run of an older config is "stale" in
              --status and left out (and named) by compare
"""
import glob
import hashlib
import math
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import injection as inj  # noqa: E402
from checks import check, finish, run_check  # noqa: E402

STEPS, EVERY = 200, 25
CONFIG = """\
model: {{vocab_size: 16, d_model: 16, n_head: 2, n_layer: 1, seq_len: 16}}
train: {{steps: {steps}, batch_size: 8, lr: 3.0e-3, warmup_steps: 2, seed: 3, threads: 1}}
data: {{task: induction, min_period: 2, max_period: 4}}
output: {{path: {path}, log_every: 1, eval_every: 50, eval_batches: 1, attn_every: 50, probes: 2,
         checkpoint_every: {every}}}
"""
HARNESS = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "harness")
SHIM = inj.shim_path(HARNESS)
TOP = tempfile.mkdtemp(prefix="heads-lifecycle-")
SEED = 24
REF = os.path.join(TOP, "ref", "run.h5")


def setup(name, steps=STEPS, gates=""):
    """A fresh directory with the config writing run.h5 there: (config, path); gates: more keys
    of train (", head_l0: 1.0")."""
    d = os.path.join(TOP, name)
    os.makedirs(d)
    config = os.path.join(d, "run.yaml")
    path = os.path.join(d, "run.h5")
    with open(config, "w") as f:
        text = CONFIG.format(steps=steps, every=EVERY, path=path)
        f.write(text.replace("threads: 1}", "threads: 1" + gates + "}"))
    return config, path


def harness(*args, env=None):
    return subprocess.run([HARNESS, *args], capture_output=True, text=True, errors="replace", timeout=120, env=env)


def hashes(directory):
    """{file: sha256} of a run's files (the lock file aside: it is no part of the run)."""
    out = {}
    for f in sorted(os.listdir(directory)):
        if not f.endswith(".lock") and not f.endswith(".yaml"):
            with open(os.path.join(directory, f), "rb") as fh:
                out[f] = hashlib.sha256(fh.read()).hexdigest()
    return out


def same_as_ref(path):
    return os.path.exists(path) and inj.status(path) == "complete" and inj.differences(path, REF) == []


def leftovers(directory):
    return [f for f in os.listdir(directory) if f not in ("run.yaml", "run.h5")]


def refused_untouched(config, directory, want):
    """A plain rerun: exit 2 naming `want`, every file byte-identical. (ok, its message)"""
    before = hashes(directory)
    p = harness(config)
    msg = inj.last_line(p.stderr)
    return p.returncode == 2 and want in p.stderr and "step 1/" not in p.stderr \
        and hashes(directory) == before, msg


def test_reference():
    config, path = setup("ref")
    p = harness(config)
    check("the undisturbed run completes", p.returncode == 0 and inj.status(path) == "complete",
          p.stderr[-300:])


def stop_at(config, sig, step):
    """Start a run and send sig when it prints step `step`: the step it printed last."""
    proc = subprocess.Popen([HARNESS, config], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, errors="replace")
    last = 0
    for line in proc.stderr:
        m = re.match(r"step (\d+)/", line)
        if m:
            last = int(m.group(1))
            if last >= step:
                proc.send_signal(sig)
                break
    for line in proc.stderr:
        m = re.match(r"step (\d+)/", line)
        if m:
            last = int(m.group(1))
    proc.wait(60)
    return last, proc.returncode


def stopped_run(name, sig, step, gates=""):
    """A fresh run (setup) stopped by sig at `step` (stop_at): (config, path, last, rc). A run that
    ended before the signal reached it (on a loaded machine this reader sees the step lines late)
    is started again in a fresh directory and stopped earlier, up to three times."""
    for attempt in range(4):
        config, path = setup(name if attempt == 0 else f"{name}_again{attempt}", gates=gates)
        last, rc = stop_at(config, sig, step)
        if rc != 0:
            break
        earlier = EVERY + 5 + (step - EVERY - 5) // 2
        print(f"# {sig.name} at step {step} came after the run ended (exit 0); again at step {earlier}")
        step = earlier
    return config, path, last, rc


def test_signals():
    rng = random.Random(SEED)
    print(f"# seed {SEED}")
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        for k in range(2):
            step = rng.randrange(EVERY + 5, STEPS - 20)
            name = f"{sig.name.lower()}_{k}"
            config, path, last, rc = stopped_run(name, sig, step)
            directory = os.path.dirname(path)
            want = "interrupted run" if sig != signal.SIGKILL else "checkpoint at step"
            ok, msg = refused_untouched(config, directory, want)
            check(f"{sig.name} at step {last} (exit {rc}): a plain rerun refuses, every file "
                  f"byte-identical: {msg[:160]}", ok and "--resume" in msg, msg)
            p = harness(config, "--resume")
            check(f"{sig.name} at step {last}: --resume completes with the reference's bits",
                  p.returncode == 0 and same_as_ref(path) and leftovers(directory) == [],
                  f"exit {p.returncode} {inj.last_line(p.stderr)} {leftovers(directory)}")


GATES = ", head_l0: 1.0"  # learned head gates: each step's gates from (seed, step)


def test_gates():
    """Learned head gates (train.head_l0): SIGINT and SIGKILL at a random step, then --resume,
    equal the undisturbed gated run bit for bit (log_alpha and its AdamW moments in the
    checkpoint, the P(open) trajectory read back, the noise a function of the step)."""
    ref_config, ref = setup("gates_ref", gates=GATES)
    p = harness(ref_config)
    check("the undisturbed gated run completes, with its gates", p.returncode == 0 and inj.status(ref) == "complete"
          and {"params/log_alpha", "gates/p_open", "heads/kept"} <= set(inj.numbers(ref)), p.stderr[-300:])
    rng = random.Random(SEED + 1)
    for sig in (signal.SIGINT, signal.SIGKILL):
        step = rng.randrange(EVERY + 5, STEPS - 20)
        config, path, last, rc = stopped_run(f"gates_{sig.name.lower()}", sig, step, gates=GATES)
        p = harness(config, "--resume")
        diff = inj.differences(path, ref) if os.path.exists(path) else ["no file"]
        check(f"gated run, {sig.name} at step {last} (exit {rc}): --resume equals the undisturbed run bit for bit "
              "(/params/log_alpha, /gates/p_open, /heads/kept included)",
              p.returncode == 0 and inj.status(path) == "complete" and diff == [],
              f"exit {p.returncode} {inj.last_line(p.stderr)} differences {diff[:5]}")


def calls(config):
    """{kind: calls} of an undisturbed run of config (then its files are removed)."""
    counted, p = inj.count_calls(HARNESS, SHIM, config)
    directory = os.path.dirname(config)
    for f in os.listdir(directory):
        if f != "run.yaml":
            os.unlink(os.path.join(directory, f))
    return counted


def test_study():
    if os.environ.get("SANITIZER_REPORTS"):  # ASan's malloc stands before the shim's
        print("# study: skipped under the sanitizers (the shim's allocation faults do not fire)")
        return
    config, path = setup("count")
    renames = calls(config)["rename"]  # the periodic checkpoints, the trained one, the result
    for fault, how in (("fail", "out of memory"), ("kill", "SIGKILL")):
        for finisher in ("--resume", "analyze"):
            config, path = setup(f"study_{fault}_{finisher.strip('-')}")
            directory = os.path.dirname(path)
            env = inj.shim_env(SHIM, after=f"rename:{renames - 1}", **{fault: "malloc:1"})
            p = subprocess.run([HARNESS, config], capture_output=True, text=True, errors="replace", env=env,
                               timeout=120)
            ckpt = path + ".ckpt"
            check(f"{how} inside the study (exit {p.returncode}): no result, the checkpoint says "
                  f"trained", p.returncode != 0 and not os.path.exists(path)
                  and inj.status(ckpt) == "trained" and "head" not in p.stdout.lower(),
                  f"{p.returncode} {os.listdir(directory)} {inj.last_line(p.stderr)}")
            c = harness("check", path)
            check(f"... harness check names the pending study: {inj.last_line(c.stderr)[:120]}",
                  c.returncode == 2 and "study is pending" in c.stderr, c.stdout + c.stderr)
            ok, msg = refused_untouched(config, directory, "study is pending")
            check(f"... a plain rerun refuses, files byte-identical: {msg[:140]}",
                  ok and "--resume runs only the study" in msg, msg)
            p = harness(config, "--resume") if finisher == "--resume" else harness("analyze", path)
            check(f"... {finisher} runs only the study (the log says so, no step line) and ends "
                  f"with the reference's bits",
                  p.returncode == 0 and "no training step is repeated" in p.stderr
                  and not re.search(r"^step \d+/", p.stderr, re.M) and same_as_ref(path)
                  and leftovers(directory) == [],
                  f"exit {p.returncode}: {p.stderr[-400:]} {leftovers(directory)}")


def test_last_write():
    config, path = setup("count2")
    renames = calls(config)["rename"]
    config, path = setup("last_write")
    directory = os.path.dirname(path)
    p = subprocess.run([HARNESS, config], capture_output=True, text=True, errors="replace", timeout=120,
                       env=inj.shim_env(SHIM, fail=f"rename:{renames}"))
    temps = glob.glob(path + ".tmp.*")
    check(f"the final rename fails (exit {p.returncode}): the complete run is kept in its "
          f"temporary, which the message names: {inj.last_line(p.stderr)[:160]}",
          p.returncode == 2 and len(temps) == 1 and inj.status(temps[0]) == "complete"
          and temps[0] in p.stderr and "--resume" in p.stderr, f"{os.listdir(directory)}")
    if len(temps) != 1:
        return
    c = harness("check", path)
    check(f"... check on the path names the stranded result: {inj.last_line(c.stderr)[:140]}",
          c.returncode == 2 and "could not be moved into place" in c.stderr, c.stderr)
    c = harness("check", temps[0])
    check(f"... check on the temporary says it is kept: {c.stdout.strip()[-150:]}",
          c.returncode == 0 and "kept because it could not be moved into place" in c.stdout,
          c.stdout)
    ok, msg = refused_untouched(config, directory, "could not be moved into place")
    check(f"... a plain rerun refuses and keeps it: {msg[:140]}",
          ok and os.path.exists(temps[0]) and "--resume moves it into place" in msg, msg)
    p = harness(config, "--resume")
    check("... --resume moves it into place: the reference's bits, nothing left over",
          p.returncode == 0 and same_as_ref(path) and leftovers(directory) == []
          and "nothing was trained" in p.stderr, f"{p.stderr[-300:]} {leftovers(directory)}")


def test_checkpoint_fails():
    for n in (1, 3):  # the rename of the first, then of the third periodic checkpoint fails
        config, path = setup(f"ckpt_fails_{n}")
        p = subprocess.run([HARNESS, config], capture_output=True, text=True, errors="replace", timeout=120,
                           env=inj.shim_env(SHIM, fail=f"rename:{n}"))
        warnings = re.findall(r"warning: the checkpoint of step (\d+) was not written", p.stderr)
        check(f"checkpoint {n}'s rename fails: training goes on to complete, one warning "
              f"(step {warnings}), the reference's bits",
              p.returncode == 0 and warnings == [str(EVERY * n)] and same_as_ref(path),
              p.stderr[-300:])


def test_memory():
    d = os.path.join(TOP, "memory")
    os.makedirs(d)
    config = os.path.join(d, "big.yaml")
    with open(config, "w") as f:
        f.write("model: {vocab_size: 16, d_model: 128, n_head: 32, d_head: 4, n_layer: 2, "
                "seq_len: 4096}\ntrain: {steps: 10, batch_size: 4, seed: 1, threads: 1}\n"
                "data: {task: induction}\n"
                f"output: {{path: {d}/r.h5, max_memory: 64}}\n")
    p = harness("--shapes", config)
    units = {"B": 1, "KiB": 2 ** 10, "MiB": 2 ** 20, "GiB": 2 ** 30, "TiB": 2 ** 40}
    parts = [(float(v) * units[u], study) for v, u, study in
             re.findall(r"^  ([\d.]+) (B|KiB|MiB|GiB|TiB) +(study: )?\S", p.stdout, re.M)]
    peaks = dict((k, float(v) * units[u]) for k, v, u in
                 re.findall(r"^  (training|with the study) +([\d.]+) (\w+)", p.stdout, re.M))
    train = sum(b for b, study in parts if not study)
    check(f"--shapes prints the training and study peaks by part: {peaks}",
          p.returncode == 0 and len(parts) >= 5 and len(peaks) == 2
          and math.isclose(peaks["training"], train, rel_tol=0.01)
          and math.isclose(peaks["with the study"], sum(b for b, _ in parts), rel_tol=0.01),
          p.stdout[-900:])
    p = harness(config)
    check(f"T = 4096 over output.max_memory: refused at step 0: {inj.last_line(p.stderr)[:200]}",
          p.returncode == 2 and "refused before step 1" in p.stderr and "largest part" in p.stderr
          and "shrink it" in p.stderr and "64.0 MiB output.max_memory allows" in p.stderr
          and "step 1/" not in p.stderr and os.listdir(d) == ["big.yaml"], p.stderr)


PEAK_RSS = ("import resource, subprocess, sys\n"
            "p = subprocess.run(sys.argv[1:], capture_output=True)\n"
            "print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")


def estimate_bytes(config):
    """The estimated peak with the study that --shapes prints, in bytes."""
    p = harness("--shapes", config)
    units = {"B": 1, "KiB": 2 ** 10, "MiB": 2 ** 20, "GiB": 2 ** 30, "TiB": 2 ** 40}
    found = re.search(r"^  with the study +([\d.]+) (\w+)", p.stdout, re.M)
    return float(found.group(1)) * units[found.group(2)] if found else None


def test_memory_peak():
    """Each run's peak RSS (of its own process: a fresh Python parent each, so the children's
    maximum is this run's) is at most the estimate, and the estimate at most 1.5 times it."""
    if os.environ.get("SANITIZER_REPORTS"):
        print("# memory peak: skipped under the sanitizers (their shadow memory triples the RSS)")
        return
    shapes = [("thin heads, T 256", "d_model: 64, n_head: 8, n_layer: 2, seq_len: 256", 8, 256, 1),
              ("wide heads, 2 threads", "d_model: 64, n_head: 2, n_layer: 2, seq_len: 128", 16, 64, 2),
              ("one head, T 1024", "d_model: 32, n_head: 1, n_layer: 1, seq_len: 1024", 1, 1024, 1)]
    for i, (name, model, batch, probe_len, threads) in enumerate(shapes):
        d = os.path.join(TOP, f"peak{i}")
        os.makedirs(d)
        config = os.path.join(d, "run.yaml")
        with open(config, "w") as f:
            f.write(f"model: {{vocab_size: 16, {model}}}\n"
                    f"train: {{steps: 2, batch_size: {batch}, seed: 1, threads: {threads}}}\n"
                    "data: {task: induction, min_period: 2, max_period: 8}\n"
                    f"output: {{path: {d}/run.h5, log_every: 1, eval_every: 1, eval_batches: 2, "
                    f"attn_every: 1, probes: 4, probe_len: {probe_len}}}\n")
        estimate = estimate_bytes(config)
        env = dict(os.environ, OMP_WAIT_POLICY="passive")
        p = subprocess.run([sys.executable, "-c", PEAK_RSS, HARNESS, config], capture_output=True,
                           text=True, timeout=300, env=env)
        rc, peak_kib = (int(x) for x in p.stdout.split())
        peak = peak_kib * 1024.0
        check(f"{name}: estimate {estimate / 2 ** 20:.1f} MiB, peak RSS {peak / 2 ** 20:.1f} MiB: "
              "peak <= estimate <= 1.5 x peak",
              rc == 0 and estimate is not None and peak <= estimate <= 1.5 * peak, p.stdout + p.stderr)


def test_small_disk():
    d = os.path.join(TOP, "small")
    os.makedirs(d)
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", d],
                                           capture_output=True).returncode != 0:
        print("# small disk: skipped (mounting a tmpfs needs root)")
        return
    try:
        config = os.path.join(TOP, "small.yaml")
        with open(config, "w") as f:
            f.write(CONFIG.format(steps=STEPS, every=EVERY, path=os.path.join(d, "run.h5")))
        p = harness(config)
        check(f"a disk too small for the file and its checkpoints: refused before step 1: "
              f"{inj.last_line(p.stderr)[:160]}",
              p.returncode == 2 and "refused before step 1" in p.stderr and "MiB are free" in p.stderr
              and "step 1/" not in p.stderr and os.listdir(d) == [], p.stderr + str(os.listdir(d)))
    finally:
        subprocess.run(["umount", d], capture_output=True)


def fill_up(where):
    """Another process's file that takes every free byte of the file system at where."""
    with open(os.path.join(where, "filler"), "wb") as f:
        try:
            while True:
                f.write(b"\0" * (1 << 16))
                f.flush()
        except OSError:
            pass


def test_full_disk():
    d = os.path.join(TOP, "full")
    os.makedirs(d)
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", d],
                                           capture_output=True).returncode != 0:
        print("# full disk: skipped (mounting a tmpfs needs root)")
        return
    try:
        config = os.path.join(TOP, "full.yaml")
        path = os.path.join(d, "run.h5")
        with open(config, "w") as f:
            f.write(CONFIG.format(steps=STEPS, every=EVERY, path=path))
        proc = subprocess.Popen([HARNESS, config], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True, errors="replace")
        said, filled = [], False
        for line in proc.stderr:
            said.append(line)
            if not filled and re.match(r"step 6\d/", line):
                fill_up(d)
                filled = os.statvfs(d).f_bavail == 0
        proc.wait(120)
        err = "".join(l for l in said if not l.startswith("step "))
        skipped = [int(n) for n in re.findall(r"the checkpoint of step (\d+) was not written", err)]
        check(f"the disk filled by another process at step 60: the checkpoints of steps {skipped} are "
              "skipped with a warning each, the run completes with the reference's bits, nothing is left",
              filled and proc.returncode == 0 and skipped and min(skipped) <= 100 and same_as_ref(path)
              and sorted(os.listdir(d)) == ["filler", "run.h5"],
              f"filled {filled}, exit {proc.returncode}: {err[-500:]} {os.listdir(d)}")
    finally:
        subprocess.run(["umount", d], capture_output=True)


def test_write_fails():
    config, path = setup("count3")
    renames = calls(config)["rename"]  # the periodic checkpoints, the trained one, the result
    last_periodic = (STEPS - 1) // EVERY * EVERY
    for after, want, does in ((renames - 2, f"a checkpoint at step {last_periodic} of {STEPS}", "continues from there"),
                              (renames - 1, f"every step of {STEPS} done", "runs only its end-of-run study")):
        config, path = setup(f"write_fails_{after}")
        directory = os.path.dirname(path)
        p = subprocess.run([HARNESS, config], capture_output=True, text=True, errors="replace", timeout=120,
                           env=inj.shim_env(SHIM, after=f"rename:{after}", full="write:1"))
        last = inj.last_line(p.stderr)
        found = re.search(r"kept: (.*) in (\S+); .*`([^`]+)` (.*)$", last)
        check(f"the disk stays full from the write after rename {after}: exit 2, the last line names the "
              f"checkpoint, its step and the command: {last[:200]}",
              p.returncode == 2 and found is not None and want in found.group(1)
              and found.group(2) == path + ".ckpt" and found.group(4).startswith(does), p.stderr[-500:])
        if found:
            r = subprocess.run(shlex.split(found.group(3)), capture_output=True, text=True, errors="replace",
                               timeout=120)
            check(f"... `{found.group(3)[-60:]}` as it is: the reference's bits, nothing left over",
                  r.returncode == 0 and same_as_ref(path) and leftovers(directory) == [],
                  f"exit {r.returncode}: {r.stderr[-300:]} {leftovers(directory)}")


def test_refused():
    top = os.path.join(TOP, "refused")
    os.makedirs(top)
    config = os.path.join(top, "run.yaml")
    made = os.path.join(top, "new")
    with open(config, "w") as f:
        f.write(CONFIG.format(steps=STEPS, every=EVERY, path=os.path.join(made, "deeper", "run.h5")))
    for args, why in ((["--resume"], "nothing to resume"),
                      (["--set", f"train.init_from={top}/missing.h5"], "missing.h5")):
        p = harness(config, *args)
        check(f"a refused run ({why}): exit 2, and the directories it created are gone",
              p.returncode == 2 and why in p.stderr and not os.path.exists(made), p.stderr[-300:])


def test_in_progress():
    config, path = setup("in_progress", steps=100000)
    proc = subprocess.Popen([HARNESS, config], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, errors="replace")
    try:
        for line in proc.stderr:
            if re.match(r"step (\d+)/", line) and int(line.split()[1].split("/")[0]) > EVERY + 1:
                break
        writer = rf"being written by pid {proc.pid} on \S+ since \d{{4}}-\S+, step \d+ of 100000"
        c = harness("check", path)
        check(f"check on a run in progress: {inj.last_line(c.stderr)[:150]}",
              c.returncode == 2 and re.search(writer, c.stderr) and ".ckpt" in c.stderr, c.stderr)
        for script in ("plot", "report"):
            p = subprocess.run([PY, os.path.join(inj.ROOT, "scripts", script), path],
                               capture_output=True, text=True, errors="replace", timeout=120)
            check(f"scripts/{script} on it: exit 2, no traceback, the writer and the checkpoint "
                  f"named", p.returncode == 2 and "Traceback" not in p.stderr
                  and re.search(writer, p.stderr) and path + ".ckpt" in p.stderr, p.stderr[-400:])
        c = harness("check", path + ".ckpt")
        check(f"check on its checkpoint: valid, of a run in progress (not '--resume'): {c.stdout.strip()[-120:]}",
              c.returncode == 0 and "of a run in progress (being written by pid" in c.stdout
              and "--resume" not in c.stdout, c.stdout + c.stderr)
        p = subprocess.run([PY, os.path.join(inj.ROOT, "scripts", "plot"), path + ".ckpt"],
                           capture_output=True, text=True, errors="replace", timeout=120)
        check("... and plot reads the checkpoint", p.returncode == 0, p.stderr[-300:])
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)


def test_holder_line():
    """The lock file's holder line, which the harness rewrites at every progress line, is never
    found empty by a reader (a reader then names no writer: test_in_progress's message flaked)."""
    d = os.path.join(TOP, "holder")
    os.makedirs(d)
    config, path = os.path.join(d, "run.yaml"), os.path.join(d, "run.h5")
    with open(config, "w") as f:
        f.write("model: {vocab_size: 16, d_model: 16, n_head: 2, n_layer: 1, seq_len: 8}\n"
                "train: {steps: 5000000, batch_size: 1, seed: 1, threads: 1}\n"
                "data: {task: induction, min_period: 2, max_period: 3}\n"
                f"output: {{path: {path}, log_every: 1, eval_every: 1000000, attn_every: 1000000, "
                "probes: 1, probe_len: 8}\n")
    proc = subprocess.Popen([HARNESS, config], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, errors="replace")
    reads = empty = 0
    try:
        for line in proc.stderr:
            if line.startswith("step 2/"):
                break
        end = time.time() + 1.5
        while time.time() < end:
            with open(path + ".lock") as f:
                text = f.read()
            reads += 1
            empty += not text.strip()
        check(f"the lock's holder line, rewritten at every step (log_every 1): never empty in {reads} "
              "reads during the run", reads > 1000 and empty == 0, f"{empty} of {reads} reads empty")
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)


SWEEP = os.path.join(inj.ROOT, "scripts", "sweep")
PY = "/usr/bin/python3"
RUNS = ("h1_dh16_s3", "h2_dh8_s3", "h4_dh4_s3")


def sweep(exp, res, *args):
    return subprocess.run([PY, SWEEP, exp, "--results", res, *args], capture_output=True,
                          text=True, errors="replace", timeout=300, env=dict(os.environ, HARNESS=HARNESS))


def experiment(name):
    d = os.path.join(TOP, name)
    os.makedirs(d)
    config = os.path.join(d, "base.yaml")
    with open(config, "w") as f:
        f.write(CONFIG.format(steps=STEPS, every=EVERY, path=os.path.join(d, "unused.h5")))
    exp = os.path.join(d, "exp.yaml")
    with open(exp, "w") as f:
        f.write(f"name: exp\nbase: {config}\ngrid: {{n_head: [1, 2, 4]}}\n")
    return exp, os.path.join(d, "results"), os.path.join(d, "results", "exp")


def progress(log):
    try:
        with open(log) as f:
            steps = re.findall(r"^step (\d+)/", f.read(), re.M)
        return int(steps[-1]) if steps else 0
    except OSError:
        return 0


def test_sweep():
    exp, res, ref_dir = experiment("sweep_ref")
    p = sweep(exp, res, "-j", "2")
    check("the uninterrupted -j 2 sweep completes", p.returncode == 0, p.stdout[-300:])
    rng = random.Random(SEED + 1)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        exp, res, outdir = experiment(f"sweep_{sig.name.lower()}")
        step = rng.randrange(EVERY + 5, STEPS // 2)
        proc = subprocess.Popen([PY, SWEEP, exp, "--results", res, "-j", "2"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env=dict(os.environ, HARNESS=HARNESS))
        logs = [os.path.join(outdir, r + ".log") for r in RUNS[:2]]
        while proc.poll() is None and min(progress(log) for log in logs) < step:
            time.sleep(0.01)
        writers = []
        for r in RUNS[:2]:  # the harnesses, from their output locks ("pid N on ...")
            try:
                with open(os.path.join(outdir, r + ".h5.lock")) as f:
                    writers.append(int(f.read().split()[1]))
            except (OSError, IndexError, ValueError):
                pass
        proc.send_signal(sig)
        if sig == signal.SIGKILL:
            for pid in writers:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        proc.wait(120)
        time.sleep(0.5)  # a harness the sweep's death stopped (SIGTERM) saves its state
        reached = [progress(log) for log in logs]
        st = subprocess.run([PY, SWEEP, "--status", outdir], capture_output=True, text=True, errors="replace",
                            timeout=60, env=dict(os.environ, HARNESS=HARNESS)).stdout
        interrupted = re.findall(r"^interrupted +(\S+) .*resumable at step (\d+)", st, re.M)
        # a run that reached its last step before the signal landed is complete (a loaded
        # machine); every other one that started is interrupted, and one at least is
        finished = [r for r in RUNS[:2] if inj.status(os.path.join(outdir, r + ".h5")) == "complete"]
        check(f"sweep -j 2, {sig.name} at steps {reached}: --status calls the runs it stopped "
              f"interrupted, resumable: {interrupted}",
              interrupted and sorted([n for n, _ in interrupted] + finished) == sorted(RUNS[:2]), st)
        p = sweep(exp, res, "-j", "2")
        resumed = [r for r in RUNS[:2]
                   if "# resumed at step" in open(os.path.join(outdir, r + ".log")).read()]
        differ = {r: inj.differences(os.path.join(outdir, r + ".h5"),
                                     os.path.join(ref_dir, r + ".h5")) for r in RUNS}
        check(f"... the sweep again resumes them (logs appended: {resumed}) and every file "
              f"equals the uninterrupted sweep's",
              p.returncode == 0 and sorted(resumed) == sorted(n for n, _ in interrupted)
              and all(d == [] for d in differ.values())
              and all(open(os.path.join(outdir, r + ".log")).read().startswith("# ")
                      for r in RUNS), f"{p.stdout[-400:]} {differ}")
    # an older config: the experiment asks for another learning rate now
    with open(exp, "a") as f:
        f.write("set: {train.lr: 0.002}\n")
    shutil.copyfile(exp, os.path.join(outdir, "experiment.yaml"))
    st = subprocess.run([PY, SWEEP, "--status", outdir], capture_output=True, text=True, errors="replace",
                        timeout=60, env=dict(os.environ, HARNESS=HARNESS)).stdout
    check("a run of an older config is stale in --status, naming the key, old -> new",
          len(re.findall(r"^stale +\S+ +.*lr 0.003 -> 0.002", st, re.M)) == 3, st)
    c = subprocess.run([PY, os.path.join(inj.ROOT, "scripts", "compare"), outdir],
                       capture_output=True, text=True, errors="replace", timeout=60,
                       env=dict(os.environ, HARNESS=HARNESS))
    check(f"compare leaves the stale runs out and names them: {inj.last_line(c.stdout + c.stderr)[:140]}",
          "stale" in c.stdout + c.stderr and "Traceback" not in c.stderr, c.stdout + c.stderr)


def main():
    if not check("the shim is built beside the harness", os.path.exists(SHIM), SHIM):
        return finish()
    try:
        run_check("reference", test_reference)
        run_check("signals", test_signals)
        run_check("gates", test_gates)
        run_check("study", test_study)
        run_check("last write", test_last_write)
        run_check("checkpoint", test_checkpoint_fails)
        run_check("memory", test_memory)
        run_check("memory peak", test_memory_peak)
        run_check("small disk", test_small_disk)
        run_check("full disk", test_full_disk)
        run_check("write fails", test_write_fails)
        run_check("refused", test_refused)
        run_check("in progress", test_in_progress)
        run_check("holder line", test_holder_line)
        run_check("sweep", test_sweep)
    finally:
        shutil.rmtree(TOP, ignore_errors=True)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
