#!/usr/bin/python3
# suite: SIGKILL at 60 points, then --resume: bitwise the uninterrupted run
# suite-args: {harness}
"""tests/test_crash.py HARNESS [--points N]: SIGKILL at any moment, then --resume.

A tiny run (tests/injection.py, 40 steps, a checkpoint every 10 steps) is killed with SIGKILL at
N points (default 60, at least 50) spread over the whole run, then finished with --resume (or
started again when it died before its first checkpoint). The points:
  - at the k-th write, fsync or rename call, through the LD_PRELOAD shim (FAULT_KILL): a spread
    of the writes (which are the checkpoints' and the final file's: HDF5's pwrite64 calls) and
    every fsync and rename, so every step of the durable order (write, fsync, rename, fsync of
    the directory) is hit, in a checkpoint and in the final write;
  - at random times (seeded, printed) from outside, while every write call sleeps 2 ms
    (FAULT_DELAY) so that the checkpoints and the final write take a good part of the run.
After every kill: no file but output.path (and temporaries, which nothing reads: one killed in its
final flush may say "complete" over torn data) claims status "complete", and output.path, if it
is there, is complete and the run's own; a run killed after its rename leaves a stale lock and
checkpoint, which do not block: --resume says there is nothing to resume. After the resume: output.path is complete and bitwise the
uninterrupted run in every dataset but the timing column (/train/loss, /params, /attn/maps, ...),
`harness check` passes it, and no temporary file is left. The closing lines say how many points
were tried.
"""
import os
import random
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import injection as inj  # noqa: E402
from checks import check, finish  # noqa: E402

STEPS, EVERY = 40, 10


def clean(work):
    for f in os.listdir(work):
        if f != "tiny.yaml":
            os.unlink(os.path.join(work, f))


def after_kill(harness, work, ref):
    """What a killed run left: [] when it is fine, else the problems."""
    path = os.path.join(work, "run.h5")
    # Temporaries (run.h5.tmp.XXXXXX, run.h5.ckpt.tmp.XXXXXX) are not results: one killed
    # during its final flush may carry status "complete" over torn data (HDF5 writes its
    # metadata in no set order). Nothing reads them; the next start deletes them.
    problems = [f"{f} claims complete" for f in inj.stray_files(work, {"tiny.yaml", "run.h5"})
                if ".tmp." not in f and inj.status(os.path.join(work, f)) == "complete"]
    if os.path.exists(path):
        if inj.status(path) != "complete":
            problems.append(f"run.h5 has status {inj.status(path)!r}")
        elif inj.differences(path, ref):
            problems.append(f"run.h5 is complete but differs in {inj.differences(path, ref)[:3]}")
        elif not inj.harness_check(harness, path)[0]:
            problems.append(f"run.h5 is complete but fails harness check: "
                            f"{inj.harness_check(harness, path)[1][-300:]}")
    return problems


def finish_run(harness, work, ref):
    """--resume (or a fresh start when nothing was saved) until complete: (how, problems)."""
    config, path = os.path.join(work, "tiny.yaml"), os.path.join(work, "run.h5")
    how = "complete at the kill"
    if inj.status(path) == "complete":
        # killed after the rename: a stale lock and checkpoint may be left; neither blocks, and
        # --resume says there is nothing to resume (deleting the stale checkpoint)
        p = inj.run(harness, config, "--resume")
        if p.returncode != 2 or "nothing to resume" not in p.stderr:
            return how, [f"--resume on the complete result: exit {p.returncode}: "
                         f"{inj.last_line(p.stderr)}"]
    else:
        p = inj.run(harness, config, "--resume")
        how = "resumed"
        if p.returncode == 2 and "nothing to resume" in p.stderr:
            p = inj.run(harness, config)
            how = "restarted"
        if p.returncode != 0:
            return how, [f"{how}: exit {p.returncode}: {inj.last_line(p.stderr)}"]
    problems = []
    passes, said = inj.harness_check(harness, path)
    if inj.status(path) != "complete":
        problems.append(f"status {inj.status(path)!r} after the resume")
    elif inj.differences(path, ref):
        problems.append(f"differs from the uninterrupted run in {inj.differences(path, ref)[:4]}")
    elif not passes:
        problems.append(f"harness check: {said[-300:]}")
    left = inj.stray_files(work, {"tiny.yaml", "run.h5"})
    if left:
        problems.append(f"left {left}")
    return how, problems


def killed_at_call(harness, shim, work, kind, n):
    p = inj.run(harness, os.path.join(work, "tiny.yaml"), env=inj.shim_env(shim, kill=f"{kind}:{n}"))
    return p.returncode == -signal.SIGKILL


def killed_at_time(harness, shim, work, seconds):
    env = inj.shim_env(shim, delay="write:2000")
    proc = subprocess.Popen([harness, os.path.join(work, "tiny.yaml")], env=env, cwd=work,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        proc.wait(seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
    return proc.wait() == -signal.SIGKILL


def main():
    args = sys.argv[1:]
    n_points = int(args[args.index("--points") + 1]) if "--points" in args else 60
    plain = [a for i, a in enumerate(args) if not a.startswith("--")
             and (i == 0 or args[i - 1] != "--points")]
    harness = os.path.abspath(plain[0] if plain else "harness")
    t0 = time.time()
    started = inj.start(harness, "heads-crash-", STEPS, EVERY)
    if not started:
        return finish()
    shim, top, ref, work = started
    try:
        calls, _ = inj.count_calls(harness, shim, os.path.join(work, "tiny.yaml"))
        clean(work)
        start = time.time()
        env = inj.shim_env(shim, delay="write:2000")
        subprocess.run([harness, os.path.join(work, "tiny.yaml")], env=env, capture_output=True)
        slow = time.time() - start
        clean(work)

        points = [("fsync", n) for n in range(1, calls["fsync"] + 1)]
        points += [("rename", n) for n in range(1, calls["rename"] + 1)]
        n_random = max(10, (n_points - len(points)) // 3)
        n_writes = max(1, n_points - len(points) - n_random)
        stride = max(1, calls["write"] // n_writes)
        points += [("write", n) for n in range(2, calls["write"] + 1, stride)][:n_writes]
        rng = random.Random(18)
        points += [("time", round(rng.uniform(0.02, slow), 3)) for _ in range(n_random)]
        ended = {"complete at the kill": 0, "resumed": 0, "restarted": 0}
        bad, not_killed = [], 0
        for kind, n in points:
            clean(work)
            killed = killed_at_time(harness, shim, work, n) if kind == "time" else \
                killed_at_call(harness, shim, work, kind, n)
            not_killed += not killed
            problems = after_kill(harness, work, ref)
            how, more = finish_run(harness, work, ref)
            ended[how] += 1
            if problems or more:
                bad.append(f"{kind} {n}: " + "; ".join(problems + more))
        check(f"SIGKILL at {len(points)} points ({calls['fsync']} fsync, {calls['rename']} "
              f"rename, {n_writes} of {calls['write']} write calls, {n_random} random times in "
              f"0-{slow:.2f} s, seed 18) then --resume: bitwise the uninterrupted run every time",
              not bad, "\n    ".join([""] + bad[:10]))
        check(f"the kills happened ({len(points) - not_killed} of {len(points)} runs were killed; "
              "a random time after the end finds the run complete)",
              len(points) - not_killed >= 50, f"{not_killed} not killed")
        print(f"crash points: {len(points)} tried: {ended['resumed']} resumed from a checkpoint, "
              f"{ended['restarted']} restarted (killed before the first one), "
              f"{ended['complete at the kill']} complete already; {time.time() - t0:.0f} s")
    finally:
        shutil.rmtree(top, ignore_errors=True)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
