#!/usr/bin/python3
# suite: llama.cpp runs the GGUF export (probabilities, greedy continuation, tokenisation)
# suite-args: --harness {harness}
"""scripts/export --to gguf, proven in llama.cpp itself: the exported file loaded by llama.cpp (the
prebuilt CPU binaries of the npm package node-llama-cpp, pinned with its lock file in
tests/llama/) computes the harness's numbers.

usage: /usr/bin/python3 tests/test_llama.py [--harness PATH] [--keep]

The suite installs its npm package itself (`npm ci` in tests/llama, NODE_LLAMA_CPP_SKIP_DOWNLOAD=true:
no binary is built or downloaded at run time; the binaries are the package's own) and runs
tests/llama/evaluate.mjs: CPU only, F32 K/V cache, flash attention off, a context twice the run's
seq_len (larger than the tokens evaluated). Node.js 18 (Debian 12's) or newer: node-llama-cpp
3.22.1 is the version pinned because the F32 K/V cache (experimentalKvCacheKeyType) exists only in
the releases that declare Node >= 20; the last one declaring Node 18 (3.6.0) has llama.cpp's F16
cache only, whose rounding moves the probabilities by 1.5e-5. package.json overrides its
string-width with 7.1.0, whose code Node 18 parses (the newer one's regular expressions need Node
20's `v` flag); with that, Debian's node 18.20.4 runs it and gives the same numbers. The lock
file names the platform packages of macOS, Windows and riscv64 by version only (no integrity):
the registry it was locked against served the Linux ones alone; npm ci skips them on Linux.
NODE=PATH runs another node than the one on PATH.

For each layout the export accepts, a short training run (learned positions with E = D, E < D
with heads padded, E < D with D not a multiple of H, E > D; grouped K/V; multi-query; no
positions; every run of ids carries an unembedding bias that holds the 256 extra byte tokens at
probability 0), a byte-level text run (no padding, no bias: the file is the model as it is) and a
SentencePiece subword run:
  - llama.cpp's next-token probabilities at every position of every probe (/probe/tokens) equal
    the softmax of `harness inspect --tokens PREFIX --logits` to <= 1e-5, and the extra tokens'
    are exactly 0;
  - llama.cpp's greedy continuation of the first 4 tokens of probe 0 equals `harness generate`'s;
  - text and subword runs: llama.cpp's tokenisation of texts equals the harness's encoder
    (`harness inspect --prompt`), "How are" among them.
Refused, exit 2 and one line naming the switch, nothing written: rotary, shortformer, the sink,
the output gate.
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PACKAGE = os.path.join(HERE, "llama")
EXPORT = os.path.join(ROOT, "scripts", "export")
sys.dont_write_bytecode = True
sys.path.insert(0, HERE)
from checks import check, phrase_tokens, temp_suite  # noqa: E402
sys.path.insert(0, os.path.join(ROOT, "python"))
from heads import results  # noqa: E402

PROB_ATOL = 1e-5
NODE_MAJOR_MIN = 18
PROMPT = 4
TEXTS = ["How are", "How are you?", "The cat sat on the mat", "the GNU General Public License",
         "naïve café", "x"]

# name -> --set overrides of the base config (tokens task, V 48, D 32, H 4, d_head 8, 2 layers, T 16)
LAYOUTS = [
    ("E = D (H4 dh8)", {}),
    ("E < D, heads padded to D/H (H4 dh5)", {"model.d_head": 5}),
    ("E < D, D not a multiple of H (H3 dh6)", {"model.n_head": 3, "model.d_head": 6}),
    ("E > D (H6 dh8)", {"model.n_head": 6}),
    ("grouped K/V (H4 Hkv2)", {"model.n_kv_head": 2}),
    ("multi-query (H4 Hkv1)", {"model.n_kv_head": 1}),
    ("no positions", {"model.pos": "none"}),
]
REFUSED = [
    ("rotary", {"model.pos": "rope"}, "model.pos is rope"),
    ("shortformer", {"model.pos": "shortformer"}, "model.pos is shortformer"),
    ("attention sink", {"model.sink": "true"}, "model.sink"),
    ("output gate", {"model.output_gate": "true"}, "model.output_gate"),
]


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=900, **kw)


def write_configs(tmp):
    phrase_tokens(os.path.join(tmp, "tokens.bin"), 48, 7)
    common = "train: {steps: 40, batch_size: 8, lr: 0.01, warmup_steps: 5, threads: 1}\n"
    with open(os.path.join(tmp, "ids.yaml"), "w") as f:
        f.write("model: {vocab_size: 48, d_model: 32, n_head: 4, d_head: 8, n_layer: 2, seq_len: 16}\n" + common +
                f"data: {{task: tokens, path: {tmp}/tokens.bin}}\noutput: {{eval_every: 20, eval_batches: 1, probes: 3}}\n")
    licences = sorted({os.path.realpath(p) for p in glob.glob("/usr/share/common-licenses/*")})
    text = os.path.join(tmp, "text.txt")
    with open(text, "w") as f:
        f.write(open(licences[0], encoding="utf-8").read() if licences else "How are you? " * 400)
    with open(os.path.join(tmp, "text.yaml"), "w") as f:
        f.write("model: {vocab_size: 256, d_model: 32, n_head: 4, n_layer: 2, seq_len: 32}\n" + common +
                f"data: {{task: text, path: {text}}}\noutput: {{eval_every: 20, eval_batches: 1, probes: 3}}\n")
    corpus = os.path.join(tmp, "corpus")
    r = run([sys.executable, os.path.join(ROOT, "scripts", "tokenize"), *licences, "--vocab", "400", "--out", corpus])
    if r.returncode != 0:
        raise RuntimeError(f"scripts/tokenize: {r.stderr[-300:]}")
    with open(os.path.join(tmp, "subword.yaml"), "w") as f:
        f.write("model: {vocab_size: 400, d_model: 32, n_head: 4, n_layer: 2, seq_len: 24}\n" + common +
                f"data: {{task: tokens, path: {corpus}/train.bin, val_path: {corpus}/val.bin, "
                f"tokenizer: {corpus}/tokenizer.model}}\noutput: {{eval_every: 20, eval_batches: 1, probes: 3}}\n")


def train(harness, config, out, sets):
    cmd = [harness, config, "--set", f"output.path={out}"]
    for k, v in sets.items():
        cmd += ["--set", f"{k}={v}"]
    r = run(cmd)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr[-300:]}")


def harness_probabilities(harness, path, seq):
    """softmax of `harness inspect --logits` after every prefix of seq: [len(seq), V]."""
    rows = []
    for t in range(1, len(seq) + 1):
        r = run([harness, "inspect", path, "--tokens", ",".join(map(str, seq[:t])), "--logits"])
        part = r.stdout.split("logits after the last input (id logit):\n", 1)[1]
        logits = np.array([float(line.split()[1]) for line in part.strip().splitlines()])
        p = np.exp(logits - logits.max())
        rows.append(p / p.sum())
    return np.array(rows)


def harness_generate(harness, path, prompt, n):
    r = run([harness, "generate", path, "--tokens", ",".join(map(str, prompt)), "--max-new", str(n)])
    m = re.search(r"^tokens:(.*)\|(.*)$", r.stdout, re.M)
    if r.returncode != 0 or not m:
        raise RuntimeError(f"harness generate {path}: exit {r.returncode}: {r.stderr[-300:]}")
    return [int(x) for x in m.group(2).split()]


def harness_encode(harness, path, text):
    r = run([harness, "inspect", path, "--prompt", text, "--top", "1"])
    m = re.search(r"^input \(\d+ tokens\):(.*)$", r.stdout, re.M)
    return [int(x) for x in re.findall(r"\((\d+)\)(?= |$)", m.group(1))] if m else None


def npm_install():
    """node_modules of tests/llama from its lock file; None when done, else why not."""
    node, npm = os.environ.get("NODE") or shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        return "no node/npm on PATH (scripts/install-deps test installs Debian's nodejs and npm)"
    version = run([node, "--version"]).stdout.strip()
    if int(version.lstrip("v").split(".")[0]) < NODE_MAJOR_MIN:
        return f"node {version} is older than {NODE_MAJOR_MIN}"
    if os.path.isdir(os.path.join(PACKAGE, "node_modules", "node-llama-cpp")):
        return None
    env = dict(os.environ, NODE_LLAMA_CPP_SKIP_DOWNLOAD="true")
    r = run([npm, "ci", "--omit=optional", "--no-audit", "--no-fund"], cwd=PACKAGE, env=env)
    return None if r.returncode == 0 else f"npm ci failed: {r.stderr.strip()[-300:]}"


def llama_evaluate(tmp, jobs):
    path = os.path.join(tmp, "jobs.json")
    with open(path, "w") as f:
        json.dump(jobs, f)
    r = run([os.environ.get("NODE") or "node", os.path.join(PACKAGE, "evaluate.mjs"), path], cwd=PACKAGE)
    if r.returncode != 0:
        raise RuntimeError(f"evaluate.mjs: exit {r.returncode}: {r.stderr.strip()[-500:]}")
    return [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]


def check_run(harness, name, path, gguf_path, out, texts):
    with h5py.File(path, "r") as f:
        probes = f["probe/tokens"][()].tolist()
        V = f["params/tok_emb"].shape[0]
    worst, extra = 0.0, 0.0
    for seq, got in zip(probes, out["probabilities"]):
        got = np.array(got)
        want = harness_probabilities(harness, path, seq)
        worst = max(worst, float(np.abs(got[:, :V] - want).max()))
        extra = max(extra, float(got[:, V:].max()) if got.shape[1] > V else 0.0)
    positions = sum(len(s) for s in probes)
    check(f"{name}: llama.cpp's next-token probabilities = the harness's at all {positions} probe positions "
          f"(max |diff| {worst:.2g} <= {PROB_ATOL:g})", worst <= PROB_ATOL and len(out["probabilities"]) == len(probes),
          f"max |diff| {worst:.3g}")
    if out["vocab"] > V:
        check(f"{name}: the {out['vocab'] - V} extra byte tokens have probability exactly 0", extra == 0.0, f"max {extra}")
    want = harness_generate(harness, path, probes[0][:PROMPT], len(probes[0]) - PROMPT)
    check(f"{name}: llama.cpp's greedy continuation = harness generate's ({len(want)} tokens)",
          out["greedy"] == want, f"llama.cpp {out['greedy']}, harness {want}")
    for text, ids in zip(texts, out["tokenized"]):
        want = harness_encode(harness, path, text)
        check(f"{name}: llama.cpp tokenises {text!r} as the harness's encoder ({len(want or [])} tokens)",
              ids == want, f"llama.cpp {ids}, harness {want}")


def check_refused(tmp, harness, what, sets, needle):
    path = os.path.join(tmp, f"refused_{what.replace(' ', '_')}.h5")
    train(harness, os.path.join(tmp, "ids.yaml"), path, dict(sets, **{"train.steps": 5}))
    out = os.path.join(tmp, "refused.gguf")
    r = run([sys.executable, EXPORT, path, "--to", "gguf", out])
    lines = r.stderr.strip().splitlines()
    ok = r.returncode == 2 and len(lines) == 1 and needle in lines[0] and not os.path.exists(out)
    check(f"refused: {what}: exit 2, one line naming '{needle}', nothing written", ok,
          lines[0] if len(lines) == 1 else f"exit {r.returncode}: {r.stderr.strip()[-300:]}")


def suite(harness, tmp):
    write_configs(tmp)
    for what, sets, needle in REFUSED:
        check_refused(tmp, harness, what, sets, needle)
    runs = [(name, "ids.yaml", sets, []) for name, sets in LAYOUTS]
    runs += [("text run (bytes, E = D: unpadded)", "text.yaml", {}, TEXTS),
             ("subword run (SentencePiece)", "subword.yaml", {}, TEXTS)]
    jobs, made = [], []
    for i, (name, config, sets, texts) in enumerate(runs):
        path, gguf_path = os.path.join(tmp, f"run{i}.h5"), os.path.join(tmp, f"run{i}.gguf")
        train(harness, os.path.join(tmp, config), path, sets)
        r = run([sys.executable, EXPORT, path, "--to", "gguf", gguf_path])
        if not check(f"{name}: scripts/export --to gguf", r.returncode == 0 and os.path.isfile(gguf_path),
                     r.stderr.strip()[-300:]):
            continue
        with h5py.File(path, "r") as f:
            probes = f["probe/tokens"][()].tolist()
        T = int(results.Run(path).config["seq_len"])
        jobs.append({"model": gguf_path, "context": 2 * T, "sequences": probes,
                     "greedy": {"prompt": probes[0][:PROMPT], "n": len(probes[0]) - PROMPT}, "texts": texts})
        made.append((name, path, gguf_path, texts))
    why = npm_install()
    if why:
        print(f"skipped: llama.cpp did not run ({why}); the export and refusal checks ran")
        return
    for (name, path, gguf_path, texts), out in zip(made, llama_evaluate(tmp, jobs)):
        check_run(harness, name, path, gguf_path, out, texts)


def main(argv):
    return temp_suite(argv, "heads-llama-", suite)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
