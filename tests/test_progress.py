#!/usr/bin/python3
# suite: the progress line's tokens/s is the training steps' rate, as the time line says
# suite-args: --harness {harness}
"""The progress line's tokens/s against the run's own `time:` line, read from the log.

A run with frequent held-out evaluations (many batches each) and periodic checkpoints, the last
a few steps before the end, prints a plain progress line per step (stderr is not a terminal).
Its tokens/s counts the training steps alone, as the time line does: the last progress line
(after the last training step) must give the time line's figure, to the rounding of the two
prints, however long the evaluations and checkpoints in between took. A rate diluted by the
evaluations (too low) or measured from the last checkpoint only (too high) is far off. Every
progress line must also say how many steps it counts ("step N/M"), N rising by one, and the
resumed session of an interrupted run is checked the same way (its own steps, its own time line).
No timing is asserted: both figures come from the same run's log.
usage: tests/test_progress.py [--harness PATH] [--keep]
"""
import os
import re
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, run_check, temp_suite  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CONFIG = """model: {vocab_size: 64, d_model: 32, n_head: 4, n_layer: 1, seq_len: 32}
train: {steps: STEPS, batch_size: 8, warmup_steps: 5, threads: 1}
data: {task: induction, max_period: 8}
output: {path: OUT, log_every: 1, eval_every: 5, eval_batches: 16, checkpoint_every: 7,
         probes: 2, prune_step: 0}
"""
PROGRESS = re.compile(r"^step (\d+)/(\d+)  loss \S+  eval \S+  ([\d.]+)k tok/s  elapsed", re.M)
TIME = re.compile(r"^time: (\d+) steps in [\d.]+ s \([\d.]+ ms/step, (\d+) tokens/s\)", re.M)


def write_config(tmp, name, steps):
    path = os.path.join(tmp, name + ".yaml")
    with open(path, "w") as f:
        f.write(CONFIG.replace("STEPS", str(steps)).replace("OUT", os.path.join(tmp, name + ".h5")))
    return path


def compare(name, log, first, steps):
    """The progress lines of one session (steps first+1 ... steps) against its time line."""
    lines = [(int(a), int(b), 1000 * float(r)) for a, b, r in PROGRESS.findall(log)]
    timeline = TIME.search(log)
    check(f"{name}: one progress line per step, {first + 1} … {steps}, and a time line",
          [s for s, _, _ in lines] == list(range(first + 1, steps + 1)) and all(m == steps for _, m, _ in lines)
          and timeline is not None and int(timeline.group(1)) == steps - first, log[-600:])
    if not lines or timeline is None:
        return
    shown, want = lines[-1][2], float(timeline.group(2))
    # %.1fk and %.0f: the two prints round the same figure to 50 and 0.5 tokens/s
    check(f"{name}: the last progress line's tokens/s is the time line's "
          f"({shown:.0f} against {want:.0f}, within 5%: evaluations and checkpoints excluded)",
          abs(shown - want) <= 0.05 * want and abs(shown - want) <= 50.5 + 1e-6 * want, log[-600:])


def test_one_session(harness, tmp):
    cfg = write_config(tmp, "whole", 40)  # checkpoints at 7 … 35, evaluations every 5 steps
    p = subprocess.run([harness, cfg], capture_output=True, text=True, cwd=ROOT, timeout=600)
    check("the run completes (exit 0)", p.returncode == 0, p.stderr[-400:])
    compare("one session with evaluations and checkpoints", p.stderr, 0, 40)


def test_resumed_session(harness, tmp):
    cfg = write_config(tmp, "resumed", 400)
    p = subprocess.Popen([harness, cfg], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    seen = ""
    while "step 20/" not in seen:  # interrupt once it has trained a while
        line = p.stderr.readline()
        if not line:
            break
        seen += line
    p.send_signal(signal.SIGINT)
    seen += p.stderr.read()
    p.wait(timeout=600)
    stopped = [int(s) for s, _, _ in PROGRESS.findall(seen)]
    if not check("the first session stops on SIGINT (exit 130) after some steps",
                 p.returncode == 130 and stopped, seen[-400:]):
        return
    q = subprocess.run([harness, cfg, "--resume"], capture_output=True, text=True, cwd=ROOT, timeout=600)
    m = re.search(r"resuming from \S+ at step (\d+) of 400", q.stderr)
    check("--resume continues the run (exit 0)", q.returncode == 0 and m is not None, q.stderr[-400:])
    if m:
        compare("the resumed session", q.stderr, int(m.group(1)), 400)


def suite(harness, tmp):
    run_check("one session", lambda: test_one_session(harness, tmp))
    run_check("a resumed session", lambda: test_resumed_session(harness, tmp))


if __name__ == "__main__":
    sys.exit(temp_suite(sys.argv, "heads-progress-", suite))
