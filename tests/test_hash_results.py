#!/usr/bin/python3
# suite: scripts/hash-results, the before/after table of a refactor: it hashes what it must, and only that
# suite-args: --harness {harness}
"""The table scripts/hash-results makes is what a refactor is judged by (the same bits before and
after), so its parts are checked against answers known by construction:

  1. hash_group: equal for two files with the same datasets written in another order; different
     when one value moves by one ulp, when a dataset is renamed, or reshaped; "absent" without
     the group.
  2. --compare: exit 0 and "identical (N rows)" for equal tables; exit 1 and exactly the rows
     that differ (or are missing on one side) otherwise.
  3. One layout (heads12) hashed twice by the harness under test: the same table (the run is
     deterministic, and nothing that varies between runs, such as the file's path in inspect's
     first line, is hashed), with a row for every group it promises.
"""
import importlib.machinery
import importlib.util
import os
import subprocess
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, run_check, temp_suite  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "hash-results")


def load_script():
    loader = importlib.machinery.SourceFileLoader("hash_results", SCRIPT)
    spec = importlib.util.spec_from_loader("hash_results", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def write(path, datasets):
    with h5py.File(path, "w") as f:
        for name, value in datasets:
            f.create_dataset(name, data=value)


def test_hash_group(tmp):
    hr = load_script()
    x = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    y = np.array([1, 2, 3], dtype=np.int64)
    nudged = x.copy()
    nudged[1, 2] = np.nextafter(nudged[1, 2], np.float32(np.inf))
    files = {
        "a": [("/prune/x", x), ("/prune/y", y)],
        "a_reordered": [("/prune/y", y), ("/prune/x", x)],
        "ulp": [("/prune/x", nudged), ("/prune/y", y)],
        "renamed": [("/prune/x2", x), ("/prune/y", y)],
        "reshaped": [("/prune/x", x.reshape(4, 3)), ("/prune/y", y)],
    }
    digest = {}
    for name, datasets in files.items():
        path = os.path.join(tmp, name + ".h5")
        write(path, datasets)
        with h5py.File(path, "r") as f:
            digest[name] = (hr.hash_group(f, "/prune"), hr.hash_group(f, "/circuits"))
    check("hash_group: the same datasets written in another order hash the same",
          digest["a"] == digest["a_reordered"])
    check("hash_group: one ulp, a renamed dataset or a reshaped one each change the hash",
          len({digest[k][0] for k in ("a", "ulp", "renamed", "reshaped")}) == 4, str(digest))
    check("hash_group: a group the file lacks is 'absent'", digest["a"][1] == "absent")


def test_compare(tmp):
    rows = [("heads12", "/params", "aa"), ("heads12", "/prune", "bb"), ("text", "/params", "cc")]
    a, b, c = (os.path.join(tmp, n + ".tsv") for n in "abc")
    for path, table in ((a, rows), (b, rows), (c, [rows[0], ("heads12", "/prune", "bx")])):
        with open(path, "w") as f:
            f.writelines("\t".join(r) + "\n" for r in table)
    same = subprocess.run([SCRIPT, "--compare", a, b], capture_output=True, text=True)
    check("--compare: equal tables exit 0, 'identical (3 rows)'",
          same.returncode == 0 and same.stdout.strip() == "identical (3 rows)", same.stdout + same.stderr)
    diff = subprocess.run([SCRIPT, "--compare", a, c], capture_output=True, text=True)
    lines = sorted(diff.stdout.strip().splitlines())
    check("--compare: exit 1 and exactly the differing and the missing rows",
          diff.returncode == 1 and lines == ["heads12\t/prune\tbb\tbx", "text\t/params\tcc\t-"], diff.stdout)


def test_deterministic(harness, tmp):
    tables = []
    for k in range(2):
        p = subprocess.run([SCRIPT, harness, os.path.join(tmp, f"run{k}"), "--only", "heads12"],
                           capture_output=True, text=True, cwd=ROOT, timeout=900)
        if not check(f"hash-results on heads12 (run {k + 1}) exits 0", p.returncode == 0, p.stderr[-600:]):
            return
        tables.append(p.stdout)
    groups = [line.split("\t")[1] for line in tables[0].splitlines()]
    want = ["/train/loss", "/params", "/attn/maps", "/heads", "/prune", "/circuits", "/scores",
            "--dump-grads /grads", "inspect", "prune --step 0.5 /heads", "prune --step 0.5 /prune",
            "prune --step 0.5 /circuits"]
    check("hash-results: a row for every group it promises, none absent", groups == want
          and "absent" not in tables[0], tables[0])
    check("hash-results: the same layout hashed twice gives the same table (two output directories)",
          tables[0] == tables[1], "\n".join(set(tables[0].splitlines()) ^ set(tables[1].splitlines())))


def suite(harness, tmp):
    run_check("hash_group", lambda: test_hash_group(tmp))
    run_check("--compare", lambda: test_compare(tmp))
    run_check("deterministic", lambda: test_deterministic(harness, tmp))


if __name__ == "__main__":
    sys.exit(temp_suite(sys.argv, "heads-hash-results-", suite))
