#!/usr/bin/python3
# suite: held-out splits (validation and test, every window at most once, harness eval)
# suite-args: --harness {harness}
"""The held-out figures of a run and `harness eval`, from the command line (the losses against an
independent float64 forward over exactly the windows /heldout names are tests/test_reference.py).

usage: /usr/bin/python3 tests/test_heldout.py [--harness PATH] [--keep]

On short runs of a byte-level text file and of the induction task:
  - /heldout has a validation and a test split whose windows are the split's every window, once
    (windows == split_windows, tokens == windows x seq_len for text), at first_token by the
    documented rule (floor(n(1 - eval_fraction)), then the last floor(held-out x test_share));
  - the periodic evaluation (/eval) scores min(eval_batches x batch_size, N) validation windows,
    the same number every time (/eval/tokens), and `output.eval_batches: all` scores every one;
  - `harness eval RUN.h5` gives /heldout's figures bit for bit and leaves the file's bytes as
    they were; `--file` on a file holding exactly the validation split's tokens gives the
    validation figure; `--split test`, `--batches 1` (16 windows spread over the split), `--json`;
  - the test split is never read by anything that shapes the run: a run whose test file is
    replaced (data.test_path) has the same /params, /train, /eval, scores and head study, bit for
    bit, and only its /heldout test figure differs; so does a synthetic run's (another stream);
  - a held-out part too short for two splits (the default share) has no test split, and the
    run's last lines say why; a test_share the config gives that leaves a split too short, a
    test_path on the induction task, and test_share beside test_path are refused (exit 2);
  - the run's last lines name the final held-out loss of each split and the tokens it covers.
"""
import hashlib
import json
import os
import re
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True
sys.path.insert(0, HERE)
from checks import check, temp_suite  # noqa: E402

ROOT = os.path.dirname(HERE)
T, B = 16, 4
TEXT = ("model: {vocab_size: 256, d_model: 16, n_head: 2, n_layer: 1, seq_len: 16}\n"
        "train: {steps: 12, batch_size: 4, lr: 0.01, warmup_steps: 2, threads: 1}\n"
        "data: {task: text, path: PATH, eval_fraction: 0.2}\n"
        "output: {eval_every: 6, eval_batches: 2, probes: 1, prune_step: 0, patch_batches: 0}\n")
INDUCTION = ("model: {vocab_size: 16, d_model: 16, n_head: 2, n_layer: 2, seq_len: 16}\n"
             "train: {steps: 8, batch_size: 4, lr: 0.01, warmup_steps: 2, threads: 1}\n"
             "data: {task: induction, min_period: 2, max_period: 4, heldout_sequences: 40}\n"
             "output: {eval_every: 4, eval_batches: 2, probes: 1, prune_step: 0, patch_batches: 0}\n")


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)


def train(harness, config, out, *sets):
    cmd = [harness, config, "--set", f"output.path={out}"]
    for s in sets:
        cmd += ["--set", s]
    return run(cmd)


def read(path):
    import h5py
    with h5py.File(path, "r") as f:
        h = f["heldout"]
        splits = [x.decode() if isinstance(x, bytes) else x for x in h["split"][()]]
        held = {s: {k: h[k][i] for k in ("loss", "tokens", "windows", "split_windows", "first_token")}
                for i, s in enumerate(splits)}
        rest = {}
        for group in ("params", "train", "eval", "scores", "heads"):
            if group in f:
                f[group].visititems(lambda name, obj, g=group: rest.__setitem__(
                    f"{g}/{name}", np.asarray(obj[()]).tolist()) if hasattr(obj, "shape") else None)
        rest.pop("train/elapsed_s", None)  # wall-clock time
    return held, rest


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def text_runs(harness, tmp):
    text = os.path.join(tmp, "text.txt")
    rng = np.random.default_rng(0)
    words = [b"the ", b"cat ", b"sat ", b"on ", b"a ", b"mat ", b"dog ", b"ran "]
    with open(text, "wb") as f:
        f.write(b"".join(words[i] for i in rng.integers(0, len(words), 700)))
    config = os.path.join(tmp, "text.yaml")
    with open(config, "w") as f:
        f.write(TEXT.replace("PATH", text))
    n = os.path.getsize(text)
    n_train = int(np.floor(n * (1 - 0.2)))
    heldout = n - n_train
    n_test = int(np.floor(heldout * 0.5))
    want = {"validation": (n_train, heldout - n_test), "test": (n_train + heldout - n_test, n_test)}

    a = os.path.join(tmp, "a.h5")
    r = train(harness, config, a)
    check("text run completes", r.returncode == 0, r.stderr[-500:])
    held, rest = read(a)
    ok = list(held) == ["validation", "test"]
    for s, (first, count) in want.items():
        N = (count - 1) // T
        h = held.get(s, {})
        ok &= (int(h.get("first_token", -1)) == first and int(h.get("split_windows", -1)) == N
               and int(h.get("windows", -1)) == N and int(h.get("tokens", -1)) == N * T)
    check("/heldout: validation then test, each every window of its split once, where the rule puts it",
          ok, f"{held} want {want}")
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("final held-out loss")]
    check("the run's last lines name the final held-out loss of each split and the tokens it covers",
          len(lines) == 2 and all(re.search(r"(validation|test) split: [\d.e+-]+ nats per token at step 12, all "
                                            r"\d+ of its \d+ windows \(\d+ tokens scored", ln) for ln in lines)
          and r.stderr.rstrip().splitlines()[-3:-1] == lines, "\n".join(r.stderr.splitlines()[-5:]))
    import h5py
    with h5py.File(a, "r") as f:
        ev_tokens = np.asarray(f["eval/tokens"][()])
    N_val = (want["validation"][1] - 1) // T
    check("/eval/tokens: min(eval_batches x batch_size, N) validation windows at every evaluation",
          len(ev_tokens) == 3 and np.all(ev_tokens == min(2 * B, N_val) * T), f"{ev_tokens}, N {N_val}")

    before = digest(a)
    e = run([harness, "eval", a, "--json"])
    got = json.loads(e.stdout) if e.returncode == 0 else {}
    same = e.returncode == 0 and all(
        s["loss"] == float(held[s["split"]]["loss"]) and s["tokens"] == int(held[s["split"]]["tokens"])
        for s in got.get("splits", [])) and len(got.get("splits", [])) == 2
    check("harness eval --json: /heldout's figures bit for bit, both splits", same, e.stdout + e.stderr)
    check("harness eval leaves the results file's bytes as they were", digest(a) == before)
    val = os.path.join(tmp, "val.txt")
    with open(text, "rb") as f:
        data = f.read()
    first, count = want["validation"]
    with open(val, "wb") as f:
        f.write(data[first:first + count])
    e = run([harness, "eval", a, "--file", val, "--json"])
    got = json.loads(e.stdout) if e.returncode == 0 else {"splits": [{}]}
    check("harness eval --file (the validation split's bytes): the validation figure bit for bit",
          got["splits"][0].get("loss") == float(held["validation"]["loss"]), e.stdout + e.stderr)
    e = run([harness, "eval", a, "--split", "test", "--batches", "1"])
    m = re.search(r"test split: [\d.e+-]+ nats per token over (\d+) of its (\d+) windows", e.stdout)
    check("harness eval --split test --batches 1: batch_size windows of the test split",
          e.returncode == 0 and m and int(m.group(1)) == B and int(m.group(2)) == (want["test"][1] - 1) // T,
          e.stdout + e.stderr)

    all_run = os.path.join(tmp, "all.h5")
    r = train(harness, config, all_run, "output.eval_batches=all")
    with h5py.File(all_run, "r") if r.returncode == 0 else open(os.devnull) as f:
        tokens = np.asarray(f["eval/tokens"][()]) if r.returncode == 0 else []
    check("output.eval_batches: all scores every validation window at each evaluation",
          r.returncode == 0 and len(tokens) and np.all(tokens == N_val * T), r.stderr[-300:])

    # the test split never shapes the run: another test file changes /heldout's test figure only
    test_a, test_b = os.path.join(tmp, "test_a.txt"), os.path.join(tmp, "test_b.txt")
    with open(test_a, "wb") as f:
        f.write(data[:300])
    with open(test_b, "wb") as f:
        f.write(bytes(reversed(data[:300])))
    runs = []
    for name, tf in (("ta.h5", test_a), ("tb.h5", test_b)):
        out = os.path.join(tmp, name)
        r = train(harness, config, out, f"data.test_path={tf}", "output.prune_step=0.5")
        check(f"a run with data.test_path ({name}) completes", r.returncode == 0, r.stderr[-300:])
        runs.append(read(out) if r.returncode == 0 else ({}, {}))
    (ha, ra), (hb, rb) = runs
    check("another test file: /params, /train, /eval, /scores, /heads bit for bit the same",
          ra and ra == rb, sorted(k for k in ra if ra.get(k) != rb.get(k))[:5])
    check("another test file: the validation figure the same, the test figure not",
          ha and ha["validation"] == hb["validation"] and ha["test"]["loss"] != hb["test"]["loss"]
          and int(ha["test"]["split_windows"]) == (300 - 1) // T, f"{ha} {hb}")

    short = os.path.join(tmp, "short.txt")
    with open(short, "wb") as f:
        f.write(data[:150])  # held out: 30 bytes, too few for two splits of 17
    out = os.path.join(tmp, "short.h5")
    r = train(harness, config, out, f"data.path={short}")
    held_short = read(out)[0] if r.returncode == 0 else {}
    check("a held-out part too short for two splits: all validation, no test split, and the run says why",
          r.returncode == 0 and list(held_short) == ["validation"] and "no test split" in r.stderr,
          r.stderr[-400:])
    r = train(harness, config, out + "x", f"data.path={short}", "data.test_share=0.5")
    check("the same with data.test_share given: refused, naming the split (exit 2)",
          r.returncode == 2 and "split is too short" in r.stderr and len(r.stderr.splitlines()) == 1,
          r.stderr)
    r = train(harness, config, out + "y", f"data.test_path={test_a}", "data.test_share=0.3")
    check("data.test_share beside data.test_path: refused (exit 2)", r.returncode == 2 and "test_share" in r.stderr,
          r.stderr)


def induction_runs(harness, tmp):
    config = os.path.join(tmp, "induction.yaml")
    with open(config, "w") as f:
        f.write(INDUCTION)
    out = os.path.join(tmp, "ind.h5")
    r = train(harness, config, out)
    check("induction run completes", r.returncode == 0, r.stderr[-400:])
    held, rest = read(out)
    check("induction: a validation and a test split of data.heldout_sequences sequences each, all scored",
          list(held) == ["validation", "test"] and all(int(h["windows"]) == 40 == int(h["split_windows"])
                                                       for h in held.values())
          and held["validation"]["loss"] != held["test"]["loss"], f"{held}")
    r = train(harness, config, out + "2", "data.heldout_sequences=80")
    held2, rest2 = read(out + "2") if r.returncode == 0 else ({}, {})
    check("induction: more held-out sequences change the final figures, never the training",
          rest2.get("params/tok_emb") == rest.get("params/tok_emb") and rest2.get("train/loss") == rest.get("train/loss")
          and held2 and int(held2["test"]["windows"]) == 80, f"{held2}")
    r = train(harness, config, out + "3", "data.test_path=/etc/hostname")
    check("induction: data.test_path refused (its test split is a generator stream), exit 2",
          r.returncode == 2 and "test_path" in r.stderr, r.stderr)


def suite(harness, tmp):
    text_runs(harness, tmp)
    induction_runs(harness, tmp)


def main(argv):
    return temp_suite(argv, "heads-heldout-", suite)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
