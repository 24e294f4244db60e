#!/usr/bin/python3
# suite: data at scale: token files read in place, train.data_seed, tokenize in bounded memory
# suite-args: --harness {harness}
"""Data at scale, from the command line.

usage: /usr/bin/python3 tests/test_data_scale.py [--harness PATH] [--keep]

Checks (one line each, then "N passed, M failed"):
  - a run on a 2 GiB token file (a sparse file with scripts/tokenize's header, built here from
    src/data/token_file.h's layout) has a peak RSS within 64 MiB of the same run on a 1 MiB file,
    and its wall time is within 1 s of it (best of two runs each: the cores are shared), so
    nothing reads the corpus into memory or scans it at start-up; `harness --shapes` gives both
    the same memory estimate;
  - train.data_seed: 0 (the default) and data_seed = seed give the same /params; another
    data_seed the same initialisation (/params at step 0) but other batches (other /params); the
    same data_seed at 1 and 2 threads the same /params; a resumed run (stopped after its first checkpoint) the
    same /params as an uninterrupted one;
  - scripts/tokenize on 200 MB of generated text (400 documents: the licence texts' lines
    shuffled and varied) keeps every process under MEMORY_BOUND_MIB of peak RSS (getrusage of
    the whole process tree), and writes all the documents' tokens (the counts in corpus.json add
    up to the files' headers).
"""
import json
import os
import random
import re
import resource
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.dont_write_bytecode = True
sys.path.insert(0, HERE)
from checks import check, temp_suite  # noqa: E402

MEMORY_BOUND_MIB = 400  # scripts/tokenize --sample-mb 5, per process (docs/own-text.md)
BASE = ["--set", "data.task=tokens", "--set", "model.vocab_size=256", "--set", "model.d_model=32",
        "--set", "model.n_head=4", "--set", "model.seq_len=64", "--set", "train.steps=20",
        "--set", "train.batch_size=8", "--set", "train.threads=1", "--set", "output.eval_every=10",
        "--set", "output.eval_batches=1", "--set", "output.final_eval_batches=1", "--set", "output.prune_step=0",
        "--set", "output.patch_batches=0", "--set", "output.probes=2"]


def headed(path, ids=None, count=0, vocab=256):
    """A token file: the header, then ids (bytes), or `count` zero ids left as a hole."""
    data = ids if ids is not None else b""
    n = len(data) // 2 if ids is not None else count
    with open(path, "wb") as f:
        f.write(struct.pack("<8sIIIIQI", b"HEADSTOK", 1, 2, vocab, 64, n, 0).ljust(64, b"\0"))
        f.write(data)
        f.truncate(64 + 2 * n)


def measured(cmd):
    """(exit status, peak RSS in MiB, wall seconds) of one command, from its own rusage."""
    start = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, usage.ru_maxrss / 1024, time.monotonic() - start


def check_in_place(harness, tmp):
    small, big = os.path.join(tmp, "small.bin"), os.path.join(tmp, "big.bin")
    rng = random.Random(0)
    headed(small, bytes(b for _ in range(1 << 19) for b in (rng.randrange(256), 0)))
    headed(big, count=(1 << 30) + 7)
    figures = {}
    for name, path in (("1 MiB", small), ("2 GiB", big)):
        runs = [measured([harness, "--overwrite", os.path.join(ROOT, "configs", "text.yaml"), *BASE,
                          "--set", f"data.path={path}", "--set", f"output.path={tmp}/{name[0]}.h5"])
                for _ in range(2)]
        figures[name] = (max(r[0] for r in runs), min(r[1] for r in runs), min(r[2] for r in runs))
    (rc_s, rss_s, t_s), (rc_b, rss_b, t_b) = figures["1 MiB"], figures["2 GiB"]
    shown = f"1 MiB: {rss_s:.0f} MiB, {t_s:.2f} s; 2 GiB: {rss_b:.0f} MiB, {t_b:.2f} s"
    check(f"a 2 GiB token file trains with the peak RSS of a 1 MiB one (within 64 MiB; {shown})",
          rc_s == rc_b == 0 and os.path.getsize(big) > 2 << 30 and rss_b - rss_s < 64, shown)
    check("... and starts as fast (wall time within 1 s: no scan, no read of the corpus)",
          rc_s == rc_b == 0 and t_b - t_s < 1.0, shown)
    shapes = [subprocess.run([harness, "--shapes", os.path.join(ROOT, "configs", "text.yaml"), *BASE,
                              "--set", f"data.path={p}"], capture_output=True, text=True) for p in (small, big)]
    peaks = [re.search(r"with the study +[\d.]+ \w+", s.stdout) for s in shapes]
    check("--shapes: the same estimated peak for both (the corpus is not in memory)",
          all(peaks) and peaks[0].group(0) == peaks[1].group(0), " | ".join(p.group(0) for p in peaks if p))
    return small


def params(path):
    import h5py
    with h5py.File(path, "r") as f:
        out = {}
        f["params"].visititems(lambda n, o: out.__setitem__(n, o[()].tobytes()) if hasattr(o, "shape") else None)
        return out


def check_data_seed(harness, tmp, data):
    def train(name, *sets):
        out = os.path.join(tmp, f"{name}.h5")
        cmd = [harness, "--overwrite", os.path.join(ROOT, "configs", "text.yaml"), *BASE, "--set", f"data.path={data}",
               "--set", "train.seed=3", "--set", f"output.path={out}"]
        for s in sets:
            cmd += ["--set", s]
        r = subprocess.run(cmd, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-300:]
        return params(out)
    default, same = train("default"), train("same", "train.data_seed=3")
    other, other2 = train("other", "train.data_seed=8"), train("other2", "train.data_seed=8", "train.threads=2")
    init = [train(f"init{k}", "train.steps=0", f"train.data_seed={k}") for k in (0, 8)]
    check("train.data_seed 0 and data_seed = seed: the same /params (the default keeps today's order)",
          default == same)
    check("another data_seed: the same initialisation, other batches (other /params)",
          init[0] == init[1] and other != default)
    check("the same data_seed at 1 and 2 threads: the same /params", other == other2)
    out = os.path.join(tmp, "resumed.h5")
    cmd = [harness, "--overwrite", os.path.join(ROOT, "configs", "text.yaml"), *BASE, "--set", f"data.path={data}",
           "--set", "train.seed=3", "--set", "train.data_seed=8", "--set", f"output.path={out}",
           "--set", "output.checkpoint_every=10", "--set", "train.steps=400"]
    p = subprocess.Popen(cmd[:1] + cmd[2:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    while not os.path.exists(out + ".ckpt") and p.poll() is None:
        time.sleep(0.02)
    p.terminate()
    p.wait()
    r = subprocess.run(cmd[:1] + cmd[2:] + ["--resume"], capture_output=True, text=True)
    uninterrupted = train("straight", "train.data_seed=8", "output.checkpoint_every=10", "train.steps=400")
    check("a resumed run with a data_seed (stopped after a checkpoint) ends with the uninterrupted /params",
          r.returncode == 0 and params(out) == uninterrupted, r.stderr[-300:])


def generate_text(folder, documents=400, size=500_000):
    """documents files of about `size` bytes: the licence texts' lines shuffled, with varied numbers
    and words, so no two documents are the same."""
    lines = [x for f in sorted(os.listdir("/usr/share/common-licenses"))
             for x in open(os.path.join("/usr/share/common-licenses", f), errors="replace").read().splitlines()
             if x.strip()]
    words = sorted({w for x in lines for w in x.split() if w.isalpha()})
    os.makedirs(folder)
    for d in range(documents):
        rng, out, n = random.Random(d), [], 0
        while n < size:
            line = rng.choice(lines).replace("the", rng.choice(words), 1) + f" {rng.randrange(10 ** 6)}"
            out.append(line)
            n += len(line) + 1
        with open(os.path.join(folder, f"doc{d:04d}.txt"), "w") as f:
            f.write("\n".join(out) + "\n")


def check_tokenize_memory(harness, tmp):
    folder, out = os.path.join(tmp, "text"), os.path.join(tmp, "corpus")
    generate_text(folder)
    total = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))
    wrapper = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]); "
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(r.returncode)")
    start = time.monotonic()
    r = subprocess.run([sys.executable, "-c", wrapper, sys.executable, os.path.join(ROOT, "scripts", "tokenize"),
                        folder, "--out", out, "--vocab", "2048", "--sample-mb", "5"], capture_output=True, text=True)
    seconds = time.monotonic() - start
    peak = int(r.stdout.strip().splitlines()[-1]) / 1024 if r.returncode == 0 else float("nan")
    check(f"tokenize {total / 1e6:.0f} MB of text (400 documents): every process under {MEMORY_BOUND_MIB} MiB "
          f"(peak {peak:.0f} MiB, {seconds:.0f} s)",
          r.returncode == 0 and total >= 200e6 and peak < MEMORY_BOUND_MIB,
          f"peak {peak:.0f} MiB, {seconds:.0f} s" if r.returncode == 0 else r.stderr[-300:])
    if r.returncode != 0:
        return
    record = json.load(open(os.path.join(out, "corpus.json")))
    counts = {}
    for name in record["splits"]:
        with open(os.path.join(out, f"{name}.bin"), "rb") as f:
            counts[name] = struct.unpack("<Q", f.read(32)[24:32])[0]
    ok = all(counts[k] == v["tokens"] > 0 for k, v in record["splits"].items()) and \
        sum(v["documents"] for v in record["splits"].values()) == 400 and \
        sum(v["bytes"] for v in record["splits"].values()) == total
    check("... every document in one split, corpus.json's counts = the headers'", ok, str(counts))


def suite(harness, tmp):
    small = check_in_place(harness, tmp)
    check_data_seed(harness, tmp, small)
    check_tokenize_memory(harness, tmp)


def main(argv):
    return temp_suite(argv, "heads-data-scale-", suite)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
