#!/usr/bin/python3
# suite: bad disks and bad bytes: checksums, damaged files, a full disk, small bad inputs
# suite-args: {harness}
"""tests/test_bad_disks.py HARNESS [--keep]: one flipped byte, a truncated file or a full disk
never crashes a reader, never passes as good data, and never costs a run; the small bad inputs
are refused in one line. Checks, one line each, then "N passed, M failed":
  checksums     every numeric dataset of a results file and of a .ckpt carries Fletcher-32; the
                file is HDF5's 1.10 format (superblock >= 2) and h5dump reads it; a file of the
                older format without checksums (h5repack) still passes check and reads; the
                Python guard's verdict on a read that timed out or was SIGKILLed is not cached
  data flip     one byte of the last /eval/loss: check names /eval/loss (exit 1), the sweep calls
                the run damaged (listed, left out of the summary, exit 1, not retrained), and
                --redo-damaged retrains it
  resume        one byte of /params/layer0/w_qkv of a .ckpt: --resume refuses it (exit 2, naming
                it); with the interrupted output.path damaged instead, --resume falls back to the
                good .ckpt and ends bit for bit as the uninterrupted run
  history       one byte of a .ckpt's history (/train/lr, /attn/maps of an early snapshot and of
                its own step, /train/loss, /eval/loss): check names it and says the checkpoint
                resumes; --resume ends with the uninterrupted run's parameters and every other
                dataset bit for bit (/train/lr and the snapshot of its step made again: the whole
                file); what cannot be made again is dropped, named in the warning and in the
                root attribute history_dropped, and the rows kept equal the uninterrupted run's
  check says    harness check on a path holding only a .ckpt, only a killed writer's temporary, a
                directory, a FIFO, nothing, an interrupted run without a checkpoint (and on the
                .ckpt and the temporary themselves): one printable line each, naming what is
                there (the checkpoint's step and whether it resumes; "no checkpoint; the file
                records N steps", never step -1), and a plain run and --resume say the same
  readers       a file of the older format with a byte that crashes plain h5py, and truncated
                files: check, plot, report, compare (--tolerance), plot-sweep, sweep (plan,
                --status, --list, --summary-only), prune, export, inspect: no signal death, no
                traceback, one line naming the file
  fuzz          every byte of the first KiB (superblock, root group, the first object headers),
                every 97th byte of the rest of the metadata and 3 bytes of every data chunk of a
                tiny results file: harness check (one process for all, each file in a child) and
                the Python reader's guard: no signal death, no hang, and a file they accept holds
                exactly the original numbers (HEADS_FUZZ_ALL=1: every metadata byte, ~38000);
                the same bytes of a tiny run's .ckpt: harness check, and --resume of each: no
                crash, and a resume that completes holds the uninterrupted run's numbers but in
                the history it names dropped (0 silent accepts)
  full disk     (root, tmpfs) `sweep --summary-only` with 8 KiB left: exit 1, "disk full", the old
                summary.csv / summary.h5 byte for byte, no temporaries; a run that cannot be
                written is labelled "disk full", not "bad input"
  small         a config or experiment that is a FIFO: refused at once; `--set:N` names the N-th
                --set; train.threads above the CPUs: a warning; a sweep under LC_ALL=C
                PYTHONUTF8=0 with a non-ASCII path completes
"""
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import injection as inj  # noqa: E402  (puts python/ on sys.path)
from checks import check, end_suite, read_csv, run_check  # noqa: E402
from heads import results  # noqa: E402
from heads.read import textsum

import h5py  # noqa: E402
import numpy as np  # noqa: E402

PY = "/usr/bin/python3"
SCRIPTS = os.path.join(inj.ROOT, "scripts")
HARNESS = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("-")
                          else os.path.join(inj.ROOT, "harness"))
KEEP = "--keep" in sys.argv
TMP = tempfile.mkdtemp(prefix="heads-bad-disks-")
os.environ["XDG_CACHE_HOME"] = os.path.join(TMP, "cache")  # the guard's verdicts: not the user's cache
ENV = dict(os.environ, HARNESS=HARNESS, OMP_WAIT_POLICY="passive")

TINY = """\
model: {vocab_size: 16, d_model: 8, n_head: 2, n_layer: 1, seq_len: 8}
train: {steps: 6, batch_size: 2, lr: 3.0e-3, warmup_steps: 1, seed: 1, threads: 1}
data: {task: induction, min_period: 2, max_period: 3}
output: {log_every: 2, eval_every: 3, eval_batches: 1, attn_every: 3, probes: 1, prune_step: 0.5}
"""
EXPERIMENT = """\
name: bad
base: {base}
grid:
  model.n_head: [1, 2]
width: fixed_width
seeds: [0]
"""


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def run(cmd, timeout=300, env=None, cwd=None):
    """(exit status, stdout, stderr) of a command; a hang is exit status 'timeout'."""
    try:
        p = subprocess.run(cmd, capture_output=True, timeout=timeout, env=env or ENV,
                           cwd=cwd or TMP)
    except subprocess.TimeoutExpired:
        return "timeout", "", ""
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def harness(*args, **kw):
    return run([HARNESS, *map(str, args)], **kw)


def script(name, *args, **kw):
    return run([PY, os.path.join(SCRIPTS, name), *map(str, args)], **kw)


def flip(path, offset, mask=0xFF, out=None):
    """A copy of path (or path itself) with the byte at offset XORed with mask."""
    data = bytearray(open(path, "rb").read())
    data[offset] ^= mask
    out = out or path
    with open(out, "wb") as f:
        f.write(data)
    return out


def chunk_of(path, dataset):
    """(byte offset, size) of the (first) stored chunk of a dataset."""
    with h5py.File(path, "r") as f:
        info = f[dataset].id.get_chunk_info(0)
    return info.byte_offset, info.size


def clean_failure(rc, out, err, path):
    """Why a reader's result is not one clean line naming path ('' when it is): a signal, a
    hang, a traceback, exit 0, or no line naming the file."""
    if rc == "timeout":
        return "hung"
    if rc < 0 or rc >= 128:
        return f"died (exit status {rc})"
    if "Traceback" in out + err:
        return "traceback: " + (out + err)[-300:]
    if rc == 0:
        return "exit 0: " + (out + err)[-200:]
    if os.path.basename(path) not in out + err:
        return "no line names the file: " + (out + err)[-300:]
    return ""


def sweep_dir(name):
    """A fresh sweep of the tiny experiment (2 runs): (experiment file, results dir)."""
    d = os.path.join(TMP, name)
    os.makedirs(d)
    base = write(os.path.join(d, "tiny.yaml"), TINY)
    exp = write(os.path.join(d, "bad.yaml"), EXPERIMENT.format(base=base))
    rc, out, err = script("sweep", exp, "--results", os.path.join(d, "results"))
    check(f"{name}: the sweep completes", rc == 0, (out + err)[-400:])
    return exp, os.path.join(d, "results", "bad")


# ------------------------------------------------------------------------------------------------


def numeric_datasets(f):
    out = []
    f.visititems(lambda n, o: out.append(o) if isinstance(o, h5py.Dataset)
                 and o.dtype.kind in "iuf" and o.size else None)
    return out


def test_checksums():
    d = os.path.join(TMP, "sums")
    os.makedirs(d)
    path = os.path.join(d, "run.h5")
    config = inj.write_config(d, path, steps=40, checkpoint_every=10)
    env = inj.shim_env(inj.shim_path(HARNESS), kill="rename:2")  # dies after the 1st .ckpt
    run([HARNESS, config], env=env)
    ckpt = os.path.join(d, "kept.ckpt")  # the completed run deletes its own
    check("a killed run left its .ckpt", os.path.exists(path + ".ckpt"))
    shutil.copyfile(path + ".ckpt", ckpt)
    rc, out, err = harness(config, "--force")
    check("the run completes", rc == 0, err[-300:])
    for what, p in (("results file", path), (".ckpt", ckpt)):
        with h5py.File(p, "r") as f:
            plain = [o.name for o in numeric_datasets(f) if not o.fletcher32]
            groups = {o.name.split("/")[1] for o in numeric_datasets(f)}
        check(f"{what}: every numeric dataset has Fletcher-32 ({', '.join(sorted(groups))})",
              not plain and {"params", "train", "eval"} <= groups
              and (what == "results file" or "checkpoint" in groups), plain[:5])
        check(f"{what}: HDF5's 1.10 file format (superblock version >= 2: checksummed metadata)",
              open(p, "rb").read(9)[8] >= 2)
    rc, out, err = run(["h5dump", "-H", path])
    check("h5dump (Debian 12's HDF5 1.10) reads it", rc == 0 and 'GROUP "params"' in out, err[-200:])
    old = os.path.join(d, "old.h5")
    rc, _, err = run(["h5repack", "-f", "NONE", path, old])
    check("h5repack writes a file of the older format without checksums",
          rc == 0 and open(old, "rb").read(9)[8] == 0, err[-200:])
    rc, out, err = harness("check", old)
    check("check passes a file written before the checksums", rc == 0 and ": ok (" in out,
          out + err)
    r = results.RunResult(old)
    check("the Python reader reads it", r.status == "complete" and len(r.eval_loss) > 0)
    rc, out, err = harness("inspect", old, "--tokens", "1,2,3")
    check("inspect runs its model", rc == 0, err[-200:])
    uncertain_verdicts(path)


def uncertain_verdicts(path):
    """A read that did not finish in time, or whose reader was SIGKILLed, may be the machine's
    doing: that verdict holds for the process, and the next command reads the file again."""
    cache = os.path.join(os.environ["XDG_CACHE_HOME"], "heads", "verified-2")
    for what, patch in (("did not finish", "verify._read_line = lambda stream, seconds: None"),
                        ("SIGKILL", "verify._WALKER = 'import os, signal; os.kill(os.getpid(), signal.SIGKILL)'")):
        fresh = os.path.join(TMP, f"uncertain-{what.split()[0]}.h5")
        shutil.copyfile(path, fresh)
        prefix = f"import sys; sys.path.insert(0, {os.path.join(inj.ROOT, 'python')!r})\nfrom heads import results\nfrom heads.read import verify\n"
        verdict = f"results.damages([{fresh!r}])[{fresh!r}]"
        rc, out, err = run([PY, "-c", f"{prefix}{patch}\nprint({verdict})"])
        lines = open(cache, encoding="utf-8", errors="replace").read() if os.path.exists(cache) else ""
        check(f"the guard's verdict on a read that {what} holds for its process, not in the cache file",
              rc == 0 and what in out and fresh not in lines, out + err[-300:])
        rc, out, err = run([PY, "-c", f"{prefix}print(repr({verdict}))"])
        check(f"... and the next command reads the file again: whole ({what})", rc == 0 and out.strip() == "''",
              out + err[-300:])


def test_data_flip():
    exp, outdir = sweep_dir("dataflip")
    victim = os.path.join(outdir, "h1_dh8_s0.h5")
    offset, size = chunk_of(victim, "eval/loss")
    before = results.RunResult(victim).eval_loss
    flip(victim, offset + size - 2, 0x10)  # the last value's exponent byte
    rc, out, err = harness("check", victim)
    check("check names /eval/loss and its checksum (exit 1)",
          rc == 1 and "/eval/loss" in out and "checksum" in out, out + err)
    check("the Python reader calls it damaged", results.read_status(victim) == "damaged")
    log = os.path.join(outdir, "h1_dh8_s0.log")
    mtime = os.stat(log).st_mtime_ns
    rc, out, err = script("sweep", exp, "--results", os.path.dirname(outdir))
    check("sweep: exit 1, names the damaged file, does not retrain it",
          rc == 1 and "damaged" in err and victim in err and os.stat(log).st_mtime_ns == mtime
          and "Traceback" not in out + err, (out + err)[-500:])
    rows = {r["run"]: r for r in read_csv(os.path.join(outdir, "summary.csv"))}
    check("summary: the run is damaged, without values",
          rows["h1_dh8_s0"]["status"] == "damaged" and rows["h1_dh8_s0"]["final_eval_loss"] == ""
          and rows["h2_dh4_s0"]["status"] == "complete", rows)
    rc, out, err = script("sweep", "--status", outdir)
    check("--status lists it damaged (exit 1)",
          rc == 1 and re.search(r"^damaged\s+h1_dh8_s0 .*checksum", out, re.M) is not None, out)
    rc, out, err = script("sweep", exp, "--results", os.path.dirname(outdir), "--list")
    check("--list lists it damaged", re.search(r"h1_dh8_s0\s+damaged", out) is not None, out)
    rc, out, err = script("sweep", exp, "--results", os.path.dirname(outdir), "--redo-damaged")
    after = results.RunResult(victim)
    check("--redo-damaged retrains it: complete, the same losses as before the flip",
          rc == 0 and after.status == "complete" and np.array_equal(after.eval_loss, before),
          (out + err)[-400:])


def interrupted_run(d):
    """(config, output.path): an interrupted output.path at step 20 and an older good .ckpt at
    step 10 beside it, made deterministically: runs killed (the shim's SIGKILL) at their 2nd and
    3rd rename leave the .ckpt of step 10 and of step 20; the latter, status set to
    interrupted, is what an interrupted run saves (it holds what a .ckpt holds)."""
    path = os.path.join(d, "run.h5")
    config = inj.write_config(d, path, steps=40, checkpoint_every=10)
    shim = inj.shim_path(HARNESS)
    run([HARNESS, config], env=inj.shim_env(shim, kill="rename:2"))
    shutil.move(path + ".ckpt", os.path.join(d, "step10.ckpt"))
    run([HARNESS, config], env=inj.shim_env(shim, kill="rename:3"))
    shutil.move(path + ".ckpt", path)
    with h5py.File(path, "r+") as f:
        f.attrs["status"] = "interrupted"
    textsum.reseal(path)  # as the harness seals what it saves
    shutil.move(os.path.join(d, "step10.ckpt"), path + ".ckpt")
    for name in os.listdir(d):  # what the killed runs left
        if ".tmp." in name:
            os.unlink(os.path.join(d, name))
    return config, path


def test_resume():
    d = os.path.join(TMP, "resume")
    os.makedirs(d)
    config, path = interrupted_run(d)
    ckpt = path + ".ckpt"
    check("an interrupted run and an older .ckpt", inj.status(path) == "interrupted"
          and os.path.exists(ckpt))
    ref_dir = os.path.join(d, "ref")
    os.makedirs(ref_dir)
    ref = os.path.join(ref_dir, "run.h5")
    rc, _, err = inj_run(inj.write_config(ref_dir, ref, steps=40, checkpoint_every=10))
    check("the uninterrupted reference run completes", rc == 0, err[-300:])

    saved = path + ".good"
    shutil.copyfile(path, saved)
    offset, _ = chunk_of(path, "params/layer0/w_qkv")
    flip(path, offset + 5, 0x01)
    rc, out, err = harness(config, "--resume")
    check("--resume with output.path damaged: warns naming it, falls back to the .ckpt",
          "w_qkv" in err and path in err and "resuming from" in err and ckpt in err, err[-500:])
    diff = inj.differences(path, ref) if rc == 0 else ["exit %s" % rc]
    check("... and ends bit for bit as the uninterrupted run", rc == 0 and not diff, diff[:5])

    os.unlink(path)
    shutil.copyfile(saved, ckpt)  # now the only checkpoint, and it is damaged
    offset, _ = chunk_of(ckpt, "params/layer0/w_qkv")
    flip(ckpt, offset + 5, 0x01)
    rc, out, err = harness(config, "--resume")
    check("--resume with only a damaged .ckpt: exit 2 naming it and /params/layer0/w_qkv",
          rc == 2 and ckpt in err and "/params/layer0/w_qkv" in err and "checksum" in err
          and not os.path.exists(path), err[-400:])


def gated(config):
    """The config with learned head gates (train.head_l0), rewritten in place."""
    text = open(config).read().replace("threads: 1}", "threads: 1, head_l0: 1.0}")
    return write(config, text)


def killed_at_checkpoint(d, steps=40, every=10, renames=3, gates=False):
    """(config, output.path, reference): a .ckpt left by a run SIGKILLed at its `renames`-th
    rename (the checkpoint of step every * (renames - 1), and nothing else of it: the killed
    run's temporaries go), and an uninterrupted run of the same config in d/ref."""
    path = os.path.join(d, "run.h5")
    config = inj.write_config(d, path, steps=steps, checkpoint_every=every)
    if gates:
        gated(config)
    run([HARNESS, config], env=inj.shim_env(inj.shim_path(HARNESS), kill=f"rename:{renames}"))
    for name in os.listdir(d):
        if ".tmp." in name:
            os.unlink(os.path.join(d, name))
    ref_dir = os.path.join(d, "ref")
    os.makedirs(ref_dir)
    ref = os.path.join(ref_dir, "run.h5")
    ref_config = inj.write_config(ref_dir, ref, steps=steps, checkpoint_every=every)
    rc, _, err = inj_run(gated(ref_config) if gates else ref_config)
    check("the uninterrupted reference run completes", rc == 0, err[-300:])
    return config, path, ref


def chunk_at(path, dataset, first):
    """(byte offset, size) of the stored chunk of a dataset that starts at row `first`."""
    with h5py.File(path, "r") as f:
        ds = f[dataset].id
        for i in range(ds.get_num_chunks()):
            info = ds.get_chunk_info(i)
            if info.chunk_offset[0] == first:
                return info.byte_offset, info.size
    raise KeyError(f"{dataset}: no chunk at row {first}")


def rows_agree(path, ref, group):
    """Whether every row of path's log (/train or /eval) equals the reference's row of the same
    step, column by column."""
    with h5py.File(path, "r") as a, h5py.File(ref, "r") as b:
        where = {int(s): i for i, s in enumerate(b[group]["step"][()])}
        steps = [int(s) for s in a[group]["step"][()]]
        if not steps or any(s not in where for s in steps):
            return False
        for col in a[group]:
            if col in ("elapsed_s", "step", "position_tokens"):  # not a row per step
                continue
            got, want = a[group][col][()], b[group][col][()]
            if any(not np.array_equal(got[i], want[where[s]], equal_nan=True) for i, s in enumerate(steps)):
                return False
    return True


def snapshots_agree(path, ref):
    """Whether every attention snapshot (maps and scores) of path equals the reference's
    snapshot of the same step."""
    with h5py.File(path, "r") as a, h5py.File(ref, "r") as b:
        where = {int(s): i for i, s in enumerate(b["attn/step"][()])}
        for i, s in enumerate(a["attn/step"][()]):
            j = where.get(int(s))
            if j is None or not np.array_equal(a["attn/maps"][i], b["attn/maps"][j]):
                return False
            if any(not np.array_equal(a["scores"][k][i], b["scores"][k][j]) for k in a["scores"]
                   if a["scores"][k].ndim == 3):
                return False
    return True


HISTORY = {"attn": ("attn/maps", "attn/step", "scores/prev", "scores/self", "scores/first",
                    "scores/induction", "scores/duplicate"),
           "train": ("train/step", "train/loss", "train/lr", "train/grad_norm", "train/elapsed_s",
                     "gates/step", "gates/p_open"),
           "eval": ("eval/step", "eval/loss", "eval/tokens", "eval/loss_by_position", "eval/icl_score")}


def test_history():
    for gates in (False, True):
        history_cases(gates)


def history_cases(gates):
    d = os.path.join(TMP, "history_gated" if gates else "history")
    os.makedirs(d)
    config, path, ref = killed_at_checkpoint(d, gates=gates)  # the .ckpt of step 20 of 40
    ckpt = path + ".ckpt"
    good = os.path.join(d, "good.ckpt")
    shutil.copyfile(ckpt, good)
    # (dataset, first row of the damaged chunk, the history dropped: a key of HISTORY or None)
    cases = [("train/lr", 0, None), ("attn/maps", 0, "attn"), ("attn/maps", 2, None),
             ("train/loss", 0, "train"), ("eval/loss", 0, "eval")]
    if gates:  # learned head gates: a /gates row per /train row, dropped with them
        cases = [("gates/p_open", 0, "train"), ("train/loss", 0, "train")]
    for dataset, first, dropped in cases:
        for name in os.listdir(d):
            if name.startswith("run.h5"):
                os.unlink(os.path.join(d, name))
        shutil.copyfile(good, ckpt)
        offset, size = chunk_at(ckpt, dataset, first)
        flip(ckpt, offset + size // 2, 0x04)
        what = ("gated run: " if gates else "") + f"/{dataset}" + \
            (f" (the snapshot of step {first * 10})" if dataset == "attn/maps" else "")
        rc, out, err = harness("check", ckpt)
        check(f"{what} damaged: check names it and says the checkpoint resumes without it",
              rc == 1 and f"/{dataset} cannot be read" in out and "a checkpoint at step 20 of 40" in out
              and "continues it without the history" in out, out + err)
        rc, out, err = harness(config, "--resume")
        diff = inj.differences(path, ref) if rc == 0 else [f"exit {rc}"]
        allowed = set(HISTORY[dropped]) if dropped else set()
        with h5py.File(path, "r") if rc == 0 else open(os.devnull) as f:
            note = str(f.attrs.get("history_dropped", "")) if rc == 0 else ""
        check(f"{what} damaged: --resume ends with the uninterrupted run's bits"
              + (f" but for the history it drops ({dropped}), named in the warning and in "
                 f"history_dropped" if dropped else " in every dataset"),
              rc == 0 and set(diff) <= allowed and f"/{dataset}" in err and "warning" in err
              and (bool(note) == bool(dropped)) and (not dropped or f"/{dataset}" in note),
              f"{diff} {note!r} {err[-400:]}")
        if dropped == "attn":
            check("... the snapshots kept equal the uninterrupted run's", snapshots_agree(path, ref))
        elif dropped:
            check(f"... the /{dropped} rows kept equal the uninterrupted run's",
                  rows_agree(path, ref, dropped))
        rc, out, err = harness("check", path)
        check(f"... check passes the result{' and names what was dropped' if dropped else ''}",
              rc == 0 and (not dropped or "history lost to damage" in out), out + err)


def one_line_each(err, paths):
    """'' when err is one printable line per path, each naming its path; else what is wrong."""
    lines = err.splitlines()
    if len(lines) != len(paths):
        return f"{len(lines)} lines for {len(paths)} paths: {err!r}"
    for line, p in zip(lines, paths):
        if not line.startswith(p + ": ") or not line.isprintable():
            return f"not one printable line naming {p}: {line!r}"
    return ""


def test_check_says():
    d = os.path.join(TMP, "says")
    os.makedirs(d)
    config, path, ref = killed_at_checkpoint(d)
    ckpt = path + ".ckpt"
    rc, out, err = harness("check", path)
    check(f"check on a path with only a .ckpt: names the checkpoint, its step and --resume: {err.strip()}",
          rc == 2 and not one_line_each(err, [path]) and "a checkpoint at step 20 of 40" in err
          and ckpt in err and "--resume continues it" in err, repr(err))
    rc, out, err = harness("check", ckpt)
    check(f"check on the .ckpt: valid, its step, and that it resumes: {out.strip()}",
          rc == 0 and ": ok (running run" in out and "a checkpoint at step 20 of 40" in out
          and "--resume continues it" in out, out + err)
    # a killed writer's temporary alone (status running, or still marked open)
    only_temp = os.path.join(d, "temp")
    os.makedirs(only_temp)
    tpath = os.path.join(only_temp, "run.h5")
    run([HARNESS, inj.write_config(only_temp, tpath)], env=inj.shim_env(inj.shim_path(HARNESS),
                                                                        kill="rename:1"))
    for name in os.listdir(only_temp):  # the checkpoint's temporary too: the result's alone
        if ".ckpt.tmp." in name:
            os.unlink(os.path.join(only_temp, name))
    temps = sorted(os.path.join(only_temp, n) for n in os.listdir(only_temp) if ".tmp." in n)
    rc, out, err = harness("check", tpath)
    check(f"check on a path with only a killed writer's temporary: says so: {err.strip()[:160]}",
          rc == 2 and len(temps) == 1 and not one_line_each(err, [tpath])
          and "the temporary of a run killed while writing it" in err and "nothing to resume" in err,
          repr(err) + str(temps))
    if temps:
        rc, out, err = harness("check", temps[0])
        check(f"check on that temporary: unfinished, the next run deletes it: {err.strip()[:160]}",
              rc == 2 and not one_line_each(err, temps[:1]) and "killed while writing it" in err
              and "deletes it" in err, repr(err))
    # a directory, a FIFO, nothing; an interrupted run without a checkpoint
    directory = os.path.join(d, "dir.h5")
    os.makedirs(directory)
    fifo = os.path.join(d, "fifo.h5")
    os.mkfifo(fifo)
    nothing = os.path.join(d, "nothing.h5")
    nockpt = os.path.join(d, "nockpt", "run.h5")
    os.makedirs(os.path.dirname(nockpt))
    shutil.copyfile(ckpt, nockpt)
    with h5py.File(nockpt, "r+") as f:
        f.attrs["status"] = "interrupted"
        del f["checkpoint"]
    textsum.reseal(nockpt)  # as the harness seals what it saves
    rc, out, err = harness("check", directory, fifo, nothing, path, timeout=60)
    problem = one_line_each(err, [directory, fifo, nothing, path])
    check("check on a directory, a FIFO, nothing and a checkpoint's path at once: one printable "
          "line each, exit 2", rc == 2 and not problem, problem)
    said = dict(zip([directory, fifo, nothing], err.splitlines()))
    check(f"... a directory: {said.get(directory, '')}", "a directory, not a results file"
          in said.get(directory, ""))
    check(f"... a FIFO: {said.get(fifo, '')}", "not a regular file (a FIFO)" in said.get(fifo, ""))
    check(f"... nothing: {said.get(nothing, '')}", "nothing there" in said.get(nothing, ""))
    rc, out, err = harness("check", nockpt)
    check(f"check on an interrupted run without a checkpoint: {out.strip().splitlines()[-1][:160]}",
          rc == 1 and "no checkpoint (the file records 20 steps of 40" in out
          and "-1" not in out.replace(d, "DIR"),  # no step -1; the temporary folder's name may hold "-1"
          out[-400:])
    nconfig = inj.write_config(os.path.dirname(nockpt), nockpt, steps=40, checkpoint_every=10)
    for args, want in (((), "holds an interrupted run with no checkpoint (the file records 20 steps of 40"),
                       (("--resume",), "nothing to resume")):
        rc, out, err = harness(nconfig, *args)
        check(f"{' '.join(('plain run',) + args)} on it: no step -1: {inj.last_line(err)[:170]}",
              rc == 2 and want in err and "records 20 steps" in err and "step -1" not in err, err)


def inj_run(config):
    p = inj.run(HARNESS, config)
    return p.returncode, p.stdout, p.stderr


def to_old_format(outdir):
    """Every run file of a sweep directory rewritten in the older format without checksums (what
    a harness before them wrote)."""
    for name in os.listdir(outdir):
        if name.endswith(".h5") and name != "summary.h5":
            p = os.path.join(outdir, name)
            subprocess.run(["h5repack", "-f", "NONE", p, p + ".old"], check=True)
            os.replace(p + ".old", p)


# A child that flips each offset it is given in turn (the file rewritten, then restored) and reads
# the whole file with plain h5py, printing each offset before it tries it: the last offset
# printed by a child that died of a signal is a byte that crashes h5py.
FIND_CRASH = r"""
import sys, h5py
path = sys.argv[1]
good = open(path, "rb").read()
for line in sys.stdin:
    off = int(line)
    b = bytearray(good); b[off] ^= 0xFF
    open(path, "wb").write(b)
    print(off, flush=True)
    try:
        with h5py.File(path, "r") as f:
            [f.attrs[k] for k in f.attrs]
            f.visititems(lambda n, o: [o.attrs[k] for k in o.attrs] and None)
            f.visititems(lambda n, o: o[()] if isinstance(o, h5py.Dataset) else None)
    except Exception:
        pass
open(path, "wb").write(good)
"""


def find_crash(path, offsets):
    """An offset whose flipped byte makes plain h5py (no guard) die of a signal reading all of
    path, or None; path is left with that byte flipped (or as it was)."""
    good = open(path, "rb").read()
    import resource
    limit = lambda: resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))  # damaged sizes
    p = subprocess.run([PY, "-c", FIND_CRASH, path], input="\n".join(map(str, offsets)) + "\n",
                       capture_output=True, text=True, timeout=1800, preexec_fn=limit)
    if p.returncode >= 0:
        return None
    offset = int(p.stdout.split()[-1])
    with open(path, "wb") as f:
        f.write(flip_bytes(good, offset))
    return offset


def readers(exp, outdir, victim):
    """Every command that opens results files, on a directory holding one bad file."""
    results_root = os.path.dirname(outdir)
    return [
        ("check", lambda: harness("check", victim)),
        ("plot", lambda: script("plot", victim)),
        ("export", lambda: script("export", victim, "--to", "npz", os.path.join(TMP, "x.npz"))),
        ("inspect", lambda: harness("inspect", victim, "--tokens", "1,2,3")),
        ("prune", lambda: harness("prune", victim)),
        ("sweep", lambda: script("sweep", exp, "--results", results_root)),
        ("sweep --summary-only", lambda: script("sweep", exp, "--results", results_root,
                                                "--summary-only")),
        ("sweep --status", lambda: script("sweep", "--status", outdir)),
        ("sweep --list", lambda: script("sweep", exp, "--results", results_root, "--list")),
        ("compare", lambda: script("compare", outdir)),
        ("compare --tolerance", lambda: script("compare", outdir, "--tolerance", "0.01")),
        ("plot-sweep", lambda: script("plot-sweep", outdir)),
        ("report", lambda: script("report", outdir, "-o", os.path.join(TMP, "r.html"))),
    ]


def test_readers():
    exp, outdir = sweep_dir("readers")
    to_old_format(outdir)
    victim = os.path.join(outdir, "h1_dh8_s0.h5")
    good = open(victim, "rb").read()
    crash = find_crash(victim, range(0, 4096))
    check(f"found a byte of an older-format file that crashes plain h5py ({crash})",
          crash is not None)
    cases = [(f"byte {crash} flipped (plain h5py crashes)", None)] if crash is not None else []
    cases += [(f"truncated to {n} bytes", n) for n in (len(good) // 2, 600)]
    for what, length in cases:
        if length is not None:
            with open(victim, "wb") as f:
                f.write(good[:length])
        summary_before = open(os.path.join(outdir, "summary.csv")).read()
        for name, command in readers(exp, outdir, victim):
            rc, out, err = command()
            problem = "" if name in ("sweep --status", "sweep --list") and rc in (0, 1) \
                and "damaged" in out else clean_failure(rc, out, err, victim)
            if name.split()[0] in ("compare", "plot-sweep", "report") and rc == 0 \
                    and "Traceback" not in out + err:
                problem = ""  # they read summary.h5, which left the damaged run out
            check(f"{what}: {name}: one line naming the file, no signal, no traceback",
                  not problem, problem)
        rows = {r["run"]: r for r in read_csv(os.path.join(outdir, "summary.csv"))}
        check(f"{what}: the summary calls the run damaged, the other complete",
              rows["h1_dh8_s0"]["status"] == "damaged" and rows["h2_dh4_s0"]["status"]
              == "complete", summary_before[:0] + str(rows)[:300])
        check(f"{what}: the damaged file is kept as it is",
              open(victim, "rb").read() == (good[:length] if length else flip_bytes(good, crash)))


def flip_bytes(data, offset):
    b = bytearray(data)
    b[offset] ^= 0xFF
    return bytes(b)


# ------------------------------------------------------------------------------------------------
# fuzz

MICRO = """\
model: {vocab_size: 8, d_model: 4, n_head: 1, n_layer: 1, seq_len: 6}
train: {steps: 2, batch_size: 1, lr: 3.0e-3, warmup_steps: 1, seed: 1, threads: 1}
data: {task: induction, min_period: 2, max_period: 2}
output: {log_every: 1, eval_every: 2, eval_batches: 1, attn_every: 2, probes: 1}
"""

# A child that prints, per file, whether every numeric dataset and numeric attribute holds
# exactly the reference's numbers ("same" / "differs NAME"); run only on files the readers
# accepted, so a crash here is a failure of the guard.
COMPARE = r"""
import sys, h5py, numpy as np
def numbers(path):
    out = {}
    with h5py.File(path, "r") as f:
        def visit(name, o):
            for k, v in o.attrs.items():
                a = np.asarray(v)
                if a.dtype.kind in "iufb":
                    out[name + "@" + k] = a
            if isinstance(o, h5py.Dataset) and o.dtype.kind in "iuf":
                out[name] = o[()]
        visit("/", f)
        f.visititems(visit)
    return out
ref = numbers(sys.argv[1])
for line in sys.stdin:
    path = line.strip()
    try:
        got = numbers(path)
    except Exception as e:
        print("differs", path, "unreadable:", type(e).__name__, flush=True)
        continue
    bad = [k for k in ref if k not in got or not np.array_equal(ref[k], got[k], equal_nan=True)]
    print("same" if not bad else "differs " + path + " " + bad[0], flush=True)
"""


def fuzz_offsets(path):
    """(metadata offsets, data offsets) of a results file: every byte not in a dataset's stored
    chunks is metadata (headers, heaps, B-trees, free space)."""
    spans = []
    with h5py.File(path, "r") as f:
        def visit(name, o):
            if isinstance(o, h5py.Dataset) and o.chunks:
                for i in range(o.id.get_num_chunks()):
                    info = o.id.get_chunk_info(i)
                    spans.append((info.byte_offset, info.size))
        f.visititems(visit)
    in_data = np.zeros(os.path.getsize(path), bool)
    for start, size in spans:
        in_data[start:start + size] = True
    data = sorted({o for start, size in spans for o in (start, start + size // 2, start + size - 1)})
    meta = np.flatnonzero(~in_data)
    if os.environ.get("HEADS_FUZZ_ALL") != "1":
        meta = np.concatenate([meta[meta < 1024], meta[meta >= 1024][::97]])
    return [int(o) for o in meta], data


def test_fuzz():
    d = os.path.join(TMP, "fuzz")
    os.makedirs(d)
    src = os.path.join(d, "micro.h5")
    write(os.path.join(d, "micro.yaml"), MICRO)
    rc, _, err = harness(os.path.join(d, "micro.yaml"), "--set", f"output.path={src}")
    check("the fuzz's tiny run completes", rc == 0, err[-300:])
    meta, data = fuzz_offsets(src)
    original = open(src, "rb").read()
    t0 = time.time()
    counts = {"files": 0, "check ok": 0, "guard ok": 0}
    bad = []
    offsets = meta + data
    for start in range(0, len(offsets), 400):  # 400 files on the disk at a time
        batch = []
        for off in offsets[start:start + 400]:
            p = os.path.join(d, f"f{off:07d}.h5")
            with open(p, "wb") as f:
                f.write(flip_bytes(original, off))
            batch.append(p)
        counts["files"] += len(batch)
        rc, out, err = harness("check", *batch, timeout=3600)
        if rc == "timeout" or rc not in (0, 1, 2) or "Traceback" in err:
            bad.append(f"check of files {batch[0]}..: exit {rc}")
        ok_check = set(re.findall(r"^(\S+): ok \(", out, re.M))
        problems = results.damages(batch)
        ok_guard = {p for p in batch if problems.get(p) == ""}
        odd = [p for p in batch if "\n" in problems.get(p, "") or not (problems.get(p, "") == ""
               or problems[p].startswith(("damaged: ", "not an HDF5")))]
        bad += [f"guard on {p}: {problems.get(p)!r}" for p in odd]
        counts["check ok"] += len(ok_check)
        counts["guard ok"] += len(ok_guard)
        accepted = sorted(ok_check | ok_guard)
        if accepted:
            p = subprocess.run([PY, "-c", COMPARE, src], input="\n".join(accepted) + "\n",
                               capture_output=True, text=True, timeout=3600)
            lines = p.stdout.splitlines()
            if p.returncode != 0 or len(lines) != len(accepted):
                bad.append(f"reading the accepted files died (exit {p.returncode}) after "
                           f"{len(lines)} of {len(accepted)}: {accepted[len(lines)]}")
            bad += [l for l in lines if l != "same"]
        for p in batch:
            os.unlink(p)
    took = time.time() - t0
    check(f"fuzz: {counts['files']} files ({len(meta)} metadata bytes, {len(data)} data bytes) in "
          f"{took:.0f} s: check and the guard never die, hang or accept a changed number "
          f"(check accepted {counts['check ok']}, the guard {counts['guard ok']}; the rest named)",
          not bad, bad[:8])


# The datasets a history_dropped note of a resumed run stands for.
DROPPED = {"attention snapshots": HISTORY["attn"], "/train rows": HISTORY["train"],
           "/eval rows": HISTORY["eval"], "loss by position": ("eval/loss_by_position", "eval/icl_score")}


def resume_one(config_text, d, damaged, ref):
    """--resume from the damaged checkpoint `damaged` in a fresh directory d: (what went wrong,
    '' when it ended well: refused in one line, or complete with the reference's numbers but for
    the history its history_dropped names; how it ended: refused, complete, dropped)."""
    os.makedirs(d)
    config = write(os.path.join(d, "micro.yaml"), config_text.replace("OUT", os.path.join(d, "run.h5")))
    shutil.copyfile(damaged, os.path.join(d, "run.h5.ckpt"))
    rc, out, err = harness(config, "--resume", timeout=600)
    crash = clean_failure(rc, out, err, damaged) if rc != 0 else ""
    if rc == "timeout" or (rc != 0 and (rc != 2 or crash.startswith(("died", "traceback")))):
        return f"{damaged}: --resume {crash or rc}", "bad"
    if rc != 0:
        return "", "refused"
    path = os.path.join(d, "run.h5")
    with h5py.File(path, "r") as f:
        note = str(f.attrs.get("history_dropped", ""))
    allowed = {n for key, names in DROPPED.items() if key in note for n in names}
    differ = set(inj.differences(path, ref)) - allowed
    shutil.rmtree(d, ignore_errors=True)
    if differ:
        return f"{damaged}: --resume accepted it, and {sorted(differ)[:4]} differ (dropped: {note!r})", "bad"
    return "", "dropped" if note else "complete"


MICRO_CKPT = MICRO.replace("steps: 2,", "steps: 4,").replace("probes: 1}", "probes: 1, checkpoint_every: 2,\n"
                                                                    "         path: OUT}")


def test_fuzz_checkpoint():
    """The fuzz's bytes of a checkpoint (of step 2 of 4): harness check over all of them, and
    --resume from each (two at a time)."""
    from concurrent.futures import ThreadPoolExecutor
    d = os.path.join(TMP, "fuzz_ckpt")
    os.makedirs(d)
    ref_dir = os.path.join(d, "ref")
    os.makedirs(ref_dir)
    ref = os.path.join(ref_dir, "run.h5")
    rc, _, err = harness(write(os.path.join(ref_dir, "micro.yaml"), MICRO_CKPT.replace("OUT", ref)))
    check("the fuzz's tiny run with a checkpoint completes", rc == 0, err[-300:])
    killed = os.path.join(d, "killed")
    os.makedirs(killed)
    config = write(os.path.join(killed, "micro.yaml"), MICRO_CKPT.replace("OUT", os.path.join(killed, "run.h5")))
    run([HARNESS, config], env=inj.shim_env(inj.shim_path(HARNESS), kill="rename:2"))
    src = os.path.join(killed, "run.h5.ckpt")
    check("a killed run left the checkpoint of step 2", inj.status(src) == "running")
    meta, data = fuzz_offsets(src)
    original = open(src, "rb").read()
    t0 = time.time()
    files = []
    for off in meta + data:
        p = os.path.join(d, f"c{off:07d}.ckpt")
        with open(p, "wb") as f:
            f.write(flip_bytes(original, off))
        files.append(p)
    rc, out, err = harness("check", *files, timeout=3600)
    bad = [f"check: exit {rc}"] if rc == "timeout" or rc not in (0, 1, 2) or "Traceback" in err else []
    accepted = sorted(set(re.findall(r"^(\S+): ok \(", out, re.M)))
    if accepted:
        p = subprocess.run([PY, "-c", COMPARE, src], input="\n".join(accepted) + "\n",
                           capture_output=True, text=True, timeout=3600)
        bad += [l for l in p.stdout.splitlines() if l != "same"]
    resumes = files if os.environ.get("HEADS_FUZZ_ALL") == "1" else \
        [p for i, p in enumerate(files) if i >= len(meta) or i % 6 == 0]
    with ThreadPoolExecutor(max_workers=2) as pool:
        ended = list(pool.map(lambda p: resume_one(MICRO_CKPT, p + ".d", p, ref), resumes))
    bad += [problem for problem, _ in ended if problem]
    how = {k: sum(1 for _, h in ended if h == k) for k in ("complete", "dropped", "refused")}
    check(f"fuzz of a checkpoint: {len(files)} files ({len(meta)} metadata bytes, {len(data)} data "
          f"bytes) in {time.time() - t0:.0f} s: check accepted {len(accepted)} (the same numbers), "
          f"--resume from {len(resumes)} of them: {how['complete']} ended with the uninterrupted run's "
          f"bits, {how['dropped']} with them but for the history they name dropped, {how['refused']} "
          "refused in one line; no crash, no hang, no silent accept", not bad, bad[:8])


# ------------------------------------------------------------------------------------------------
# a full disk


def mount_tmpfs(name, size):
    """A tmpfs of size bytes at TMP/name, or None (not root, or no mount) with a 'skipped' line."""
    where = os.path.join(TMP, name)
    os.makedirs(where)
    try:
        p = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", where],
                           capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        p = subprocess.CompletedProcess([], 1, "", str(e))
    if p.returncode != 0:
        print(f"skipped - {name}: cannot mount a tmpfs here ({p.stderr.strip()[:100]}): "
              "the full-disk cases need root")
        return None
    return where


def umount(where):
    subprocess.run(["umount", where], capture_output=True)


def fill(where, leave):
    """Leave `leave` bytes free on the file system at where (a new filler file each time)."""
    st = os.statvfs(where)
    free = st.f_bavail * st.f_frsize
    fd, _ = tempfile.mkstemp(prefix="filler.", dir=where)
    with os.fdopen(fd, "wb") as f:
        f.write(b"\0" * max(0, free - leave))


def test_full_disk():
    exp, outdir = sweep_dir("fulldisk")
    disk = mount_tmpfs("small", 512 * 1024)
    if disk is None:
        return
    try:
        shutil.copytree(os.path.dirname(outdir), os.path.join(disk, "results"))
        small = os.path.join(disk, "results", "bad")
        old = {n: open(os.path.join(small, n), "rb").read() for n in ("summary.csv", "summary.h5")}
        fill(disk, 8192)
        rc, out, err = script("sweep", exp, "--results", os.path.join(disk, "results"),
                              "--summary-only")
        check("--summary-only with 8 KiB left: exit 1, 'disk full', no traceback",
              rc == 1 and "disk full" in err and "Traceback" not in out + err, (out + err)[-400:])
        same = all(open(os.path.join(small, n), "rb").read() == old[n] for n in old)
        temps = [n for n in os.listdir(small) if ".tmp." in n]
        check("... the old summary.csv and summary.h5 byte for byte, no temporaries",
              same and not temps, temps)
        for name in os.listdir(small):  # the runs must train again, into a disk with no room
            if name.endswith(".h5") and name != "summary.h5":
                os.unlink(os.path.join(small, name))
        fill(disk, 4096)
        rc, out, err = script("sweep", exp, "--results", os.path.join(disk, "results"))
        check("a run that cannot be written: 'disk full', not 'bad input'",
              rc == 1 and "(disk full)" in out and "bad input" not in out, out[-500:])
    finally:
        umount(disk)


# ------------------------------------------------------------------------------------------------
# small bad inputs


def test_small():
    d = os.path.join(TMP, "small_inputs")
    os.makedirs(d)
    fifo = os.path.join(d, "config.yaml")
    os.mkfifo(fifo)
    rc, out, err = harness(fifo, timeout=30)
    check("a config that is a FIFO: exit 2 at once, 'a FIFO, not a regular file'",
          rc == 2 and "a FIFO, not a regular file" in err and fifo in err, f"{rc} {err}")
    rc, out, err = script("sweep", fifo, timeout=30)
    check("an experiment file that is a FIFO: exit 2 at once",
          rc == 2 and "a FIFO" in err and "Traceback" not in err, f"{rc} {err}")
    base = write(os.path.join(d, "tiny.yaml"), TINY)
    rc, out, err = harness(base, "--set", "train.seed=2", "--set", f"output.path={d}",
                           "--set", "train.steps=3")  # a directory: refused at its --set
    check("an output.path from the 2nd --set: the message says --set:2",
          rc == 2 and err.startswith("--set:2:"), err)
    cpus = len(os.sched_getaffinity(0))
    rc, out, err = harness(base, "--set", f"train.threads={cpus + 1}", "--set",
                           f"output.path={d}/threads.h5")
    check(f"train.threads {cpus + 1} on {cpus} CPUs: a warning naming both, the run completes",
          rc == 0 and re.search(rf"warning: .*train.threads is {cpus + 1}, but this process may "
                                rf"use {cpus} CPUs", err) is not None, err[-300:])
    exp_dir = os.path.join(d, "données é")
    os.makedirs(exp_dir)
    exp = write(os.path.join(exp_dir, "bad.yaml"), EXPERIMENT.format(base=base))
    env = dict(ENV, LC_ALL="C", PYTHONUTF8="0")
    env.pop("LANG", None)
    rc, out, err = script("sweep", exp, "--results", os.path.join(exp_dir, "résultats"), env=env)
    check("a sweep under LC_ALL=C PYTHONUTF8=0 with a non-ASCII path completes",
          rc == 0 and "Traceback" not in out + err, (out + err)[-400:])
    rc, out, err = script("sweep", "--status", os.path.join(exp_dir, "résultats", "bad"), env=env)
    check("... and --status reads it", rc == 0 and "2 complete" in out, (out + err)[-300:])


def main():
    if not os.access(HARNESS, os.X_OK):
        print(f"FAIL - {HARNESS} not built: run `make` first\n0 passed, 1 failed")
        return 1
    t0 = time.time()
    for name, fn in (("checksums", test_checksums), ("data flip", test_data_flip),
                     ("resume", test_resume), ("history", test_history), ("check says", test_check_says),
                     ("readers", test_readers), ("full disk", test_full_disk),
                     ("small inputs", test_small), ("fuzz", test_fuzz),
                     ("fuzz checkpoint", test_fuzz_checkpoint)):
        run_check(name, fn)
    return end_suite(TMP, KEEP, t0)


if __name__ == "__main__":
    sys.exit(main())
