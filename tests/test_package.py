#!/usr/bin/python3
# suite: the Python reader installs like a library (pip install -e python/, offline)
# suite-args: --harness {harness}
"""`pip install -e python/` as docs/python.md prints it, then the reader used from elsewhere.

1. The documented commands, run as printed with another `python3` first on PATH (a pyenv or
   conda one, as a newcomer has): a fresh venv with Debian's site packages (numpy, h5py, yaml),
   then `pip install --no-build-isolation --no-index -e python/` succeeds without a network (no
   index, no build isolation: setuptools is Debian's) and leaves nothing in the checkout.
2. From a folder outside the repository, with no PYTHONPATH, the venv's python imports
   `heads.results` from this checkout and reads a run made here; the example of docs/python.md
   runs there as printed (its only change: the run's and the sweep's paths).
3. pip knows the package: `pip show heads` names it and its version.
usage: tests/test_package.py [--harness PATH] [--keep]
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, temp_suite  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = """model: {vocab_size: 32, d_model: 16, n_head: 4, n_layer: 2, seq_len: 16}
train: {steps: 10, batch_size: 4, warmup_steps: 2, threads: 1}
data: {task: induction, min_period: 3, max_period: 6}
output: {path: OUT, log_every: 5, eval_every: 5, probes: 2, prune_step: 0}
"""


def tracked_changes():
    p = subprocess.run(["git", "status", "--porcelain", "--ignored", "python"], cwd=ROOT, capture_output=True,
                       text=True)
    return None if p.returncode else sorted(ln for ln in p.stdout.splitlines() if "__pycache__" not in ln)


DECOY = "#!/bin/sh\necho \"a python3 first on PATH that is not Debian's (pyenv, conda)\" >&2\nexit 1\n"


def suite(harness, tmp):
    venv = os.path.join(tmp, "venv")
    py, pip = os.path.join(venv, "bin", "python"), os.path.join(venv, "bin", "pip")
    before = tracked_changes()
    doc = open(os.path.join(ROOT, "docs", "python.md")).read()
    m = re.search(r"```sh\n(\S*python3 -m venv [^\n]*\n\S*pip install --no-build-isolation --no-index -e python/)\n```",
                  doc)
    if not check("docs/python.md gives the offline install commands", m is not None):
        return
    # run as printed, with another python3 first on PATH (a newcomer's pyenv or conda): the
    # commands must name the interpreter that has Debian's packages
    decoy = os.path.join(tmp, "decoy")
    os.mkdir(decoy)
    with open(os.path.join(decoy, "python3"), "w") as f:
        f.write(DECOY)
    os.chmod(os.path.join(decoy, "python3"), 0o755)
    env = dict(os.environ, PIP_NO_CACHE_DIR="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
               PATH=decoy + os.pathsep + os.environ.get("PATH", ""))
    env.pop("PYTHONPATH", None)
    for line in m.group(1).replace(".venv", venv).splitlines():
        p = subprocess.run(line, shell=True, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        if not check(f"as docs/python.md prints it, another python3 first on PATH: {line.replace(venv, '.venv')}",
                     p.returncode == 0, (p.stderr or p.stdout)[-400:]):
            return
    check("pip install --no-build-isolation --no-index -e python/: installed without a network",
          "Successfully installed heads" in p.stdout, (p.stderr or p.stdout)[-400:])
    check("the install leaves the checkout's python/ as it was (no egg-info, no build folder)",
          tracked_changes() == before, f"{before} -> {tracked_changes()}")
    q = subprocess.run([pip, "show", "heads"], env=env, capture_output=True, text=True)
    check("pip show heads: the package and its version", q.returncode == 0 and "Name: heads" in q.stdout
          and "Version: 0.1.0" in q.stdout, q.stdout + q.stderr)

    cfg = os.path.join(tmp, "run.yaml")
    run_path = os.path.join(tmp, "run.h5")
    with open(cfg, "w") as f:
        f.write(CONFIG.replace("OUT", run_path))
    r = subprocess.run([harness, cfg], capture_output=True, text=True, timeout=600)
    check("a small run to read", r.returncode == 0, r.stderr[-300:])
    elsewhere = os.path.join(tmp, "notebook")
    os.mkdir(elsewhere)
    code = ("import heads.results as r, os; run = r.Run(os.environ['RUN']); "
            "print(os.path.dirname(r.__file__), run.status, run.maps().dims)")
    s = subprocess.run([py, "-c", code], cwd=elsewhere, env=dict(env, RUN=run_path), capture_output=True, text=True)
    check("from another folder, no PYTHONPATH: heads.results comes from this checkout and reads the run",
          s.returncode == 0 and s.stdout.startswith(os.path.join(ROOT, "python", "heads") + " complete ")
          and "'query', 'key'" in s.stdout, (s.stderr or s.stdout)[-400:])

    m = re.search(r"<!-- python-example -->\s*```python\n(.*?)```", doc, re.S)
    if not check("docs/python.md has the Python example", m is not None):
        return
    example = m.group(1)
    check("the example has no sys.path edit", "sys.path" not in example, example[:200])
    summary = os.path.join(tmp, "sweep")
    os.mkdir(summary)
    runs = re.findall(r'results\.Run\("([^"]+)"\)', example)
    sweeps = re.findall(r'results\.Summary\("([^"]+)"\)', example)
    code = example.replace(runs[0], run_path) if runs else example
    code = "\n".join(ln for ln in code.splitlines() if "Summary(" not in ln and 'row["run"]' not in ln)
    e = subprocess.run([py, "-c", code], cwd=elsewhere, env=env, capture_output=True, text=True)
    check(f"the example runs from another folder in the venv (its run read; sweep part: {len(sweeps)} Summary)",
          e.returncode == 0 and " -> " in e.stdout, (e.stderr or e.stdout)[-400:])


if __name__ == "__main__":
    sys.exit(temp_suite(sys.argv, "heads-package-", suite))
