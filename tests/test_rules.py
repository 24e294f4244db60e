#!/usr/bin/python3
# suite: C and Python agree on every file rule over one corpus of damaged files (harness rules --json)
# suite-args: --harness {harness}
"""The rules a results file is judged by are decided in C; the Python reader keeps its own copy of
those it needs without a harness, and this suite holds the copies to the C answers
(`harness rules --json`, src/cli/rules_command.c) for every file of one corpus built here: a
complete run, an interrupted one (SIGINT) and a killed one's checkpoint (SIGKILL), then
truncations, flipped bytes (in numbers, headers and strings), files that are not HDF5, stale and
stranded leftovers, and locks held, stale, empty, multi-line or not a regular file.

  guard     heads.read.verify's verdict (whole, damaged, not HDF5) is the harness's
            (results_verify.c), for every file
  text sum  heads.read.textsum.text_sum is results_text.c's CRC, for every file the walk reads
  resume    heads.read.ondisk.leftover says what `harness --resume` continues (run_files.c)
  lock      heads.read.ondisk.harness_lock_holder is outlock.c's holder line (or no holder)
  patterns  heads.read.results.PATTERNS and CLASSES are analysis.c's names in its order;
            report_run and the report page use the reader's; a run's /scores holds those
  step      a checkpoint's step attribute is an integer; one written as a float (older files)
            resumes to the same bits
usage: tests/test_rules.py [--harness PATH] [--keep]
"""
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, temp_suite  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
PY = "/usr/bin/python3"
TINY = """\
model: {vocab_size: 16, d_model: 8, n_head: 2, n_layer: 1, seq_len: 12}
train: {steps: STEPS, batch_size: 4, lr: 3.0e-3, warmup_steps: 2, seed: 1, threads: 1}
data: {task: induction, min_period: 2, max_period: 4}
output: {path: OUT, log_every: 5, eval_every: 10, eval_batches: 1, attn_every: 10, probes: 2,
         checkpoint_every: 25, prune_step: 0}
"""


def config(tmp, out, steps):
    path = os.path.join(tmp, f"c{steps}_{os.path.basename(os.path.dirname(out))}.yaml")
    with open(path, "w") as f:
        f.write(TINY.replace("STEPS", str(steps)).replace("OUT", out))
    return path


def stopped_run(harness, tmp, name, sig):
    """A 2000-step run stopped by sig once its log is past step 60 (two checkpoints): its dir."""
    d = os.path.join(tmp, name)
    os.mkdir(d)
    log = os.path.join(tmp, name + ".log")
    with open(log, "w") as err:
        p = subprocess.Popen([harness, config(tmp, os.path.join(d, "r.h5"), 2000)], stdout=subprocess.DEVNULL,
                             stderr=err)
    for _ in range(600):
        if any(re.match(r"step [6-9]\d/", line) for line in open(log)):
            break
        time.sleep(0.05)
    p.send_signal(sig)
    p.wait(timeout=60)
    return d


def flip(path, offset):
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0xFF]))


def slot(tmp, name, files):
    """A results path tmp/NAME/r.h5 with files {name beside it: source path or bytes}."""
    d = os.path.join(tmp, "corpus", name)
    os.makedirs(d)
    for base, src in files.items():
        dst = os.path.join(d, base)
        if isinstance(src, bytes):
            with open(dst, "wb") as f:
                f.write(src)
        else:
            shutil.copyfile(src, dst)
    return os.path.join(d, "r.h5")


def build_corpus(harness, tmp):
    """[results path] of every slot; the files beside each are the corpus."""
    done = os.path.join(tmp, "done")
    os.mkdir(done)
    p = subprocess.run([harness, config(tmp, os.path.join(done, "r.h5"), 40)], capture_output=True, text=True)
    check("a complete run to damage", p.returncode == 0, p.stderr[-300:])
    stopped = stopped_run(harness, tmp, "int", signal.SIGINT)
    killed = stopped_run(harness, tmp, "kill", signal.SIGKILL)
    complete, interrupted = os.path.join(done, "r.h5"), os.path.join(stopped, "r.h5")
    ckpt = os.path.join(killed, "r.h5.ckpt")
    check("the corpus's sources: complete, interrupted (SIGINT), a checkpoint left by SIGKILL",
          all(os.path.exists(x) for x in (complete, interrupted, ckpt)), str(os.listdir(stopped)))
    data = open(complete, "rb").read()
    rng = random.Random(48)
    paths = [slot(tmp, "complete", {"r.h5": complete}), slot(tmp, "interrupted", {"r.h5": interrupted}),
             slot(tmp, "ckpt_only", {"r.h5.ckpt": ckpt}),
             slot(tmp, "both", {"r.h5": interrupted, "r.h5.ckpt": ckpt}),
             slot(tmp, "nothing", {}), slot(tmp, "empty", {"r.h5": b""}),
             slot(tmp, "text", {"r.h5": b"model: {n_head: 4}\n"}),
             slot(tmp, "stranded_complete", {"r.h5.tmp.a1b2c3": complete}),
             slot(tmp, "stranded_running", {"r.h5.tmp.d4e5f6": ckpt}),
             slot(tmp, "stranded_beside_ckpt", {"r.h5.ckpt": ckpt, "r.h5.tmp.g7h8i9": interrupted})]
    stale = slot(tmp, "stale_ckpt", {"r.h5.ckpt": ckpt, "r.h5": complete})
    os.utime(stale + ".ckpt", (time.time() - 100, time.time() - 100))
    paths.append(stale)
    for cut in (8, 512, len(data) // 3, len(data) // 2, len(data) - 100, len(data) - 1):
        paths.append(slot(tmp, f"cut_{cut}", {"r.h5": data[:cut]}))
    strings = [i for i in range(len(data) - 8) if data[i:i + 8] in (b"n_head: ", b"complete", b"inductio")]
    offsets = sorted(set(rng.sample(range(len(data)), 40) + strings[:6] + list(range(0, 96, 8))))
    for at in offsets:
        target = slot(tmp, f"flip_{at}", {"r.h5": complete})
        flip(target, at)
        paths.append(target)
    for at in rng.sample(range(len(open(ckpt, "rb").read())), 8):  # a leftover damaged in its own way
        target = slot(tmp, f"ckpt_flip_{at}", {"r.h5.ckpt": ckpt, "r.h5": interrupted})
        flip(target + ".ckpt", at)
        paths.append(target)
    return paths, complete, ckpt


def c_answers(harness, paths):
    p = subprocess.run([harness, "rules", "--json", "--"] + paths, capture_output=True, text=True, timeout=900)
    lines = p.stdout.splitlines()
    check("harness rules --json: a header and one line per path", p.returncode == 0 and len(lines) == len(paths) + 1,
          p.stderr[-300:])
    return json.loads(lines[0]), {a["path"]: a for a in map(json.loads, lines[1:])}


def kind(verdict):
    """whole, damaged or unreadable (not HDF5, truncated): the guard's decision, its words aside."""
    return "whole" if not verdict else "damaged" if verdict.startswith("damaged") else "unreadable"


TEXT_SUMS = r"""
import sys, h5py
sys.path.insert(0, sys.argv[1])
from heads.read.textsum import text_sum
for path in sys.argv[2:]:
    with h5py.File(path, "r") as f:
        print(text_sum(f))
"""


def test_files(harness, paths):
    from heads.read import ondisk, verify
    files = sorted({os.path.join(os.path.dirname(p), n) for p in paths for n in os.listdir(os.path.dirname(p))})
    header, c = c_answers(harness, files + paths)
    py = verify.damages(files)
    differ = [f"{f}: C '{c[f]['guard']}' / Python '{py[f]}'" for f in files if kind(c[f]["guard"]) != kind(py[f])]
    kinds = sorted({kind(py[f]) for f in files})
    check(f"guard: Python's verdict is the harness's for all {len(files)} files ({', '.join(kinds)})",
          not differ and len(kinds) == 3, "; ".join(differ[:4]))
    readable = [f for f in files if not py[f] or "text checksum" in py[f] or "text_checksum" in py[f]]
    s = subprocess.run([PY, "-c", TEXT_SUMS, os.path.join(ROOT, "python")] + readable, capture_output=True,
                       text=True, timeout=300)
    sums = dict(zip(readable, map(int, s.stdout.split())))
    differ = [f"{f}: C {c[f]['text_sum']} / Python {sums.get(f)}" for f in readable if c[f]["text_sum"] != sums.get(f)]
    failing = sum(1 for f in readable if "text" in py[f])
    check(f"text sum: Python's CRC of the strings is the harness's for the {len(readable)} files the walk "
          f"reads ({failing} of them failing their stored sum)", s.returncode == 0 and not differ and failing,
          "; ".join(differ[:4]) + s.stderr[-300:])
    differ = []
    for p in paths:
        left, want = ondisk.leftover(p), c[p]["resume"]
        got = None if left is None else (left.where, left.step)
        if got != (None if want is None else (want["from"], want["steps"] if want["place"] else want["step"])):
            differ.append(f"{p}: {got} / {want}")
    resumed = sum(1 for p in paths if c[p]["resume"])
    check(f"resume: ondisk.leftover is what the harness continues, for all {len(paths)} paths ({resumed} resumable)",
          not differ and 0 < resumed < len(paths), "; ".join(differ[:4]))
    return header


HOLD = r"""
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
os.write(fd, sys.argv[2].encode().decode("unicode_escape").encode())
print("held", flush=True)
time.sleep(60)
"""


def test_locks(harness, tmp):
    from heads.read import ondisk
    d = os.path.join(tmp, "locks")
    os.mkdir(d)
    cases = {"none": None, "stale": "pid 1 on gone since 2020-01-01T00:00:00Z\n",
             "held": "pid 7 on host since 2026-01-01T00:00:00Z, step 5 of 9\n",
             "held_lines": "pid 8 on host since T\\nsecond line\\n", "held_empty": "",
             "held_spaces": "   pid 9 on host   \\n", "held_blank_first": "\\nsecond line\\n"}
    holders, paths = [], []
    for name, line in cases.items():
        path = os.path.join(d, name + ".h5")
        paths.append(path)
        if line is None:
            continue
        if name == "stale":
            with open(path + ".lock", "w") as f:
                f.write(line)
            continue
        h = subprocess.Popen([PY, "-c", HOLD, path + ".lock", line], stdout=subprocess.PIPE, text=True)
        h.stdout.readline()
        holders.append(h)
    fifo = os.path.join(d, "fifo.h5")
    os.mkfifo(fifo + ".lock")
    link = os.path.join(d, "link.h5")
    os.symlink(os.path.join(d, "held.h5.lock"), link + ".lock")
    paths += [fifo, link]
    try:
        _, c = c_answers(harness, paths)
        got = {p: ondisk.harness_lock_holder(p) for p in paths}
    finally:
        for h in holders:
            h.kill()
            h.wait()
    # an empty holder line is named by each caller in its own words ("a harness", "another process")
    norm = lambda x: None if x is None else "" if x in ("a harness", "another process") else x
    differ = [f"{os.path.basename(p)}: C {c[p]['lock']!r} / Python {got[p]!r}" for p in paths
              if norm(c[p]["lock"]) != norm(got[p])]
    check(f"lock: ondisk.harness_lock_holder names the holder outlock.c names, for {len(paths)} locks "
          "(none, stale, held, several lines, empty, spaces, a FIFO, a link)",
          not differ and sum(v is not None for v in got.values()) >= 4, "; ".join(differ))


def test_patterns(header, complete):
    from heads.read import results
    from heads.report import report_run
    import h5py
    check("patterns: heads.read.results.PATTERNS and CLASSES are analysis.c's, in its order",
          results.PATTERNS == header["patterns"] and results.CLASSES == header["classes"], str(header))
    check("patterns: report_run's are the reader's (no copy)", report_run.PATTERNS is results.PATTERNS)
    js = open(os.path.join(ROOT, "python/heads/report/report_assets/run.js")).read()
    check("patterns: the report page takes them from its data (D.patterns), not a list of its own",
          "PATTERNS = D.patterns" in js and '["prev", "self"' not in js)
    with h5py.File(complete, "r") as f:
        stored = sorted(k for k in f["scores"] if f[f"scores/{k}"].ndim == 3 and f[f"scores/{k}"].dtype.kind == "f")
        classes = {x.decode() for x in f["scores/class"][()].ravel()}
    check("patterns: a run's /scores holds a dataset per pattern, its classes among CLASSES",
          stored == sorted(results.PATTERNS) and classes <= set(results.CLASSES), f"{stored} {classes}")


def test_step(harness, tmp, ckpt):
    import h5py
    import numpy as np
    with h5py.File(ckpt, "r") as f:
        step = f["checkpoint"].attrs["step"]
    check("step: a checkpoint's step attribute is an integer", np.asarray(step).dtype.kind == "i", repr(step))
    outs = []
    for kind_ in ("int", "float"):
        d = os.path.join(tmp, "resume_" + kind_)
        os.mkdir(d)
        shutil.copyfile(ckpt, os.path.join(d, "r.h5.ckpt"))
        if kind_ == "float":  # as files before the step became an integer
            with h5py.File(os.path.join(d, "r.h5.ckpt"), "r+") as f:
                del f["checkpoint"].attrs["step"]
                f["checkpoint"].attrs.create("step", float(step), dtype=np.float64)
        p = subprocess.run([harness, config(tmp, os.path.join(d, "r.h5"), 2000), "--resume"], capture_output=True,
                           text=True, timeout=300)
        check(f"step: a checkpoint with a {kind_} step resumes", p.returncode == 0, p.stderr[-300:])
        outs.append(os.path.join(d, "r.h5"))
    if all(map(os.path.exists, outs)):
        with h5py.File(outs[0], "r") as a, h5py.File(outs[1], "r") as b:
            same = all(np.array_equal(a[k][()], b[k][()]) for k in ("train/loss", "train/step", "eval/loss"))
            names = []
            a["params"].visit(lambda n: names.append(n) if isinstance(a["params"][n], h5py.Dataset) else None)
            same = same and names and all(np.array_equal(a["params"][n][()], b["params"][n][()]) for n in names)
        check("step: resumed from the float step, the same bits as from the integer one", same)


NO_HARNESS = r"""
import sys
sys.path.insert(0, sys.argv[1])
from heads import results
run = results.Run(sys.argv[2])
print(run.status, run.maps().dims[0], len(results.PATTERNS))
try:
    results.Run(sys.argv[3])
except results.UserError as e:
    print(e)
"""


def test_no_harness(tmp, complete, ckpt_dir):
    """Only the HDF5 files: the reader reads a run and names a missing one (what a run left there
    is the harness's to say, and goes unsaid)."""
    env = dict(os.environ, HARNESS=os.path.join(tmp, "no-harness-here"))
    p = subprocess.run([PY, "-c", NO_HARNESS, os.path.join(ROOT, "python"), complete, os.path.join(ckpt_dir, "r.h5")],
                       capture_output=True, text=True, env=env, timeout=300)
    check("without a harness: the reader reads a run and names a missing file",
          p.returncode == 0 and p.stdout.startswith("complete step 5\n") and "no such results file" in p.stdout,
          (p.stderr or p.stdout)[-300:])


def suite(harness, tmp):
    os.environ["HARNESS"], os.environ["XDG_CACHE_HOME"] = harness, os.path.join(tmp, "cache")
    paths, complete, ckpt = build_corpus(harness, tmp)
    header = test_files(harness, paths)
    test_locks(harness, tmp)
    test_patterns(header, complete)
    test_step(harness, tmp, ckpt)
    test_no_harness(tmp, complete, os.path.dirname(ckpt))


if __name__ == "__main__":
    sys.exit(temp_suite(sys.argv, "heads-rules-", suite))
