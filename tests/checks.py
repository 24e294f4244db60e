"""checks.py: the pass/fail bookkeeping of the Python test suites.

check() prints "ok - NAME" or "FAIL - NAME: details"; run_check() runs one test function and
counts an exception as a failure; temp_suite() is the frame of a suite working in a temporary
directory; finish() prints the closing "N passed, M failed" line that
tests/run adds up, and returns the exit status. heads12_run() trains a small variant of the
default config. statuses() and read_csv() read a sweep's
results for the sweep suites; holm_by_hand() is Holm's adjustment written out, for the suites
that recompute a table's p values; known_summary() writes a sweep summary with known losses;
browser() starts the headless Chromium of the report suites, open_page() loads a report in it
and console_errors() reads the errors it logged; phrase_tokens() writes a small
learnable token stream.
"""
import csv
import os
import subprocess
import time
import traceback

RESULTS = {"passed": 0, "failed": 0}


def check(name, condition, details=""):
    if condition:
        RESULTS["passed"] += 1
        print(f"ok - {name}", flush=True)
    else:
        RESULTS["failed"] += 1
        print(f"FAIL - {name}" + (f": {details}" if details else ""), flush=True)
    return condition


def run_check(name, fn, passthrough=()):
    """Run fn(); an exception (other than those in passthrough) is one failure, reported with
    the line it came from, and the suite goes on with the next test."""
    t0 = time.time()
    try:
        fn()
    except passthrough:
        raise
    except Exception as e:  # noqa: BLE001 - report and go on with the next test
        RESULTS["failed"] += 1
        tb = traceback.format_exc().strip().splitlines()
        print(f"FAIL - {name}: {type(e).__name__}: {e} ({tb[-3].strip() if len(tb) > 2 else ''})",
              flush=True)
    print(f"# {name}: {time.time() - t0:.1f} s", flush=True)


def heads12_run(harness, root, tmp, name, base_sets, sets, what="tiny run completes",
                config="configs/heads12.yaml", timeout=600):
    """A run of config (configs/heads12.yaml unless named) with the arguments base_sets ("--set",
    "key=value", ...) and the "key=value" strings sets, into tmp/NAME.h5, checked to exit 0: (its
    path, the finished process)."""
    import subprocess
    out = os.path.join(tmp, name + ".h5")
    cmd = [harness, config, *base_sets, "--set", f"output.path={out}"]
    for s in sets:
        cmd += ["--set", s]
    run = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=timeout)
    check(f"{name}: {what}", run.returncode == 0, run.stderr[-600:])
    return out, run


def statuses(outdir):
    """{run: status attribute} of every results file of a sweep directory."""
    from heads import results  # python/, put on sys.path by the suites that use it
    out = {}
    for name in sorted(os.listdir(outdir)):
        if name.endswith(".h5") and name != "summary.h5":
            out[name[:-3]] = results.read_status(os.path.join(outdir, name))
    return out


def read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def holm_by_hand(ps):
    """Holm's step-down: sorted ascending, p_(i) -> max over j <= i of min(1, (m - j) p_(j))."""
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    out, running = [0.0] * len(ps), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(ps) - rank) * ps[i]))
        out[i] = running
    return out


def phrase_tokens(path, vocab, seed, n_phrases=20, longest=8):
    """A learnable `tokens` stream at path (little-endian uint16): random phrases of 3 to
    `longest` ids below vocab, repeated in random order, so a short run moves the parameters."""
    import numpy as np
    rng = np.random.RandomState(seed)
    phrases = [rng.randint(0, vocab, size=rng.randint(3, longest + 1)) for _ in range(n_phrases)]
    np.concatenate([phrases[i] for i in rng.randint(0, n_phrases, size=2000)]).astype("<u2").tofile(path)


def temp_suite(argv, prefix, body):
    """The frame of a suite that drives the harness in a temporary directory: body(harness, tmp)
    with harness from `--harness PATH` (default ./harness at the repository root) and a fresh
    directory, removed afterwards unless `--keep`; an exception is one failure. Returns the
    exit status (finish())."""
    import shutil
    import tempfile
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    harness = os.path.abspath(argv[argv.index("--harness") + 1]) if "--harness" in argv \
        else os.path.join(root, "harness")
    tmp = tempfile.mkdtemp(prefix=prefix)
    try:
        run_check(prefix.strip("-"), lambda: body(harness, tmp))
    finally:
        if "--keep" in argv:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return finish()


def harness_missing(path):
    """True, having printed a failure and the count line, when the harness at path is not built
    (a suite then ends at once with exit status 1)."""
    if os.access(path, os.X_OK):
        return False
    print(f"FAIL - {path} not built: run `make` first")
    print("0 passed, 1 failed")
    return True


def end_suite(tmp, keep, t0):
    """The end of a suite working in the temporary directory tmp: keep it (and say where) or
    remove it, print the wall time since t0 and the "N passed, M failed" line; the exit status."""
    import shutil
    if keep:
        print(f"# kept {tmp}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"# {time.time() - t0:.1f} s")
    return finish()


def finish():
    print(f"{RESULTS['passed']} passed, {RESULTS['failed']} failed")
    return 1 if RESULTS["failed"] else 0


def known_summary(outdir, losses, **columns):
    """A sweep's summary.h5/csv (through heads.sweep.summary, the writer under test elsewhere) of a
    fixed-width n_head sweep with known final losses {n_head: [loss per seed]}: d_model 64,
    2 layers, every head "mixed"; columns: more summary columns for every row (e.g.
    heads_needed), or experiment attributes (tolerance, tolerance_floor). Returns the rows."""
    from heads import results
    attrs = {k: columns.pop(k) for k in ("tolerance", "tolerance_floor") if k in columns}

    class Experiment:
        name, text, path, base, width, description = "known", "", "-", "-", "fixed_width", ""

        def swept_keys(self):
            return ["model.n_head", "train.seed"]
    experiment = Experiment()
    for k, v in attrs.items():
        setattr(experiment, k, v)
    rows = []
    for h, values in losses.items():
        for seed, v in enumerate(values):
            rows.append({"run": f"h{h}_dh{64 // h}_s{seed}", "status": "complete",
                         "model.n_head": h, "train.seed": seed, "seed": seed, "n_head": h,
                         "d_head": 64 // h, "d_model": 64, "n_layer": 2, "E": 64,
                         "params": 70528, "flops_per_token": 131072, "final_step": 100,
                         "final_train_loss": v, "final_eval_loss": v, "min_eval_loss": v,
                         "train_seconds": 1.0, **columns,
                         **{f"heads_{c}": 0 for c in results.CLASSES[:-1]}, "heads_mixed": 2 * h})
    os.makedirs(outdir, exist_ok=True)
    return rows, experiment


def browser():
    """A headless Chromium through chromedriver, or (None, reason)."""
    import shutil
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        return None, "python3-selenium is not installed"
    driver = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    if not os.path.exists(driver) or not shutil.which("chromium"):
        return None, "chromium or chromium-driver is not installed"
    o = Options()
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1300,1000", "--force-device-scale-factor=1"):
        o.add_argument(a)
    o.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        return webdriver.Chrome(service=Service(driver), options=o), ""
    except Exception as e:  # noqa: BLE001 - any start failure means no browser here
        return None, f"chromium did not start: {str(e).splitlines()[0]}"


def open_page(d, path):
    """Load a report page from disk in the browser d; whether its code finished drawing it."""
    d.get("file://" + os.path.abspath(path))
    for _ in range(100):
        if d.execute_script("return document.body && document.body.dataset.ready === '1'"):
            break
        time.sleep(0.05)
    return d.execute_script("return document.body.dataset.ready === '1'")


def console_errors(d):
    return [e["message"] for e in d.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]


def write(path, text):
    """text into path (a config or experiment a suite makes); the path."""
    with open(path, "w") as f:
        f.write(text)
    return path


def script(name, *args):
    """scripts/NAME ARGS... under Debian's Python, its output captured (at most 10 minutes)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return subprocess.run(["/usr/bin/python3", os.path.join(root, "scripts", name)] + [str(a) for a in args],
                          capture_output=True, text=True, timeout=600)
