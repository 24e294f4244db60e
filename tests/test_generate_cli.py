#!/usr/bin/python3
# suite: harness generate (greedy = full forwards, sampling, the K/V cache size, bad input)
# suite-args: --harness {harness}
"""`harness generate` from the command line (the cache itself against the full forward, at every
position of every layout, is tests/test_generate.c).

usage: /usr/bin/python3 tests/test_generate_cli.py [--harness PATH] [--keep]

On short training runs (ids with learned positions, grouped K/V with rotary, a byte-level text run):
  - greedy: each generated token is the argmax of `harness inspect --tokens SO_FAR --logits` (a
    full forward over the sequence so far), token for token;
  - rotary runs generate past seq_len (no position table to run out of);
  - sampling: the same --seed gives the same tokens, --top-k 1 gives the greedy ones, every
    token sampled with --top-k 3 is among the 3 most likely of the full forward at its step, and
    the first token over 400 seeds follows softmax(logits / T) over the top K (chi-square test
    against probabilities computed here from inspect --logits; the seeds are fixed, so the
    outcome is too);
  - the K/V cache line: bytes per token = 4·2·H_kv·d_head·L (computed here), the same figure
    `harness --shapes` prints, and the total = bytes per token x tokens cached;
  - a text run prints the prompt and the continuation as text (the bytes of the ids);
  - bad input (learned positions past seq_len, --top-k without --temperature, a bad number, no
    file, --prompt on a run of ids): exit 2, one line.
"""
import os
import re
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True
sys.path.insert(0, HERE)
from checks import check, phrase_tokens, temp_suite  # noqa: E402


SAMPLES = 400


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def write_configs(tmp):
    phrase_tokens(os.path.join(tmp, "tokens.bin"), 40, 3, n_phrases=15, longest=7)
    common = "train: {steps: 30, batch_size: 8, lr: 0.01, warmup_steps: 5, threads: 1}\n"
    with open(os.path.join(tmp, "ids.yaml"), "w") as f:
        f.write("model: {vocab_size: 40, d_model: 24, n_head: 4, d_head: 6, n_layer: 2, seq_len: 16}\n" + common +
                f"data: {{task: tokens, path: {tmp}/tokens.bin}}\noutput: {{eval_every: 15, eval_batches: 1, probes: 2}}\n")
    with open(os.path.join(tmp, "text.txt"), "w") as f:
        f.write("the cat sat on the mat. " * 300)
    with open(os.path.join(tmp, "text.yaml"), "w") as f:
        f.write("model: {vocab_size: 256, d_model: 32, n_head: 4, n_layer: 2, seq_len: 24}\n" + common +
                f"data: {{task: text, path: {tmp}/text.txt}}\noutput: {{eval_every: 15, eval_batches: 1, probes: 2}}\n")


def train(harness, tmp, config, out, *sets):
    cmd = [harness, os.path.join(tmp, config), "--set", f"output.path={out}"]
    for s in sets:
        cmd += ["--set", s]
    r = run(cmd)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr[-300:]}")


def generate(harness, path, *args):
    r = run([harness, "generate", path, *args])
    m = re.search(r"^tokens:(.*)\|(.*)$", r.stdout, re.M)
    if r.returncode != 0 or not m:
        raise RuntimeError(f"generate {' '.join(args)}: exit {r.returncode}: {r.stderr[-300:]}")
    return [int(x) for x in m.group(1).split()], [int(x) for x in m.group(2).split()], r.stdout


def full_logits(harness, path, tokens):
    r = run([harness, "inspect", path, "--tokens", ",".join(map(str, tokens)), "--logits"])
    part = r.stdout.split("logits after the last input (id logit):\n", 1)[1]
    return np.array([float(line.split()[1]) for line in part.strip().splitlines()])


def cache_line(stdout):
    m = re.search(r"^K/V cache .* = ([\d,]+) values per token = [\d,]+ B(?: \([^)]*\))? in bf16, ([\d,]+) B.* in fp32; "
                  r"([\d,]+) tokens: .* in bf16, ([\d,]+) B[^,;]* in fp32$", stdout, re.M)
    return tuple(int(g.replace(",", "")) for g in m.groups()) if m else None


def check_greedy(harness, name, path, prompt, n):
    given, new, out = generate(harness, path, "--tokens", ",".join(map(str, prompt)), "--max-new", str(n))
    seq, ok, first_bad = list(prompt), True, None
    for t in new:
        want = int(np.argmax(full_logits(harness, path, seq)))
        if want != t and ok:
            ok, first_bad = False, (len(seq), t, want)
        seq.append(t)
    check(f"{name}: greedy generate = argmax of a full forward (inspect --logits) at each of {n} steps",
          ok and given == list(prompt) and len(new) == n, f"first difference (position, generate, full) {first_bad}")
    return out


def check_sampling(harness, path, prompt):
    args = ["--tokens", ",".join(map(str, prompt)), "--max-new", "10"]
    _, a, _ = generate(harness, path, *args, "--temperature", "2", "--seed", "5")
    _, b, _ = generate(harness, path, *args, "--temperature", "2", "--seed", "5")
    _, greedy, _ = generate(harness, path, *args)
    _, top1, _ = generate(harness, path, *args, "--temperature", "3", "--top-k", "1", "--seed", "9")
    check("sampling: the same --seed gives the same tokens", a == b, f"{a} vs {b}")
    check("sampling: --top-k 1 gives the greedy tokens", top1 == greedy, f"{top1} vs {greedy}")
    _, k3, _ = generate(harness, path, *args, "--temperature", "5", "--top-k", "3", "--seed", "2")
    seq, inside = list(prompt), True
    for t in k3:
        top = np.argsort(-full_logits(harness, path, seq), kind="stable")[:3]
        inside &= t in top
        seq.append(t)
    check("sampling: every token drawn with --top-k 3 is among the full forward's 3 most likely", inside, f"{k3}")
    # the first token drawn with seeds 1..N follows softmax(logits / T) over the top K (chi-square)
    from scipy.stats import chisquare
    T, K, N = 1.5, 4, SAMPLES
    logits = full_logits(harness, path, prompt)
    top = np.argsort(-logits, kind="stable")[:K]
    p = np.exp((logits[top] - logits[top].max()) / T)
    p /= p.sum()
    counts = dict.fromkeys(top.tolist(), 0)
    for seed in range(1, N + 1):
        _, first, _ = generate(harness, path, "--tokens", ",".join(map(str, prompt)), "--max-new", "1",
                               "--temperature", str(T), "--top-k", str(K), "--seed", str(seed))
        counts[first[0]] = counts.get(first[0], 0) + 1
    observed = [counts[t] for t in top.tolist()]
    pvalue = chisquare(observed, N * p).pvalue if sum(observed) == N else 0.0
    check(f"sampling: the first token over {N} seeds follows softmax(logits/{T}) over the top {K} "
          f"(chi-square p = {pvalue:.3g} > 1e-3; observed {observed}, expected {np.round(N * p, 1).tolist()})",
          pvalue > 1e-3, f"counts {counts}")


def check_cache_size(harness, tmp, name, path, config, sets, L, Hkv, dh, stdout):
    cmd = [harness, "--shapes", os.path.join(tmp, config)]
    for s in sets:
        cmd += ["--set", s]
    shapes = run(cmd).stdout
    m = re.search(r"^  ([\d,]+) values per token = [\d,]+ B(?: \([^)]*\))? in bf16, ([\d,]+) B", shapes, re.M)
    got = cache_line(stdout)
    want = 4 * 2 * Hkv * dh * L
    ok = got is not None and m is not None and got[1] == want == int(m.group(2).replace(",", "")) \
        and got[0] * 4 == want and got[3] == got[1] * got[2]
    check(f"{name}: K/V cache {want} bytes per token (4*2*H_kv*d_head*L) in generate and --shapes; total = per token x tokens",
          ok, f"generate {got}, --shapes {m.group(0) if m else None}")


def check_errors(harness, ids_run, text_run):
    cases = [
        ("learned positions past seq_len", [ids_run, "--tokens", "1,2,3", "--max-new", "14"], "seq_len"),
        ("--top-k without --temperature", [ids_run, "--tokens", "1,2", "--top-k", "3"], "--temperature"),
        ("--max-new -1", [ids_run, "--tokens", "1,2", "--max-new", "-1"], "--max-new"),
        ("--temperature 0", [ids_run, "--tokens", "1,2", "--temperature", "0"], "--temperature"),
        ("no such file", [ids_run + ".nope", "--tokens", "1,2"], ".nope"),
        ("--prompt on a run of ids", [ids_run, "--prompt", "hi"], "--tokens"),
        ("--tokens out of the vocabulary", [text_run, "--tokens", "1,999"], "--tokens"),
    ]
    for what, args, needle in cases:
        r = run([harness, "generate", *args])
        lines = r.stderr.strip().splitlines()
        first = lines[0] if lines else ""
        check(f"bad input: {what}: exit 2, the first line names it", r.returncode == 2 and needle in first
              and "Traceback" not in r.stderr, f"exit {r.returncode}: {r.stderr.strip()[-200:]}")


def suite(harness, tmp):
    write_configs(tmp)
    ids_run, gqa_run, text_run = (os.path.join(tmp, n) for n in ("ids.h5", "gqa.h5", "text.h5"))
    train(harness, tmp, "ids.yaml", ids_run)
    gqa_sets = ["model.n_kv_head=2", "model.pos=rope"]
    train(harness, tmp, "ids.yaml", gqa_run, *gqa_sets)
    train(harness, tmp, "text.yaml", text_run)
    out = check_greedy(harness, "learned positions (H4 dh6)", ids_run, [1, 2, 3], 13)
    check_cache_size(harness, tmp, "learned positions", ids_run, "ids.yaml", [], 2, 4, 6, out)
    out = check_greedy(harness, "rotary, grouped K/V (H4 Hkv2)", gqa_run, [5, 6], 14)
    check_cache_size(harness, tmp, "grouped K/V", gqa_run, "ids.yaml", gqa_sets, 2, 2, 6, out)
    _, new, out = generate(harness, gqa_run, "--tokens", "5,6", "--max-new", "40")
    check("rotary: generate runs past seq_len (2 + 40 tokens, seq_len 16)", len(new) == 40 and cache_line(out)[2] == 41,
          out[-200:])
    check_sampling(harness, ids_run, [1, 2, 3])
    prompt, new, out = generate(harness, text_run, "--prompt", "the cat", "--max-new", "12")
    m = re.search(r"^prompt: (.*)\ngenerated \(greedy\): (.*)$", out, re.M)
    check("text run: --prompt as bytes; prompt and continuation printed as text (the bytes of the ids)",
          prompt == list(b"the cat") and m and m.group(1) == "the cat" and m.group(2).encode() == bytes(new),
          out[:300])
    check_errors(harness, ids_run, text_run)


def main(argv):
    return temp_suite(argv, "heads-generate-", suite)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
