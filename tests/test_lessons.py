#!/usr/bin/python3
# suite: the lessons (docs/lessons.md): each of its experiments' commands and the figures it quotes
# suite-args: --harness {harness}
"""What a student of multi-head attention meets, checked on the commands docs/lessons.md gives.

usage: /usr/bin/python3 tests/test_lessons.py [--harness PATH] [--keep]

  1. --shapes of GPT-2's attention (12 heads of 64 over 768) against one head of 768: the same
     parameters; the Q/K/V split [T, E] before the head view [H, T, d_h].
  2. Qwen's K/V arithmetic (configs/qwen_style.yaml, 16 full-attention layers): per token in bf16
     64 KiB with 4 K/V heads, 384 KiB as MHA, 16 KiB as MQA (also with --set n_kv_head=24 and 1);
     a 262,144-token context sized by --shapes and refused for training (exit 2, one line).
  3. GQA and MQA runs: `harness inspect` prints the K/V head count the run has (2, 1) in its
     per-head shapes, as --shapes does; the training log names the layout switches that are on;
     a sink run's inspect has the "none" column, 1 minus the row's sum.
  4. The two-source task, 1 head against 2 (configs/sweep_two_source.yaml, 300 steps): inspect
     names the tokens a4, b4, =, (a,b); with 2 heads the class over every query is mixed while at
     the marked "=" rows one head is "2 back" (source a) and the other "prev" (source b), in the
     console, /scores/marked_* and the report's data; one head does not split cleanly; AtP prints
     no nan for one head; plot titles say "1 head".
"""
import os
import re
import subprocess
import sys

import h5py

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.dont_write_bytecode = True
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))
from checks import check, temp_suite  # noqa: E402


def run(cmd, timeout=600):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def shapes(harness, *args):
    r = run([harness, "--shapes", *args])
    if r.returncode != 0:
        raise RuntimeError(f"--shapes {' '.join(args)}: {r.stderr[-300:]}")
    return r.stdout


def train(harness, out, config, *sets):
    cmd = [harness, config, "--set", f"output.path={out}"]
    for s in sets:
        cmd += ["--set", s]
    r = run(cmd)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr[-400:]}")
    return r


def total_params(text):
    return int(re.search(r"^  total +[\d,]+ +([\d,]+)$", text, re.M).group(1).replace(",", ""))


def test_gpt2_shapes(harness):
    many = shapes(harness, "configs/heads12.yaml", "--set", "d_model=768", "--set", "n_head=12",
                  "--set", "seq_len=1024", "--set", "vocab_size=50257")
    one = shapes(harness, "configs/heads12.yaml", "--set", "d_model=768", "--set", "n_head=1",
                 "--set", "seq_len=1024", "--set", "vocab_size=50257")
    check("lesson 1: 12 heads of 64 and 1 head of 768 over 768 have the same parameters",
          total_params(many) == total_params(one), f"{total_params(many)} vs {total_params(one)}")
    check("lesson 1: --shapes shows QKV [1024, 2304], then Q, K, V [1024, 768] each, then [12, 1024, 64] each",
          re.search(r"^  QKV +\[T,3E\] += \[1024, 2304\]", many, re.M)
          and re.search(r"^  Q, K, V +\[T,E\] += \[1024, 768\] each", many, re.M)
          and re.search(r"^  Q, K, V +\[H,T,d_h\] += \[12, 1024, 64\] each", many, re.M), many[:1200])


def test_qwen_kv(harness):
    out = shapes(harness, "configs/qwen_style.yaml")
    check("lesson 2: qwen_style: 24 heads of 256 over 5120, 4 K/V heads, 16 layers",
          "d_model D=5120, n_head H=24, d_head=256" in out and "n_layer L=16" in out and "H_kv=4" in out,
          out[:300])
    want = {"GQA-4": 64 * 1024, "MHA": 384 * 1024, "MQA": 16 * 1024}
    m = re.search(r"^  ([\d,]+) values per token = ([\d,]+) B \(64 KiB\) in bf16, ([\d,]+) B \(128 KiB\) in fp32", out, re.M)
    got = int(m.group(2).replace(",", "")) if m else None
    check("lesson 2: KV cache per token, GQA-4 at 16 layers in bf16: 65,536 B = 64 KiB (and 128 KiB in fp32)",
          got == want["GQA-4"] == 2 * 2 * 4 * 256 * 16, out[out.find("K/V cache"):][:400])
    m = re.search(r"with H_kv = H = 24 \(MHA\): ([\d,]+) B \(384 KiB\); with H_kv = 1 \(MQA\): ([\d,]+) B \(16 KiB\)", out)
    check("lesson 2: the same layout as MHA 384 KiB, as MQA 16 KiB per token in bf16",
          m and int(m.group(1).replace(",", "")) == want["MHA"] and int(m.group(2).replace(",", "")) == want["MQA"],
          out[out.find("K/V cache"):][:400])
    for kv, name in ((24, "MHA"), (1, "MQA")):
        o = shapes(harness, "configs/qwen_style.yaml", "--set", f"n_kv_head={kv}")
        m = re.search(r"^  [\d,]+ values per token = ([\d,]+) B", o, re.M)
        check(f"lesson 2: --set n_kv_head={kv} prints {name}'s {want[name] // 1024} KiB per token in bf16",
              m and int(m.group(1).replace(",", "")) == want[name], o[o.find("K/V cache"):][:300])
    o = shapes(harness, "configs/qwen_style.yaml", "--set", "seq_len=262144")
    check("lesson 2: --shapes sizes a 262,144-token context: 16 GiB of bf16 K/V cache",
          "262,144 tokens: 17,179,869,184 B (16 GiB) in bf16" in o, o[o.find("K/V cache"):][:300])
    r = run([harness, "configs/qwen_style.yaml", "--set", "seq_len=262144"])
    lines = r.stderr.strip().splitlines()
    check("lesson 2: training a 262,144-token context is refused: exit 2, one line naming the limit",
          r.returncode == 2 and len(lines) == 1 and "65536" in lines[0] and "--shapes" in lines[0], r.stderr[-300:])


def test_kv_layouts(harness, tmp):
    base = ["configs/heads12.yaml"]
    sets = ["steps=20", "n_head=4", "d_model=32", "output.patch_batches=0", "output.prune_step=0"]
    for kv, kind in ((2, "grouped-query"), (1, "multi-query")):
        out = os.path.join(tmp, f"kv{kv}.h5")
        r = train(harness, out, *base, *sets, f"n_kv_head={kv}")
        check(f"lesson 3: the training log of n_kv_head={kv} names the layout ({kind}, H_kv={kv})",
              re.search(rf"^model: 2 layers of 4 heads of 8 over d_model 32; attention: {kind}, K/V heads H_kv={kv}",
                        r.stderr, re.M), r.stderr[:300])
        ins = run([harness, "inspect", out, "--tokens", "0,3,5,7,3,5"]).stdout
        check(f"lesson 3: inspect of n_kv_head={kv}: Q per head [4, 6, 8], K/V per head [{kv}, 6, 8], K/V [6, {8 * kv}]",
              f"Q [6, 32], K/V [6, {8 * kv}] each" in ins and f"Q per head [4, 6, 8], K/V per head [{kv}, 6, 8] each" in ins,
              ins[:400])
        sh = shapes(harness, *base, *[a for s in sets for a in ("--set", s)], "--set", f"n_kv_head={kv}")
        check(f"lesson 3: --shapes of n_kv_head={kv} prints the same K/V heads as inspect (at T=64)",
              re.search(rf"^  K, V +\[H_kv,T,d_h\] += \[{kv}, 64, 8\] each", sh, re.M), sh[:900])
    out = os.path.join(tmp, "sink.h5")
    r = train(harness, out, *base, *sets, "sink=true")
    check("lesson 3: the training log names the sink", "attention sink" in r.stderr.splitlines()[0], r.stderr[:300])
    ins = run([harness, "inspect", out, "--tokens", "0,3,5", "--layer", "0", "--head", "0"]).stdout
    rows = [line.split() for line in ins.splitlines() if re.match(r"^ +\d+ ", line)]
    ok = bool(rows) and "none" in ins
    for row in rows:  # position, token, weights..., none
        weights = [float(x) for x in row[2:]]
        ok &= abs(sum(weights[:-1]) + weights[-1] - 1) < 0.015
    check("lesson 3: inspect of a sink run: a 'none' column, 1 minus each row's weights", ok, ins[:600])


def test_two_source(harness, tmp):
    one, two = os.path.join(tmp, "one.h5"), os.path.join(tmp, "two.h5")
    r1 = train(harness, one, "configs/sweep_two_source.yaml", "n_head=1")
    r2 = train(harness, two, "configs/sweep_two_source.yaml", "n_head=2")
    ins = run([harness, "inspect", two, "--tokens", "0,6,10,1,40", "--layer", "0", "--head", "1"]).stdout
    check("lesson 4: inspect names two-source tokens as the plots do: BOS a4 b2 = (4,2)",
          "input (5 tokens): BOS(0) a4(6) b2(10) =(1) (4,2)(40)" in ins and re.search(r"^ +3 = ", ins, re.M), ins[:700])
    table = re.findall(r"^ +0 +(\d) +(\w+) +\w+ +[\d.]+ +(mixed \(.*?\)|[\w ]+? [\d.]+) +[+-]", r2.stdout, re.M)
    marked = {h: cell for h, _, cell in table}
    classes = {h: c for h, c, _ in table}
    with h5py.File(two, "r") as f:
        mclass = [x.decode() if isinstance(x, bytes) else x for x in f["scores/marked_class"][0]]
        mscore = list(f["scores/marked_score"][0])
        marked_rows = f["probe/marked"][()]
        toks = f["probe/tokens"][()]
    check("lesson 4: two heads are 'mixed' over every query", set(classes.values()) == {"mixed"}, r2.stdout[:600])
    check("lesson 4: at the marked '=' rows one head takes a (2 back) and the other b (prev), above 0.5",
          sorted(mclass) == ["2 back", "prev"] and min(mscore) > 0.5 and max(mscore) > 0.9, f"{mclass} {mscore}")
    check("lesson 4: the console's 'at marked rows' column says the same as /scores/marked_*",
          sorted(c.rsplit(" ", 1)[0] for c in marked.values()) == sorted(mclass), f"{marked} vs {mclass}")
    check("lesson 4: /probe/marked marks exactly the '=' queries of two_source",
          ((toks == 1) == (marked_rows == 1)).all())
    with h5py.File(one, "r") as f:
        one_top = f["scores/marked_top"][0][0]
        one_score = float(f["scores/marked_score"][0][0])
        one_loss = float(f["eval/loss"][-1])
    with h5py.File(two, "r") as f:
        two_loss = float(f["eval/loss"][-1])
    check("lesson 4: one head splits its '=' rows (prev between 0.4 and 0.6, the rest on a)",
          (one_top.decode() if isinstance(one_top, bytes) else one_top) == "prev" and 0.4 < one_score < 0.6,
          f"{one_top} {one_score}")
    check("lesson 4: at step 300 one head's held-out loss is over 4x two heads' (docs: 0.31 against 0.045)",
          one_loss > 4 * two_loss, f"{one_loss} vs {two_loss}")
    from heads.read import results
    with h5py.File(two, "r") as f:
        cells = results.read_marked(f)
    check("lesson 4: the report reads the same cells the console prints",
          sorted(cells[0]) == sorted(marked.values()), f"{cells} vs {marked}")
    check("lesson 4: AtP prints no nan Pearson r for one head", " nan" not in r1.stdout and "none (one head)" in r1.stdout,
          [line for line in r1.stdout.splitlines() if "Pearson" in line])
    check("lesson 4: the table's count is singular for one head", "1 head is a mixed head" in r1.stdout, r1.stdout[-600:])
    from heads.plots import plot_run
    with h5py.File(one, "r") as f:
        title = plot_run.describe(f, "one")
    check("lesson 4: plot titles say '1 head of 32, 1 layer'", "1 head of 32, 1 layer," in title, title)


def main(argv):
    def suite(harness, tmp):
        test_gpt2_shapes(harness)
        test_qwen_kv(harness)
        test_kv_layouts(harness, tmp)
        test_two_source(harness, tmp)
    return temp_suite(argv, "heads-lessons-", suite)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
