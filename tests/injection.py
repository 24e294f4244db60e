"""injection.py: what the fault-injection and crash suites (tests/test_faults.py,
tests/test_crash.py) share: the tiny config they train, running the harness under the
LD_PRELOAD shim (tests/faultshim.c, built by the Makefile as BUILD/faultshim.so), counting a
run's calls, and comparing two results files number for number.

Knows nothing of which faults a suite injects or what it expects of them.
"""
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
from heads import results  # noqa: E402

import h5py  # noqa: E402  (after heads, which says how to install it when missing)

# A run of ~20 steps that still writes everything: evaluations, attention snapshots, a periodic
# checkpoint at step 10, the analysis. One thread, so that the shim's call counts are the same
# in every run (OpenMP threads would allocate in their own order).
TINY = """\
model: {{vocab_size: 16, d_model: 8, n_head: 2, n_layer: 1, seq_len: 12}}
train: {{steps: {steps}, batch_size: 4, lr: 3.0e-3, warmup_steps: 2, seed: 1, threads: 1}}
data: {{task: induction, min_period: 2, max_period: 4}}
output: {{path: {path}, log_every: 5, eval_every: 10, eval_batches: 1, attn_every: 10, probes: 2,
         checkpoint_every: {checkpoint_every}}}
"""

# Timing columns differ between two runs of the same config; every other dataset must not.
TIMING = ("train/elapsed_s",)


def write_config(directory, path, steps=20, checkpoint_every=10):
    config = os.path.join(directory, "tiny.yaml")
    with open(config, "w") as f:
        f.write(TINY.format(path=path, steps=steps, checkpoint_every=checkpoint_every))
    return config


def shim_path(harness):
    """BUILD/faultshim.so beside BUILD/harness (the Makefile builds both)."""
    return os.path.join(os.path.dirname(os.path.realpath(harness)), "faultshim.so")


_RUNTIMES = {}


def sanitizer_runtime(harness):
    """The AddressSanitizer runtime a sanitizer build of the harness is linked with (it must come
    first in LD_PRELOAD, before the shim), or None for a plain build."""
    if not os.environ.get("SANITIZER_REPORTS") or not os.path.exists(harness):
        return None
    if harness in _RUNTIMES:
        return _RUNTIMES[harness]
    _RUNTIMES[harness] = None
    p = subprocess.run(["ldd", harness], capture_output=True, text=True)
    for line in p.stdout.splitlines():
        parts = line.split()
        if parts and parts[0].startswith("libasan.so") and len(parts) > 2 and parts[2].startswith("/"):
            _RUNTIMES[harness] = parts[2]
    return _RUNTIMES[harness]


def shim_env(shim, **faults):
    """The environment of a run under the shim: FAULT_FAIL="write:3", FAULT_KILL=..., ...
    Under the sanitizers the ASan runtime comes first: its interceptors then call the shim's
    write, fsync and rename, and its own malloc stands (the shim's malloc faults do not fire)."""
    env = dict(os.environ)
    runtime = sanitizer_runtime(os.path.join(os.path.dirname(shim), "harness"))
    env["LD_PRELOAD"] = ":".join(([runtime] if runtime else []) + [shim])
    for key, value in faults.items():
        env[f"FAULT_{key.upper()}"] = str(value)
    env.setdefault("OMP_WAIT_POLICY", "passive")
    return env


def run(harness, config, *args, env=None, timeout=120):
    return subprocess.run([harness, config, *args], capture_output=True, text=True, env=env,
                          timeout=timeout, cwd=os.path.dirname(config))


def count_calls(harness, shim, config, *args):
    """{kind: calls} of one run under the shim in counting mode, and the finished process."""
    counts = os.path.join(os.path.dirname(config), "counts.txt")
    p = run(harness, config, *args, env=shim_env(shim, count=counts))
    calls = {}
    with open(counts) as f:
        for line in f:
            kind, n = line.split()
            calls[kind] = int(n)
    os.unlink(counts)
    return calls, p


def numbers(path):
    """{dataset name: array} of a results file, every dataset but the timing ones."""
    out = {}
    with h5py.File(path, "r") as f:
        def take(name, obj):
            if isinstance(obj, h5py.Dataset) and name not in TIMING:
                out[name] = obj[()]
        f.visititems(take)
    return out


def differences(path, reference):
    """Names of the datasets in which two results files differ (bitwise), [] when none."""
    a, b = numbers(path), numbers(reference)
    differ = sorted(set(a) ^ set(b))
    for name in sorted(set(a) & set(b)):
        x, y = a[name], b[name]
        if x.dtype.kind == "O" or y.dtype.kind == "O":  # strings: compare the values
            same = x.shape == y.shape and x.tolist() == y.tolist()
        else:
            same = x.shape == y.shape and x.dtype == y.dtype and x.tobytes() == y.tobytes()
        if not same:
            differ.append(name)
    return differ


def harness_check(harness, path):
    """`harness check PATH` (the project's results checker): (passes, its output)."""
    p = subprocess.run([harness, "check", path], capture_output=True, text=True, timeout=120)
    return p.returncode == 0, (p.stdout + p.stderr).strip()


def status(path):
    return results.read_status(path)


def last_line(text):
    lines = [l for l in text.splitlines() if l.strip()]
    return lines[-1] if lines else ""


def stray_files(directory, keep):
    """Files of a run's directory other than `keep` (names): temporaries, checkpoints, locks."""
    return sorted(f for f in os.listdir(directory) if f not in keep)


def start(harness, prefix, steps=20, checkpoint_every=10, sanitizers=False):
    """The common start of a suite: (shim, top directory, ref/run.h5 of an undisturbed run of
    the tiny config, work/ with the same config writing work/run.h5), or None after saying why
    the suite cannot run (under the sanitizers, unless the suite does without malloc faults
    (sanitizers=True); no shim; the run fails)."""
    from checks import check  # tests/, on sys.path for every suite
    shim = shim_path(harness)
    if os.environ.get("SANITIZER_REPORTS"):
        if not sanitizers or not sanitizer_runtime(harness):
            print("skipped: the shim replaces malloc, which the sanitizers' runtimes own")
            return None
    if not check("the shim is built beside the harness", os.path.exists(shim), shim):
        return None
    top = tempfile.mkdtemp(prefix=prefix)
    ref_dir, work = os.path.join(top, "ref"), os.path.join(top, "work")
    os.makedirs(ref_dir)
    os.makedirs(work)
    ref = os.path.join(ref_dir, "run.h5")
    p = run(harness, write_config(ref_dir, ref, steps, checkpoint_every))
    write_config(work, os.path.join(work, "run.h5"), steps, checkpoint_every)
    if not check("an undisturbed run completes", p.returncode == 0, p.stderr[-300:]):
        import shutil
        shutil.rmtree(top, ignore_errors=True)
        return None
    return shim, top, ref, work
