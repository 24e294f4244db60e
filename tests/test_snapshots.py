#!/usr/bin/python3
# suite: weight snapshots over training (output.snapshots): schedule, bits, resume, budget, analyze --step
# suite-args: {harness}
"""tests/test_snapshots.py HARNESS: output.snapshots and what reads it.

- the schedule (log, log:N, a list) recomputed here; bad values refused (exit 2, file:line:col,
  no file written);
- the last snapshot is /params bit for bit, and `harness check` passes the file and finds a
  changed value;
- the snapshot of step s is the /params of a run of s steps with the same (constant) learning
  rate schedule, bit for bit;
- a run killed with SIGKILL after a checkpoint and finished with --resume has the same
  /snapshots as an uninterrupted run;
- the memory --shapes names for the snapshots is K x parameters x 4 bytes, and the disk it
  counts is an upper bound of what the file stores (deflated); before step 0 a run says the
  same memory and a disk within 10 % of what the file stores;
- `harness analyze --step` at the last snapshot equals the end-of-run study bit for bit, and a
  second call skips the steps already stored;
- output.snapshot_study: the run ends with every snapshot's study, the same bits as `harness
  analyze --steps all` on the same run without the key; refused without output.snapshots.
"""
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import injection as inj  # noqa: E402
from checks import check, finish  # noqa: E402

import h5py  # noqa: E402
import numpy as np  # noqa: E402

TINY = """\
model: {{vocab_size: 16, d_model: 8, n_head: 2, n_layer: 2, seq_len: 12}}
train: {{steps: {steps}, batch_size: 4, lr: 3.0e-3, warmup_steps: 2, seed: 1, threads: 1,
        lr_schedule: constant}}
data: {{task: induction, min_period: 2, max_period: 4}}
output: {{path: {path}, log_every: 5, eval_every: 10, eval_batches: 1, attn_every: 10, probes: 2,
         checkpoint_every: {every}, snapshots: "{snapshots}"{extra}}}
"""


def config(work, name, steps=20, snapshots="log", every=0, extra=""):
    path = os.path.join(work, name + ".yaml")
    with open(path, "w") as f:
        f.write(TINY.format(steps=steps, path=name + ".h5", every=every, snapshots=snapshots, extra=extra))
    return path


def train(harness, cfg, *args):
    p = subprocess.run([harness, cfg, *args], capture_output=True, text=True, cwd=os.path.dirname(cfg),
                       timeout=300)
    return p


def schedule(text, steps):
    """output.snapshots as docs/configuration.md defines it, written out independently."""
    if text.startswith("log"):
        every = int(text[4:]) if text.startswith("log:") else 0
        s = {0} | {2 ** k for k in range(40) if 2 ** k <= steps and (every == 0 or 2 ** k < every)}
        if every:
            s |= set(range(every, steps + 1, every))
    else:
        s = {int(x) for x in text.split(",")}
    return sorted(s | {steps})


def tensors(f, group):
    out = {}
    f[group].visititems(lambda n, o: out.__setitem__(n, o[()]) if isinstance(o, h5py.Dataset) else None)
    return out


def test_schedules(harness, work):
    for text, steps in (("log", 20), ("log:6", 20), ("3,7", 20), ("0,20", 20), ("log:1", 5)):
        cfg = config(work, "s", steps=steps, snapshots=text)
        p = train(harness, cfg, "--overwrite")
        with h5py.File(os.path.join(work, "s.h5"), "r") as f:
            got = list(f["/snapshots/step"][()])
            last = {n: v[-1] for n, v in tensors(f, "/snapshots/params").items()}
            same = last.keys() == tensors(f, "/params").keys() and all(np.array_equal(last[n], f["/params/" + n][()]) for n in last)
        check(f"{text!r} over {steps} steps keeps {schedule(text, steps)}", p.returncode == 0 and
              got == schedule(text, steps), f"{got} {p.stderr[-300:]}")
        check(f"{text!r}: the last snapshot is /params bit for bit", same)
    ok, out = inj.harness_check(harness, os.path.join(work, "s.h5"))
    check("harness check passes a file with snapshots", ok, out)
    with h5py.File(os.path.join(work, "s.h5"), "r+") as f:
        d = f["/snapshots/params/layer1/w_o"]
        x = d[-1]
        x[0, 0] += 1e-3
        d[-1] = x
    ok, out = inj.harness_check(harness, os.path.join(work, "s.h5"))
    check("harness check finds a last snapshot that is not /params", not ok and "not /params" in out, out)


def test_refused(harness, work):
    for text, why in (("lag", "is none of"), ("5,3", "must increase"), ("30", "past train.steps"),
                      ("log:0", "log:N needs"), ("1,", "is none of")):
        cfg = config(work, "bad", snapshots=text)
        p = train(harness, cfg)
        check(f"output.snapshots {text!r} refused at its line", p.returncode == 2 and
              re.search(r"bad\.yaml:6:\d+: output.snapshots .*" + why, p.stderr) and
              not os.path.exists(os.path.join(work, "bad.h5")), p.stderr)


def test_same_as_shorter_run(harness, work):
    train(harness, config(work, "long", steps=30, snapshots="7,10"), "--overwrite")
    train(harness, config(work, "short", steps=10, snapshots=""), "--overwrite")
    with h5py.File(os.path.join(work, "long.h5"), "r") as f, h5py.File(os.path.join(work, "short.h5"), "r") as g:
        k = list(f["/snapshots/step"][()]).index(10)
        snap = {n: v[k] for n, v in tensors(f, "/snapshots/params").items()}
        params = tensors(g, "/params")
        same = snap.keys() == params.keys() and all(snap[n].tobytes() == params[n].tobytes() for n in snap)
        check("the snapshot of step 10 is the /params of a 10-step run (constant lr) bit for bit", same)
        check("a run without output.snapshots writes no /snapshots", "snapshots" not in g)


def test_resume(harness, work):
    ref = config(work, "ref", steps=3000, snapshots="log:500", every=100)
    train(harness, ref, "--overwrite")
    cfg = config(work, "kill", steps=3000, snapshots="log:500", every=100)
    proc = subprocess.Popen([harness, cfg, "--overwrite"], cwd=work, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    ckpt, t0 = os.path.join(work, "kill.h5.ckpt"), time.time()
    while not os.path.exists(ckpt) and time.time() - t0 < 60 and proc.poll() is None:
        time.sleep(0.01)
    time.sleep(0.3)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed = os.path.exists(ckpt)
    p = train(harness, cfg, "--resume")
    with h5py.File(os.path.join(work, "ref.h5"), "r") as f, h5py.File(os.path.join(work, "kill.h5"), "r") as g:
        a, b = tensors(f, "/snapshots"), tensors(g, "/snapshots")
        same = a.keys() == b.keys() and all(a[n].tobytes() == b[n].tobytes() for n in a)
        check("SIGKILL after a checkpoint, then --resume: /snapshots bit for bit the uninterrupted run's",
              killed and p.returncode == 0 and same and "resuming from" in p.stderr,
              f"killed={killed} rc={p.returncode} {p.stderr[-300:]}")
        check("... and /params too", f["/params/w_unembed"][()].tobytes() == g["/params/w_unembed"][()].tobytes())


def test_budget(harness, work):
    cfg = config(work, "b", steps=200, snapshots="log:20")
    shapes = train(harness, cfg, "--shapes").stdout
    m = re.search(r"([\d.]+) (KiB|MiB|B)\s+weight snapshots", shapes)
    unit = {"B": 1, "KiB": 1024, "MiB": 1 << 20}
    run = train(harness, cfg, "--overwrite").stderr
    said = re.search(r"weight snapshots: (\d+) .*: ([\d.]+) (KiB|MiB|B) in memory .*, about ([\d.]+) (KiB|MiB|B) on disk",
                     run)
    with h5py.File(os.path.join(work, "b.h5"), "r") as f:
        K = len(f["/snapshots/step"])
        params = sum(v.size for v in tensors(f, "/params").values())
        stored = []
        f["/snapshots"].visititems(lambda n, o: stored.append(o.id.get_storage_size())
                                   if isinstance(o, h5py.Dataset) else None)
    want = K * params * 4
    check(f"--shapes counts K x parameters x 4 bytes for {K} snapshots ({want} B)",
          m and abs(float(m.group(1)) * unit[m.group(2)] - want) <= 0.05 * want + 1024, shapes[-600:])
    check(f"the file stores at most that ({sum(stored)} B deflated)", sum(stored) <= want + 64 * K * 17)
    check("before step 0 the run names the snapshots' count and memory (K x parameters x 4 bytes)",
          said and int(said.group(1)) == K
          and abs(float(said.group(2)) * unit[said.group(3)] - want) <= 0.05 * want + 1024, run[:600])
    disk = float(said.group(4)) * unit[said.group(5)] if said else 0
    check(f"... and its disk within 10 % of what the file stores ({disk:.0f} B said, {sum(stored)} B stored)",
          abs(disk - sum(stored)) <= 0.10 * sum(stored), run[:600])


def test_analyze(harness, work):
    cfg = config(work, "an", steps=20, snapshots="log:8")
    train(harness, cfg, "--overwrite")
    path = os.path.join(work, "an.h5")
    with open(path, "rb") as f:
        before = f.read()
    p = subprocess.run([harness, "analyze", path, "--step", "5"], capture_output=True, text=True)
    with open(path, "rb") as f:
        same = f.read() == before
    check("analyze --step at a step with no snapshot: exit 2, the file as it was",
          p.returncode == 2 and "no weight snapshot at step '5'" in p.stderr and same, p.stderr)
    p = subprocess.run([harness, "analyze", path, "--steps", "4,20"], capture_output=True, text=True)
    check("analyze --steps 4,20 writes both", p.returncode == 0 and p.stderr.count("written") == 2, p.stderr)
    with h5py.File(path, "r") as f:
        g = f["/study_steps/20"]
        names = []
        g.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
        def value(x):
            return list(x.ravel()) if x.dtype.kind == "O" else x.tobytes()
        differ = [n for n in names if not n.startswith(("attn/", "scores/prev", "scores/self", "scores/first",
                                                        "scores/induction", "scores/duplicate"))
                  and value(g[n][()]) != value(f[n][()])]
        differ += [n for n in ("attn/maps", "scores/induction") if g[n][0].tobytes() != f[n][-1].tobytes()]
        attrs = g["prune"].attrs["unpruned_eval_loss"] == f["prune"].attrs["unpruned_eval_loss"]
        check(f"the study at the last snapshot is the end-of-run study bit for bit ({len(names)} datasets)",
              len(names) > 20 and not differ and attrs, differ)
        check("/study_steps/4 differs from the final study (other weights)",
              f["/study_steps/4/heads/ablation_delta"][()].tobytes() != f["/heads/ablation_delta"][()].tobytes())
    ok, out = inj.harness_check(harness, path)
    check("harness check passes /study_steps", ok, out)
    proc = subprocess.Popen([harness, "analyze", path, "--steps", "all"], stderr=subprocess.PIPE, text=True)
    first = proc.stderr.readline()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    ok, out = inj.harness_check(harness, path)
    with h5py.File(path, "r") as f:
        kept = "0" in f["/study_steps"]
    check("SIGKILL after analyze wrote step 0: the file is whole and keeps it", ok and kept and
          first.startswith("analyze: step 0: written"), first + out)
    p = subprocess.run([harness, "analyze", path, "--steps", "all"], capture_output=True, text=True)
    check("analyze --steps all again skips the three stored steps", p.returncode == 0 and
          p.stderr.count("skipped") == 3 and "4 snapshot studies" in p.stderr, p.stderr[-400:])


def test_run_end_study(harness, work):
    p = train(harness, config(work, "rs", steps=20, snapshots="log:8", extra=", snapshot_study: true"),
              "--overwrite")
    train(harness, config(work, "an2", steps=20, snapshots="log:8"), "--overwrite")
    a = subprocess.run([harness, "analyze", os.path.join(work, "an2.h5"), "--steps", "all"],
                       capture_output=True, text=True)
    with h5py.File(os.path.join(work, "rs.h5"), "r") as f, h5py.File(os.path.join(work, "an2.h5"), "r") as g:
        steps = sorted(int(s) for s in f.get("/study_steps", {}))
        x, y = tensors(f, "/study_steps"), tensors(g, "/study_steps")
        same = x.keys() == y.keys() and all(x[n].tobytes() == y[n].tobytes() for n in x
                                            if x[n].dtype.kind != "O")
    check("output.snapshot_study: the run studies every snapshot (0, 1, 2, 4, 8, 16, 20)",
          p.returncode == 0 and steps == [0, 1, 2, 4, 8, 16, 20] and
          "time: 7 snapshot studies" in p.stderr, f"{steps} {p.stderr[-400:]}")
    check("... the same bits as harness analyze --steps all on the run without the key",
          a.returncode == 0 and same and len(x) > 100, a.stderr[-300:])
    shapes = train(harness, config(work, "rs", steps=20, snapshots="log:8", extra=", snapshot_study: true"),
                   "--shapes").stdout
    check("--shapes names the snapshot study's memory", "output.snapshot_study" in shapes, shapes[-800:])
    bad = train(harness, config(work, "bad2", snapshots="", extra=", snapshot_study: true"))
    check("output.snapshot_study without output.snapshots refused at its line", bad.returncode == 2 and
          re.search(r"bad2\.yaml:6:\d+: output.snapshot_study needs", bad.stderr) and
          not os.path.exists(os.path.join(work, "bad2.h5")), bad.stderr)


def main():
    harness = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory() as work:
        for test in (test_schedules, test_refused, test_same_as_shorter_run, test_resume, test_budget, test_analyze,
                     test_run_end_study):
            try:
                test(harness, work)
            except Exception as e:  # one failure, and the suite goes on
                check(test.__name__, False, repr(e))
    return finish()


if __name__ == "__main__":
    sys.exit(main())
