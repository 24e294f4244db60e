#!/usr/bin/python3
# suite: hostile folders and files: links, FIFOs, devices, crafted strings, deep configs, signals
# suite-args: --harness {harness}
"""tests/test_hostile.py --harness HARNESS [--keep]: what anyone who can write into a results folder,
or hand over a results file, can put in the way (docs/reliability.md, "Shared folders and files
from others"). Checks, one line each, then "N passed, M failed":
  links      a symbolic link to a victim file at every path the harness and the scripts write: the
             run's <path>.lock, <path>, <path>.ckpt, the report's page, plot's figures and their
             .csv, export's output, a sweep's .sweep.lock, .run-locks/<run>.lock, <run>.log and
             summary.csv: the victim never changes; the command refuses in one line naming the
             path (exit != 0) or replaces the link (the path then holds a regular file)
  blocking   a FIFO, a device (/dev/null) and a directory at every path a command reads (a run
             file for check, inspect, generate, prune, analyze, plot, report, export, the Python
             reader; train.init_from, data.path, data.tokenizer; the config) and at the lock and
             figure paths: refused in one line within 3 s, never waited on
  depth      a 1 MB config nested 500,000 deep: file:line:col, exit 2, within 1 s
  signals    SIGTERM in the end-of-run study of a run and in scripts/report: the process ends
             within 2 s, no temporary and no lock left, the trained checkpoint kept, and
             --resume then ends the run
  crafted    the standing fuzz: a generator of well-formed results files (checksums recomputed,
             as anyone can) whose every string holds HTML, script, terminal escapes, control
             bytes or nothing, run against harness check, inspect, generate, scripts/plot,
             report, export and the Python reader: correct output or a one-line refusal, no
             traceback, no escape byte on a terminal; each page in headless Chromium runs no
             script of the file (window.__pwned stays unset) and shows the strings as text
  trust      NaN parameters: check flags them, generate/inspect/plot/report refuse; a stored
             config the harness refuses (n_head -1) is refused by every Python reader with the
             harness's message; the readers work under `ulimit -v` 3 GiB
"""
import glob
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import h5py  # noqa: E402
import numpy as np  # noqa: E402
from checks import browser, check, end_suite, harness_missing, run_check, write  # noqa: E402
from heads.read import textsum  # noqa: E402

PY = "/usr/bin/python3"
HARNESS = os.path.abspath(sys.argv[sys.argv.index("--harness") + 1]) if "--harness" in sys.argv \
    else os.path.join(ROOT, "harness")
os.environ["HARNESS"] = HARNESS
TMP = tempfile.mkdtemp(prefix="test_hostile.")
TINY = """\
model: {vocab_size: 16, d_model: 16, n_head: 2, d_head: 8, n_layer: 2, seq_len: 16}
train: {steps: 20, batch_size: 4, lr: 1.0e-2, warmup_steps: 2, seed: 0, threads: 1}
data: {task: induction, min_period: 2, max_period: 6}
output: {log_every: 5, eval_every: 10, eval_batches: 1, attn_every: 10, probes: 2}
"""
VICTIM_TEXT = "the victim's own bytes\n"
# heads.results.Run on a file, as a program using the package would: a UserError is its one line
READER = ("import sys; sys.path.insert(0, sys.argv[1]); from heads import results\n"
          "try:\n    results.Run(sys.argv[2]); print(\"read\")\n"
          "except results.UserError as e:\n    sys.exit(str(e))")


def run(cmd, timeout=120, **kw):
    """cmd's (exit status, stdout, stderr, seconds); status None when it had to be killed."""
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, timeout=timeout, **kw)
        return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace"), \
            time.time() - t0
    except subprocess.TimeoutExpired as e:
        return None, "", (e.stderr or b"").decode("utf-8", "replace"), time.time() - t0


def script(name, *args, timeout=120, **kw):
    return run([PY, os.path.join(ROOT, "scripts", name)] + [str(a) for a in args], timeout, **kw)


def harness(*args, timeout=120):
    return run([HARNESS] + [str(a) for a in args], timeout)


def tiny_run(path, *sets):
    cfg = write(os.path.join(TMP, "tiny.yaml"), TINY)
    cmd = [HARNESS, cfg, "--force", "--set", f"output.path={path}"]
    for s in sets:
        cmd += ["--set", s]
    rc, _, err, _ = run(cmd)
    if rc != 0:
        raise RuntimeError(f"the tiny run failed: {err[-300:]}")
    return path


def victim():
    path = os.path.join(TMP, "victim.txt")
    with open(path, "w") as f:
        f.write(VICTIM_TEXT)
    return path


def victim_intact():
    with open(os.path.join(TMP, "victim.txt")) as f:
        return f.read() == VICTIM_TEXT


def plant_link(path):
    if os.path.lexists(path):
        os.unlink(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    os.symlink(victim(), path)


def refused_or_replaced(name, path, rc, err):
    """The one rule: the victim unchanged, and either a one-line refusal naming the path (exit
    != 0) or the link replaced by a regular file."""
    replaced = not os.path.islink(path) and os.path.isfile(path)
    refused = rc not in (0, None) and os.path.basename(path) in err and os.path.islink(path)
    check(f"link at {name}: victim unchanged, {'replaced' if replaced else 'refused'}",
          victim_intact() and (replaced or refused), f"rc {rc}: {err.strip()[-300:]}")


# ------------------------------------------------------------------------------------------------


def test_links():
    base = tiny_run(os.path.join(TMP, "links", "base.h5"))
    out = os.path.join(TMP, "links", "run.h5")
    cfg = os.path.join(TMP, "tiny.yaml")
    for suffix, sets in ((".lock", []), ("", []), (".ckpt", ["output.checkpoint_every=5"])):
        path = out + suffix
        for p in glob.glob(out + "*"):
            os.unlink(p)
        plant_link(path)
        cmd = [cfg, "--set", f"output.path={out}"]
        for s in sets:
            cmd += ["--set", s]
        rc, _, err, _ = harness(*cmd)
        refused_or_replaced(f"the run's {suffix or 'results path'}", path, rc, err)
        if suffix == ".lock":
            check("the refusal is one line, exit 2, and nothing else is written",
                  rc == 2 and len(err.strip().splitlines()) == 1 and not os.path.exists(out), err)
    page = os.path.join(TMP, "links", "page.html")
    plant_link(page)
    rc, _, err, _ = script("report", base, "-o", page)
    refused_or_replaced("the report's page", page, rc, err)
    npz = os.path.join(TMP, "links", "out.npz")
    plant_link(npz)
    rc, _, err, _ = script("export", base, "--to", "npz", npz)
    refused_or_replaced("export's output", npz, rc, err)
    figures = os.path.join(TMP, "links", "figs")
    rc, _, err, _ = script("plot", base, "-o", figures)
    made = sorted(os.listdir(figures)) if rc == 0 else []
    check("scripts/plot makes its figures", rc == 0 and made, err[-300:])
    for name in [n for n in made if n.endswith(".png")][:1] + [n for n in made if n.endswith(".csv")][:1]:
        shutil.rmtree(figures)
        plant_link(os.path.join(figures, name))
        rc, _, err, _ = script("plot", base, "-o", figures)
        refused_or_replaced(f"plot's {name}", os.path.join(figures, name), rc, err)
    test_sweep_links()


def test_sweep_links():
    exp = write(os.path.join(TMP, "exp.yaml"),
                f"base: {os.path.join(TMP, 'tiny.yaml')}\ngrid:\n  model.n_head: [1]\nseeds: 1\n")
    results = os.path.join(TMP, "sweeps")
    outdir = os.path.join(results, "exp")
    rc, out, err, _ = script("sweep", exp, "--results", results, timeout=300)
    runs = [n[:-3] for n in os.listdir(outdir) if n.endswith(".h5") and not n.startswith("summary")] \
        if os.path.isdir(outdir) else []
    if not check("a one-run sweep completes", rc == 0 and len(runs) == 1, (out + err)[-300:]):
        return
    name = runs[0]
    for rel in (".sweep.lock", f".run-locks/{name}.lock", f"{name}.log", "summary.csv"):
        shutil.rmtree(outdir)
        path = os.path.join(outdir, rel)
        plant_link(path)
        rc, out, err, _ = script("sweep", exp, "--results", results, timeout=300)
        refused_or_replaced(f"a sweep's {rel}", path, rc, out + err)
    # FIFOs where a sweep's readers look: the run's log, the summary
    shutil.rmtree(outdir)
    rc, out, err, _ = script("sweep", exp, "--results", results, timeout=300)
    for rel, reader in ((f"{name}.log", ["sweep", "--status", outdir]), ("summary.h5", ["compare", outdir]),
                        ("summary.h5", ["report", outdir]), ("summary.csv", ["sweep", exp, "--results", results])):
        path = os.path.join(outdir, rel)
        if os.path.lexists(path):
            os.unlink(path)
        os.mkfifo(path)
        rc, out, err, secs = script(*reader, timeout=20)
        check(f"a FIFO at a sweep's {rel}: scripts/{' '.join(reader[:2]) if reader[1].startswith('-') else reader[0]} "
              f"answers within 5 s (exit {rc}), no traceback", rc is not None and secs < 5 and "Traceback" not in err,
              f"{secs:.1f} s: {(out + err).strip()[-300:]}")
        if os.path.exists(path) and not os.path.isfile(path):
            os.unlink(path)


def test_blocking():
    good = tiny_run(os.path.join(TMP, "block", "good.h5"))
    fifo = os.path.join(TMP, "block", "fifo.h5")
    os.mkfifo(fifo)
    folder = os.path.join(TMP, "block", "dir.h5")
    os.mkdir(folder)
    cfg = os.path.join(TMP, "tiny.yaml")
    out = os.path.join(TMP, "block", "new.h5")
    for kind, path in (("a FIFO", fifo), ("a device", "/dev/null"), ("a directory", folder)):
        cases = [("harness check", [HARNESS, "check", path]),
                 ("harness inspect", [HARNESS, "inspect", path, "--tokens", "1,2"]),
                 ("harness generate", [HARNESS, "generate", path, "--tokens", "1,2"]),
                 ("harness prune", [HARNESS, "prune", path]),
                 ("harness analyze", [HARNESS, "analyze", path]),
                 ("harness check --stored", [HARNESS, "check", "--stored", path]),
                 ("train.init_from", [HARNESS, cfg, "--set", f"output.path={out}", "--set", f"init_from={path}"]),
                 ("data.path", [HARNESS, cfg, "--set", f"output.path={out}", "--set", "task=tokens",
                                "--set", f"data.path={path}"]),
                 ("the config", [HARNESS, path]),
                 ("scripts/plot", [PY, os.path.join(ROOT, "scripts", "plot"), path]),
                 ("scripts/report", [PY, os.path.join(ROOT, "scripts", "report"), path, "-o",
                                     os.path.join(TMP, "block", "r.html")]),
                 ("scripts/export", [PY, os.path.join(ROOT, "scripts", "export"), path, "--to", "npz",
                                     os.path.join(TMP, "block", "e.npz")]),
                 ("the Python reader", [PY, "-c", READER, os.path.join(ROOT, "python"), path])]
        for what, cmd in cases:
            rc, stdout, err, secs = run(cmd, timeout=10)
            said = err if what != "harness check --stored" else stdout  # its answers go to stdout
            lines = [line for line in said.strip().splitlines() if not line.startswith("warning")]
            check(f"{kind} read by {what}: refused in one line within 3 s",
                  rc not in (0, None) and secs < 3 and len(lines) >= 1 and "Traceback" not in err,
                  f"rc {rc}, {secs:.1f} s: {err.strip()[-200:]}")
    left = glob.glob(out + "*")
    check("the refused runs left nothing at their output path", not left,
          f"{left}: {open(left[0], errors='replace').read()[:200] if left and os.path.isfile(left[0]) else ''}")
    for path in left:
        os.unlink(path)
    # FIFOs where the commands write or peek: the lock, a figure
    lock_fifo = out + ".lock"
    os.mkfifo(lock_fifo)
    rc, _, err, secs = harness(cfg, "--set", f"output.path={out}", timeout=10)
    check("a FIFO at a run's <path>.lock: refused in one line at once", rc == 2 and secs < 3 and
          "not a regular file" in err, f"rc {rc}: {err.strip()}")
    rc, _, err, secs = harness("check", out, timeout=10)
    check("harness check beside a FIFO lock: answers at once", rc is not None and secs < 3, err)
    rc, _, err, secs = script("report", good, "-o", lock_fifo, timeout=10)
    check("scripts/report onto a FIFO: the FIFO replaced by the page, at once",
          rc == 0 and secs < 5 and os.path.isfile(lock_fifo), err)
    figures = os.path.join(TMP, "block", "figs")
    os.makedirs(figures)
    os.mkfifo(os.path.join(figures, "loss.png"))
    rc, _, err, secs = script("plot", good, "-o", figures, timeout=20)
    check("scripts/plot with a FIFO at a figure: refused in one line, not waited on",
          rc not in (0, None) and "loss.png" in err and secs < 15, f"rc {rc}: {err.strip()[-300:]}")


def test_depth():
    path = os.path.join(TMP, "deep.yaml")
    with open(path, "w") as f:
        f.write("model: " + "[" * 500000 + "]" * 500000 + "\n")
    rc, _, err, secs = harness(path, timeout=30)
    check("a config nested 500,000 deep: file:line:col, exit 2, within 1 s",
          rc == 2 and secs < 1 and err.startswith(f"{path}:1:") and "nests more than" in err,
          f"rc {rc}, {secs:.2f} s: {err.strip()[:200]}")
    rc, _, err, secs = harness(os.path.join(TMP, "tiny.yaml"), "--set", "probe_text=" + "[" * 100000,
                               "--shapes", timeout=30)
    check("a --set value nested 100,000 deep: refused within 1 s", rc == 2 and secs < 1,
          f"rc {rc}, {secs:.2f} s: {err.strip()[:200]}")


def test_signals():
    out = os.path.join(TMP, "sig", "study.h5")
    os.makedirs(os.path.dirname(out))
    heads12 = os.path.join(ROOT, "configs", "heads12.yaml")
    proc = subprocess.Popen([HARNESS, heads12, "--set", "steps=2", "--set", f"output.path={out}",
                             "--set", "threads=1"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while proc.poll() is None and not os.path.exists(out + ".ckpt") and time.time() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)  # inside the study, which takes seconds
    caught = proc.poll() is None
    t0 = time.time()
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    secs = time.time() - t0
    err = proc.stderr.read().decode("utf-8", "replace")
    left = sorted(os.path.basename(p) for p in glob.glob(out + "*"))
    if caught:
        check("SIGTERM in the study: exit 130 within 2 s, only the trained checkpoint left",
              proc.returncode == 130 and secs < 2 and left == ["study.h5.ckpt"],
              f"rc {proc.returncode}, {secs:.2f} s, left {left}: {err.strip()[-200:]}")
        rc, _, err, _ = harness(heads12, "--set", "steps=2", "--set", f"output.path={out}",
                                "--set", "threads=1", "--resume", timeout=300)
        check("--resume after it runs only the study and completes", rc == 0 and
              "no training step is repeated" in err, err[-300:])
    else:
        check("SIGTERM in the study (the run ended before the signal: not caught)", True)
    # scripts/report stopped while it reads and writes
    big = os.path.join(TMP, "sig", "big.h5")
    tiny_run(big, "steps=200", "attn_every=2", "probes=8")
    page = os.path.join(TMP, "sig", "page.html")
    write(page, "the earlier page\n")
    for delay in (0.3, 0.6, 0.9):
        proc = subprocess.Popen([PY, os.path.join(ROOT, "scripts", "report"), big, "-o", page],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(delay)
        t0 = time.time()
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
        secs = time.time() - t0
        temps = glob.glob(os.path.join(TMP, "sig", ".report.*"))
        with open(page) as f:
            whole = f.read()
        check(f"SIGTERM to scripts/report after {delay} s: ended within 2 s, no temporary, the page "
              "whole (the earlier one or the new one)", secs < 2 and not temps and
              (whole == "the earlier page\n" or whole.rstrip().endswith("</html>")),
              f"{secs:.2f} s, rc {proc.returncode}, temps {temps}")


# ---- the standing fuzz: crafted files

PAYLOADS = [
    '<img src=x onerror="window.__pwned=1">',
    "<script>window.__pwned=2</script>",
    '"><svg onload="window.__pwned=3"><a href="javascript:window.__pwned=4">x</a>',
    "\x1b]0;PWNED\x07\x1b[2J\r\x08\x01 escape",
    "",
    "</script><script>window.__pwned=5</script>" + "A" * 3000,
]
KEEP = {"config_yaml", "format_version", "status", "text_checksum", "CLASS", "NAME", "REFERENCE_LIST",
        "DIMENSION_LIST"}


def craft(src, dst, payload):
    """A well-formed copy of src whose every free string (attributes, string datasets, /config
    strings but those the config_yaml must agree with) holds payload; checksums recomputed."""
    shutil.copy(src, dst)
    with h5py.File(dst, "r+") as f:
        def edit(obj):
            for k in list(obj.attrs):
                v = obj.attrs[k]
                if k not in KEEP and isinstance(v, (str, bytes)) and obj.name != "/config":
                    obj.attrs[k] = payload
        edit(f)

        def visit(name, obj):
            edit(obj)
            if isinstance(obj, h5py.Dataset) and obj.dtype.kind == "O":
                obj[...] = np.full(obj.shape, payload.encode("utf-8", "surrogateescape"), dtype=object)
        f.visititems(visit)
    textsum.reseal(dst)
    return dst


def test_crafted():
    probe = PAYLOADS[0] + " " + PAYLOADS[1]
    name = os.path.join(TMP, "craft", '<img src=x onerror="window.__pwned=9">.h5')
    src = tiny_run(name, f"output.probe_text={probe}")
    d, why = browser()
    if d is None:
        print(f"skipped: no chromium ({why}); the pages were not opened")
    try:
        for i, payload in enumerate(PAYLOADS):
            f = craft(src, os.path.join(TMP, "craft", f"c{i}.h5"), payload)
            for what, cmd in (("harness check", [HARNESS, "check", f]),
                              ("harness inspect", [HARNESS, "inspect", f, "--tokens", "1,2,3"]),
                              ("harness generate", [HARNESS, "generate", f, "--tokens", "1,2", "--max-new", "3"]),
                              ("scripts/plot", [PY, os.path.join(ROOT, "scripts", "plot"), f, "-o", f + ".figs"]),
                              ("scripts/export", [PY, os.path.join(ROOT, "scripts", "export"), f, "--to", "npz",
                                                  f + ".npz"]),
                              ("the Python reader", [PY, "-c", READER, os.path.join(ROOT, "python"), f])):
                rc, out, err, _ = run(cmd, timeout=120)
                # check reports problems (exit 1: the descriptions are not the format's), one a line
                check(f"crafted #{i} through {what}: exit {rc}, no traceback, no raw escape on the terminal",
                      rc is not None and "Traceback" not in err and "\x1b" not in out + err
                      and (rc == 0 or (what == "harness check" and rc == 1)
                           or len(err.strip().splitlines()) == 1),
                      f"rc {rc}: {(out + err).strip()[-300:]!r}")
            page = f + ".html"
            rc, out, err, _ = script("report", f, "-o", page)
            if not check(f"crafted #{i}: scripts/report makes its page", rc == 0, err[-300:]) or d is None:
                continue
            d.get("file://" + os.path.abspath(page))
            for _ in range(100):
                if d.execute_script("return document.body && document.body.dataset.ready === '1'"):
                    break
                time.sleep(0.05)
            time.sleep(0.3)  # an image's onerror fires after the failed load
            pwned = d.execute_script("return window.__pwned === undefined ? null : window.__pwned")
            shown = d.execute_script("return document.body.innerText")
            check(f"crafted #{i}: the page drew itself and ran no script of the file (window.__pwned "
                  f"{pwned}); its strings are shown as text",
                  d.execute_script("return document.body.dataset.ready === '1'") and pwned is None
                  and (payload[:12] in shown or not payload.startswith("<")), f"pwned {pwned}")
    finally:
        if d is not None:
            d.quit()


def test_trust():
    good = tiny_run(os.path.join(TMP, "trust", "good.h5"))
    nan = os.path.join(TMP, "trust", "nan.h5")
    shutil.copy(good, nan)
    with h5py.File(nan, "r+") as f:
        d = f["params/tok_emb"]
        a = d[...]
        a.flat[3] = np.nan
        d[...] = a
    textsum.reseal(nan)
    rc, out, err, _ = harness("check", nan)
    check("harness check flags NaN parameters (exit 1)", rc == 1 and "non-finite" in out + err, out + err)
    for what, cmd in (("generate", [HARNESS, "generate", nan, "--tokens", "1,2"]),
                      ("inspect", [HARNESS, "inspect", nan, "--tokens", "1,2"]),
                      ("scripts/plot", [PY, os.path.join(ROOT, "scripts", "plot"), nan]),
                      ("scripts/report", [PY, os.path.join(ROOT, "scripts", "report"), nan])):
        rc, out, err, _ = run(cmd)
        check(f"{what} refuses NaN parameters in one line, exit 2",
              rc == 2 and "NaN" in err and len(err.strip().splitlines()) == 1, f"rc {rc}: {err[-300:]}")
    bad = os.path.join(TMP, "trust", "neg.h5")
    shutil.copy(good, bad)
    with h5py.File(bad, "r+") as f:
        text = f.attrs["config_yaml"]
        text = text.decode() if isinstance(text, bytes) else text
        f.attrs["config_yaml"] = text.replace("n_head: 2", "n_head: -1", 1)
    textsum.reseal(bad)
    rc, out, _, _ = harness("check", "--stored", bad)
    said = out.strip()
    check("harness check --stored refuses a stored n_head of -1", rc == 2 and "n_head" in said, said)
    for what in ("plot", "report", "export"):
        args = ["--to", "npz", bad + ".npz"] if what == "export" else []
        rc, _, err, _ = script(what, bad, *args)
        check(f"scripts/{what} refuses it with the harness's words, exit 2",
              rc == 2 and err.strip() == said, f"rc {rc}: {err.strip()[-200:]} (the harness: {said})")

    def small_memory():
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
    for what in ("plot", "report"):
        rc, _, err, _ = script(what, good, preexec_fn=small_memory)
        check(f"scripts/{what} under ulimit -v 3 GiB", rc == 0, err[-300:])


def main():
    if harness_missing(HARNESS):
        return 1
    t0 = time.time()
    for name, fn in (("links", test_links), ("blocking", test_blocking), ("depth", test_depth),
                     ("signals", test_signals), ("crafted", test_crafted), ("trust", test_trust)):
        run_check(name, fn)
    return end_suite(TMP, "--keep" in sys.argv, t0)


if __name__ == "__main__":
    sys.exit(main())
