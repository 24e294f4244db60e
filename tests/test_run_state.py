#!/usr/bin/python3
# suite: a run's state, one rule for every command; answers only from verified runs
# suite-args: {harness}
"""tests/test_run_state.py HARNESS [--keep]: a run's state (complete, stale, damaged, missing) is
decided once (heads.sweep.states, the harness's `harness state` comparing resolved configs) and every
command agrees; every reader that answers from a summary answers only from verified runs.
Checks, one line each, then "N passed, M failed":
  sessions     a resumed run's log: --status's step is the last session's, none before it prints one
  resolved     an experiment that writes output.probe_len: 0 (the run records 32): the sweep,
               its summary, --status, the next sweep, compare and plot-sweep all say complete;
               `harness state` agrees; a value that does differ is stale everywhere, named
  every key    each key of `harness --keys` written out in an experiment as the run resolved
               it (and, when the base config leaves it out, as the table's default; 0 of the
               auto keys too): complete, never stale (a text run for data.path's default)
  --set        a sweep's --set values are what --status compares with (experiment.set)
  verified     a run file changed after the summary (a data byte, a config byte, the same byte
               with its mtime put back): compare, plot-sweep and the report name it damaged and
               leave it out, with the count; a damaged summary.h5 is answered from the runs;
               the Python reader and export refuse a flipped config string
  one run      compare, plot-sweep given RUN.h5 name it as a run's file and the commands for
               one run (exit 2); sweep --status RUN.h5 reports that run's state
  fuzz         byte flips in run files (their strings above all) and in summary.h5, through the
               Python reader, export, compare, the report's data and plot-sweep (a few): no
               crash, no answer that differs from the original without naming the damage
               (bounded: about 40 s)
"""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.join(ROOT, "python"))
HARNESS = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("-")
                          else os.path.join(ROOT, "harness"))
os.environ["HARNESS"] = HARNESS
KEEP = "--keep" in sys.argv
TMP = tempfile.mkdtemp(prefix="heads-run-state-")
os.environ["XDG_CACHE_HOME"] = os.path.join(TMP, "cache")  # the guard's verdicts: not the user's
from checks import check, finish, run_check  # noqa: E402
from heads.core import harness  # noqa: E402
from heads.sweep import runstate, states

import h5py  # noqa: E402

PY = "/usr/bin/python3"
TINY = """\
model: {vocab_size: 16, d_model: 8, n_head: 2, n_layer: 1, seq_len: 8}
train: {steps: 6, batch_size: 2, lr: 3.0e-3, warmup_steps: 1, seed: 1, threads: 1}
data: {task: induction, min_period: 2, max_period: 3}
output: {log_every: 2, eval_every: 3, eval_batches: 1, attn_every: 3, probes: 1, prune_step: 0.5}
"""
TEXT = """\
model: {vocab_size: 256, d_model: 8, n_head: 2, n_layer: 1, seq_len: 8}
train: {steps: 2, batch_size: 2, lr: 3.0e-3, warmup_steps: 1, seed: 1, threads: 1}
data: {task: text}
output: {log_every: 1, eval_every: 2, eval_batches: 1, probes: 1, probe_text: ["abcdefgh"]}
"""


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def run(cmd, timeout=300):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout,
                       cwd=TMP)
    return p.returncode, p.stdout, p.stderr


def script(name, *args):
    return run([PY, os.path.join(ROOT, "scripts", name), *args])


def experiment(d, name, base, body):
    return write(os.path.join(d, name + ".yaml"), f"name: {name}\nbase: {base}\n{body}")


def sweep_dir(name, body="grid:\n  model.n_head: [1, 2]\nwidth: fixed_width\nseeds: [0]\n",
              base_text=TINY):
    """A fresh sweep (2 runs by default): (experiment file, results dir)."""
    d = os.path.join(TMP, name)
    os.makedirs(d)
    base = write(os.path.join(d, "base.yaml"), base_text)
    exp = experiment(d, name, base, body)
    rc, out, err = script("sweep", exp, "--results", os.path.join(d, "results"))
    check(f"{name}: the sweep completes", rc == 0, (out + err)[-400:])
    return exp, os.path.join(d, "results", name)


def flip(path, offset, mask=0xFF, keep_mtime=False):
    st = os.stat(path)
    data = bytearray(open(path, "rb").read())
    data[offset] ^= mask
    with open(path, "wb") as f:
        f.write(data)
    if keep_mtime:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


# ------------------------------------------------------------------------------------------------


def test_resolved():
    exp, outdir = sweep_dir("resolved", "set: {output: {probe_len: 0}}\ngrid:\n  model.n_head: [1, 2]\n"
                                        "width: fixed_width\nseeds: [0]\n")
    with h5py.File(os.path.join(outdir, "h1_dh8_s0.h5"), "r") as f:
        recorded = int(f["config"].attrs["probe_len"])
    check(f"the run records the probe length the harness chose for 0 ({recorded})", recorded > 0)
    rc, out, err = script("sweep", "--status", outdir)
    check("--status: 2 complete, exit 0", rc == 0 and "2 complete" in out and "stale" not in out, out + err)
    rc, out, err = script("sweep", exp, "--results", os.path.dirname(outdir))
    check("the next sweep runs nothing: 0 ran, 2 skipped (complete)",
          rc == 0 and "0 ran, 0 failed, 2 skipped" in out and "(2/2 runs complete)" in out, out + err)
    rc, out, err = script("compare", outdir, "--json")
    check("compare answers from both runs", rc == 0 and sum(r["n"] for r in json.loads(out)["rows"]) == 2,
          (out + err)[-300:])
    rc, out, err = script("plot-sweep", outdir)
    check("plot-sweep draws them", rc == 0 and "final_eval_loss" in out, (out + err)[-300:])
    run_file = os.path.join(outdir, "h1_dh8_s0.h5")
    base = os.path.join(os.path.dirname(os.path.dirname(outdir)), "base.yaml")
    rc, out, err = run([HARNESS, "state", base, "--set", "model.n_head=1", "--set", "model.d_head=8",
                        "--set", "train.seed=0", "--set", "output.probe_len=0", run_file])
    check("harness state: complete (exit 0)", rc == 0 and out.strip().endswith(": complete"), out + err)
    rc, out, err = run([HARNESS, "state", base, "--set", "model.n_head=1", "--set", "model.d_head=8",
                        "--set", "train.seed=0", "--set", "train.threads=2", "--set",
                        "output.path=/elsewhere/r.h5", run_file])
    check("harness state: another thread count and output.path are not differences",
          rc == 0 and out.strip().endswith(": complete"), out + err)
    rc, out, err = run([HARNESS, "state", base, "--set", "model.n_head=1", "--set", "model.d_head=8",
                        "--set", "train.seed=0", "--set", "output.probe_len=4", run_file])
    check("harness state: another probe length is stale, named (exit 1)",
          rc == 1 and f"output.probe_len {recorded} -> 4" in out, out + err)
    # the experiment changed: the same rule, stale everywhere
    write(exp, open(exp).read().replace("probe_len: 0", "probe_len: 4"))
    rc, out, err = script("sweep", exp, "--results", os.path.dirname(outdir), "--list")
    check("--list: both stale, what differs named", out.count("stale") == 2
          and f"output.probe_len {recorded} -> 4" in out, out + err)
    shutil.copy(exp, os.path.join(outdir, "experiment.yaml"))  # what a sweep would leave there
    rc, out, err = script("sweep", "--status", outdir)
    check("--status: 2 stale, exit 1", rc == 1 and "2 stale" in out, out + err)
    rc, out, err = script("compare", outdir)
    check("compare: no complete runs, the stale ones named (exit 2)",
          rc == 2 and "2 stale runs" in err and "output.probe_len" in err, out + err)


def key_values(base_cfg, resolved, key, row):
    """The values an experiment may write for key that must leave a run complete."""
    section, name = key.split(".")
    values = [resolved[section][name]]
    if name not in (base_cfg.get(section) or {}):
        values.append(row["default"])
    if key in ("model.d_head", "model.n_kv_head", "model.rope_dims", "output.probe_len"):
        values.append(0)  # 0 = the harness chooses
    return values


def test_log_sessions():
    """--status reads a running run's step from its log: a resumed run's log keeps the earlier
    session's steps, which must not pass for the new session's (a run just resubmitted showed
    the step where its last session died, and was taken to be training)."""
    path = os.path.join(TMP, "sessions.log")
    first = "# harness x.yaml\n# started 2026-12-06 09:00:00 on vm (pid 1)\nstep 40/100 | loss 2.0\n"
    write(path, first + "# harness x.yaml --resume\n# started 2026-12-06 09:05:00 on vm (pid 2)\n")
    log = runstate.RunLog(path)
    check("a resumed run's log before its first step: no progress (not the earlier session's step 40)",
          log.progress is None and log.started == "2026-12-06 09:05:00", f"{log.progress} {log.started}")
    write(path, first + "# harness x.yaml --resume\n# started 2026-12-06 09:05:00 on vm (pid 2)\nstep 41/100\n")
    check("... and its own step once it prints one", runstate.RunLog(path).progress == (41, 100))


def test_every_key():
    import yaml
    from heads.sweep.experiments import Experiment
    total, bad = 0, []
    for kind, base_text, task_keys in (("induction", TINY, None), ("text", TEXT, {"data.path"})):
        d = os.path.join(TMP, "keys-" + kind)
        os.makedirs(d)
        base = write(os.path.join(d, "base.yaml"), base_text)
        run_path = os.path.join(d, "s1.h5")  # the one run of an experiment without a grid
        rc, _, err = run([HARNESS, base, "--set", f"output.path={run_path}"])
        check(f"every key: the {kind} run completes", rc == 0, err[-300:])
        with h5py.File(run_path, "r") as f:
            resolved = yaml.safe_load(f.attrs["config_yaml"])
        base_cfg = yaml.safe_load(base_text)
        for key, row in harness.config_keys().items():
            if key in ("output.path", "train.threads", "output.probe_text") or \
                    (task_keys is not None and key not in task_keys):
                continue  # chosen by the sweep (not compared) / a list (set: takes scalars)
            for value in key_values(base_cfg, resolved, key, row):
                text = f"set: {{{key}: {json.dumps(value)}}}\n"
                exp = Experiment(experiment(d, "k", base, text))
                found = states.file_states(d, [exp.runs[0].name], exp)[exp.runs[0].name]
                total += 1
                if found.state != "complete":
                    bad.append(f"{kind} {key}: {value!r}: {found.state} ({found.detail})")
    check(f"every key: {total} values written out as the run resolved them or as their defaults: "
          "complete, none stale", total > 60 and not bad, "; ".join(bad[:6]))
    exp = Experiment(experiment(os.path.join(TMP, "keys-induction"), "k",
                                os.path.join(TMP, "keys-induction", "base.yaml"), "set: {train.lr: 0.01}\n"))
    found = states.file_states(os.path.join(TMP, "keys-induction"), [exp.runs[0].name], exp)
    st = found[exp.runs[0].name]
    check("... and a value that differs is stale, named", st.state == "stale" and "train.lr 0.003 -> 0.01"
          in st.detail, st.detail)


def test_sets():
    d = os.path.join(TMP, "sets")
    os.makedirs(d)
    base = write(os.path.join(d, "base.yaml"), TINY)
    exp = experiment(d, "sets", base, "grid:\n  train.seed: [0]\n")
    rc, out, err = script("sweep", exp, "--results", os.path.join(d, "results"), "--set", "train.lr=0.01")
    check("a sweep with --set completes", rc == 0, (out + err)[-300:])
    rc, out, err = script("sweep", "--status", os.path.join(d, "results", "sets"))
    check("--status compares with the sweep's --set values too (complete)", rc == 0 and "1 complete" in out,
          out + err)


def summary_answers(outdir):
    rc, out, err = script("compare", outdir, "--json")
    return rc, (json.loads(out) if rc == 0 else None), err


def test_verified():
    exp, outdir = sweep_dir("verified")
    rc, before, _ = summary_answers(outdir)
    victim = os.path.join(outdir, "h1_dh8_s0.h5")
    good = open(victim, "rb").read()
    with h5py.File(victim, "r") as f:
        data_at = f["eval/loss"].id.get_chunk_info(0).byte_offset
    text_at = good.index(b"probe_len: ") + 11
    for what, offset, keep in (("a data byte", data_at, False), ("a config_yaml byte", text_at, False),
                               ("a config_yaml byte, its mtime put back", text_at, True)):
        with open(victim, "wb") as f:
            f.write(good)
        flip(victim, offset, 0x01, keep_mtime=keep)
        rc, out, err = script("compare", outdir, "--json")
        rows = json.loads(out)["rows"] if rc == 0 else []
        rc2, out2, err2 = script("compare", outdir)
        check(f"{what}: compare answers from the other run only and names the damaged one, with the count",
              rc == 0 and sum(r["n"] for r in rows) == 1 and "1 damaged run" in out2
              and "h1_dh8_s0.h5" in out2, (out + err + out2 + err2)[-400:])
        rc, out, err = script("plot-sweep", outdir)
        check(f"{what}: plot-sweep names it and leaves it out",
              rc == 0 and "1 damaged run" in err and "h1_dh8_s0" in err, (out + err)[-300:])
        rc, out, err = script("report", outdir, "-o", os.path.join(TMP, "verified.html"))
        page = open(os.path.join(TMP, "verified.html")).read() if rc == 0 else ""
        check(f"{what}: the report names it and leaves it out", rc == 0 and "1 damaged run" in page,
              (out + err)[-300:])
    with open(victim, "wb") as f:
        f.write(good)
    rc, again, _ = summary_answers(outdir)
    check("the file put back: the same answers as before", rc == 0 and again == before)
    # a damaged summary.h5: answered from the run files
    summary_h5 = os.path.join(outdir, "summary.h5")
    flip(summary_h5, os.path.getsize(summary_h5) - 100)
    rc, out, err = script("compare", outdir)
    rc2, rebuilt, _ = summary_answers(outdir)
    check("a flipped byte of summary.h5: compare answers from the runs, says so, the same numbers",
          rc == 0 and "summary.h5 is damaged" in out and rebuilt == before, (out + err)[-400:])
    # the Python reader and export
    flip(victim, text_at, 0x01)
    from heads import results
    from heads.core.cli import UserError
    try:
        results.RunResult(victim)
        said = ""
    except UserError as e:
        said = str(e)
    check("the Python reader refuses a flipped config string, naming the text checksum",
          "text checksum fails" in said and victim in said, said)
    rc, out, err = script("export", victim, "--to", "npz", os.path.join(TMP, "x.npz"))
    check("export refuses it (exit 2, no file)", rc == 2 and "text checksum" in err
          and not os.path.exists(os.path.join(TMP, "x.npz")), err)


def test_one_run():
    exp, outdir = sweep_dir("onerun")
    run_file = os.path.join(outdir, "h2_dh4_s0.h5")
    for name in ("compare", "plot-sweep"):
        rc, out, err = script(name, run_file)
        check(f"{name} RUN.h5: names it as a run's file and the commands for one run (exit 2)",
              rc == 2 and "a run's results file, not a sweep's results directory" in err
              and "scripts/plot" in err and "harness check" in err and "Traceback" not in err, err)
    rc, out, err = script("sweep", "--status", run_file)
    check("sweep --status RUN.h5: that run's state (complete, exit 0)",
          rc == 0 and "run h2_dh4_s0 of onerun: complete" in out, out + err)


# ------------------------------------------------------------------------------------------------
# fuzz: the readers run in one child (imported once); a case the child dies on is a crash

DRIVER = r"""
import json, os, sys, traceback
sys.path.insert(0, sys.argv[1])
from heads.answers import compare
from heads.export import export
from heads.plots import plot_sweep
from heads.report import report_sweep
from heads import results
from heads.read import verify
from heads.core.cli import UserError
import numpy as np

def reader(path):
    r = results.Run(path)
    p = r.params()
    return {"status": r.status, "config": {k: str(v) for k, v in r.config.items()},
            "yaml": r.config_yaml, "train": r.train_loss.tolist(), "eval": r.eval_loss.tolist(),
            "classes": r.classes, "params": {k: v.tobytes().hex() for k, v in p.items()}}

def exported(path, out):
    export.export(path, "npz", out)
    with np.load(out) as z:
        arrays = {k: z[k].tobytes().hex() for k in z.files}
    meta = json.load(open(export.sidecar_path(out)))
    return {"arrays": arrays, "meta": meta}

def compared(d):
    s = results.Summary(d)
    return {"json": compare.comparison(s)["json"], "note": s.left_out_note()}

def reported(d):
    data = json.loads(json.dumps(report_sweep.read_sweep(d), default=str))
    notes = data["compare"].pop("notes")  # the page's notes: what it left out, rebuilt
    return {"data": data, "note": " ".join(notes)}

def plotted(d):
    out = d + "-plots"
    sys.argv = ["plot-sweep", d, "-o", out]
    import io, contextlib
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            plot_sweep.main(plot_sweep.__doc__)
        except SystemExit as e:
            if e.code:
                raise UserError(err.getvalue().strip())
    csvs = {n: open(os.path.join(out, n)).read() for n in sorted(os.listdir(out)) if n.endswith(".csv")}
    return {"csv": csvs, "note": err.getvalue()}

READERS = {"reader": lambda c: reader(c["file"]), "export": lambda c: exported(c["file"], c["out"]),
           "compare": lambda c: compared(c["dir"]), "report": lambda c: reported(c["dir"]),
           "plot": lambda c: plotted(c["dir"])}
cases = [json.loads(l) for l in sys.stdin]
verify.verdicts([os.path.join(c["dir"], n) for c in cases for n in os.listdir(c["dir"])
                 if n.endswith(".h5")])  # one guard child for every file
for c in cases:
    for name in c["readers"]:
        try:
            got = {"ok": READERS[name](c)}
        except UserError as e:
            got = {"refused": str(e)}
        except SystemExit as e:
            got = {"refused": str(e)}
        except Exception:
            got = {"crash": traceback.format_exc()[-400:]}
        print(json.dumps({"case": c["id"], "reader": name, **got}, sort_keys=True), flush=True)
"""


def drive(cases):
    """{(case id, reader): outcome} of the cases, through DRIVER children (restarted after a
    death, which is the crash of the case it was in)."""
    done, todo = {}, list(cases)
    while todo:
        p = subprocess.run([PY, "-c", DRIVER, os.path.join(ROOT, "python")], capture_output=True,
                           text=True, timeout=900, cwd=TMP,
                           input="".join(json.dumps(c) + "\n" for c in todo))
        for line in p.stdout.splitlines():
            r = json.loads(line)
            done[(r["case"], r["reader"])] = r
        left = [c for c in todo if any((c["id"], n) not in done for n in c["readers"])]
        if left and p.returncode != 0:
            first = left[0]
            for n in first["readers"]:
                done.setdefault((first["id"], n), {"crash": f"the reader died (exit {p.returncode}): "
                                                            f"{p.stderr[-300:]}"})
            left = left[1:]
        elif left:
            break
        todo = left
    return done


def names_damage(outcome, run):
    """Whether a reader that answered named the run as damaged (left out, with the count)."""
    note = outcome["ok"].get("note", "")
    return run in note and "damaged" in note


def silent(reader, outcome, original, run):
    """Why an outcome is a silent accept ('' when it is not): an answer that differs from the
    original's without naming the damaged run."""
    if "ok" not in outcome:
        return ""
    got, want = dict(outcome["ok"]), dict(original["ok"])
    got.pop("note", None)
    want.pop("note", None)
    if got == want:
        return ""
    if reader in ("compare", "report", "plot") and names_damage(outcome, run):
        return ""
    return f"{reader}: another answer, damage not named"


def make_case(src_dir, cid, target, offset, readers):
    d = os.path.join(TMP, "fuzz", f"c{cid}")
    shutil.copytree(src_dir, d, ignore=shutil.ignore_patterns("plots", ".run-locks"))
    flip(os.path.join(d, target), offset)
    return {"id": cid, "dir": d, "file": os.path.join(d, "h1_dh8_s0.h5"),
            "out": os.path.join(TMP, "fuzz", f"x{cid}.npz"), "readers": readers}


def string_offsets(data):
    """Offsets inside HDF5's global heap collections (where every string lives)."""
    out, at = [], data.find(b"GCOL")
    while at >= 0:
        size = int.from_bytes(data[at + 8:at + 16], "little")
        out += range(at + 16, min(at + size, len(data)))
        at = data.find(b"GCOL", at + 4)
    return out


def test_fuzz():
    t0 = time.time()
    _, outdir = sweep_dir("fuzz-src")
    os.makedirs(os.path.join(TMP, "fuzz"))
    run_bytes = open(os.path.join(outdir, "h1_dh8_s0.h5"), "rb").read()
    summary_size = os.path.getsize(os.path.join(outdir, "summary.h5"))
    rng = random.Random(39)
    strings = string_offsets(run_bytes)
    run_offsets = rng.sample(strings, 36) + rng.sample(range(len(run_bytes)), 12)
    summary_offsets = rng.sample(range(summary_size), 20)
    every = ["reader", "export", "compare", "report"]
    cases = [{"id": 0, "dir": outdir, "file": os.path.join(outdir, "h1_dh8_s0.h5"),
              "out": os.path.join(TMP, "fuzz", "x0.npz"), "readers": every + ["plot"]}]
    for k, off in enumerate(run_offsets):
        cases.append(make_case(outdir, len(cases), "h1_dh8_s0.h5", off,
                               every + (["plot"] if k % 20 == 0 else [])))
    for k, off in enumerate(summary_offsets):
        cases.append(make_case(outdir, len(cases), "summary.h5", off,
                               ["compare", "report"] + (["plot"] if k % 10 == 0 else [])))
    outcomes = drive(cases)
    crashes, accepts, counts = [], [], {"answered": 0, "refused": 0}
    for c in cases[1:]:
        for reader in c["readers"]:
            o = outcomes.get((c["id"], reader), {"crash": "no outcome"})
            if "crash" in o:
                crashes.append(f"case {c['id']} {reader}: {o['crash']}")
                continue
            counts["answered" if "ok" in o else "refused"] += 1
            why = silent(reader, o, outcomes[(0, reader)], "h1_dh8_s0")
            if why:
                accepts.append(f"case {c['id']} ({c['file']}): {why}")
    originals_ok = all("ok" in outcomes.get((0, r), {}) for r in cases[0]["readers"])
    check("fuzz: the readers answer on the undamaged sweep", originals_ok,
          str({r: outcomes.get((0, r)) for r in cases[0]["readers"]})[:600])
    check(f"fuzz: {len(run_offsets)} flips of a run file ({len(strings)} string bytes, 36 of them "
          f"tried), {len(summary_offsets)} of summary.h5, {sum(len(c['readers']) for c in cases[1:])} "
          f"reads in {time.time() - t0:.0f} s: 0 crashes, 0 silent accepts ({counts['answered']} "
          f"answered with the original's answer or the damage named, {counts['refused']} refused)",
          not crashes and not accepts, "\n    ".join([""] + (crashes + accepts)[:8]))


def main():
    try:
        run_check("a resumed run's log: the last session's progress", test_log_sessions)
        run_check("resolved configs: one state", test_resolved)
        run_check("every key with a default or an automatic value", test_every_key)
        run_check("a sweep's --set values", test_sets)
        run_check("answers only from verified runs", test_verified)
        run_check("a run's file given to a sweep-level command", test_one_run)
        run_check("byte-flip fuzz of the Python readers", test_fuzz)
    finally:
        if KEEP:
            print(f"kept {TMP}")
        else:
            shutil.rmtree(TMP, ignore_errors=True)
    return finish()


if __name__ == "__main__":
    sys.exit(main())
