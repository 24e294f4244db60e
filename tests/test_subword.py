#!/usr/bin/python3
# suite: subword corpora: tokenize, val_path, stored tokenizer, inspect --prompt
# suite-args: --harness {harness}
"""Subword corpora end to end: scripts/tokenize, the tokens task with data.val_path and
data.tokenizer, the tokenizer stored in the run, the harness's own SentencePiece-BPE encoder
(inspect --prompt), a 2-seed sweep, the Python reader and example of docs/python.md, and bad input.

usage: /usr/bin/python3 tests/test_subword.py [--harness PATH] [--keep]

Checks (one line each, then "N passed, M failed"):
  - tokenize on the licence texts of /usr/share/common-licenses (~240 kB): tokenizer.model,
    train.bin, val.bin, test.bin split by document (recomputed here: distinct files in SHA-1
    order, the first 5% validation, the next 5% test), each header (parsed here: magic, uint16,
    vocabulary, count, zlib's CRC-32) right and its ids the library's encoding of its documents'
    lines; corpus.json's sources; corpus too small for the vocabulary, non-UTF-8 text, a bad
    --vocab, a one-line file (one document): exit 2, one line, no output directory;
  - one file (GPL-3) is cut at blank lines into pieces of a 20th of its size, and with
    --piece-mb 0.01 two files into pieces of >= 10 kB ending at blank lines (corpus.json's
    starts and sizes, recomputed here);
  - a 2-seed sweep (1 and 4 heads) on those tokens through scripts/sweep: every run complete, the
    summary's rows; each run stores the .model bytes verbatim (/tokenizer/model) and its pieces,
    passes `harness check`, and docs/results-format.md names its /tokenizer datasets;
    /probe/labels is the decoded text of /probe/tokens; probes are windows of val.bin (the
    held-out file), and without data.val_path windows of the tail of train.bin;
  - the C encoder (harness inspect --prompt) gives the sentencepiece library's ids on every
    held-out line that fits the context, and on strings with runs of spaces, tabs, accents, CJK
    and emoji (byte fallback); inspect shows the pieces ("▁How");
  - heads.results reads the run (maps with named dimensions, pieces as token labels) and the
    docs/python.md's example runs as printed (on this test's sweep);
  - bad input: odd-sized train.bin / val.bin, a truncated, mis-typed or foreign (.npy) token file,
    a header's vocabulary above model.vocab_size, a damaged id (harness data-check), an id >= vocab_size in val.bin (with its index),
    a missing tokenizer file, a tokenizer larger than the vocabulary, data.tokenizer on the text
    task, inspect --prompt on a tokens run without a tokenizer or with a truncated stored model:
    exit 2, one line, no results file.
"""
import collections
import glob
import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import zlib

import h5py
import numpy as np
import sentencepiece as spm

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.dont_write_bytecode = True
sys.path.insert(0, HERE)
from checks import check, temp_suite  # noqa: E402
from heads import results  # noqa: E402
from heads.read import textsum
from heads.core import tokens

VOCAB = 512
SEQ = 48
TRICKY = ["How are", "  leading  and   runs of spaces  ", "tab\tseparated", "naïve café, Zürich",
          "数据 and 😀 emoji", "x", "12345 67.89%", "THE END."]


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)


def one_line_error(r, what, needle, must_not_exist=()):
    lines = r.stderr.strip().splitlines()
    left = [p for p in must_not_exist if os.path.exists(p)]
    ok = r.returncode == 2 and len(lines) == 1 and needle in lines[0] and not left and "Traceback" not in r.stderr
    check(f"bad input: {what}: exit 2, one line, nothing written", ok,
          lines[0] if len(lines) == 1 else f"exit {r.returncode}: {r.stderr.strip()[-300:]}")


def read_bin(path):
    """The ids of a token file, its header parsed here (src/data/token_file.h's layout); checks the
    header's count and CRC-32 against the ids."""
    data = open(path, "rb").read()
    magic, version, width, vocab, size, count, crc = struct.unpack("<8sIIIIQI", data[:36])
    assert (magic, version, width, size) == (b"HEADSTOK", 1, 2, 64), (magic, version, width, size)
    ids = np.frombuffer(data[64:], "<u2")
    assert len(ids) == count and zlib.crc32(data[64:]) == crc and (ids < vocab).all()
    return ids


def corpus_documents():
    """The distinct licence texts by SHA-1 as tokenize splits them: (val, test, train), each a
    list of (path, non-empty lines)."""
    files = sorted({os.path.realpath(p) for p in glob.glob("/usr/share/common-licenses/*")})
    docs = {}
    for f in files:
        docs.setdefault(hashlib.sha1(open(f, "rb").read()).hexdigest(), f)
    order = [docs[h] for h in sorted(docs)]
    n = max(1, round(len(order) * 0.05))
    lines = [(f, [x for x in open(f, encoding="utf-8").read().splitlines() if x.strip()]) for f in order]
    return files, lines[:n], lines[n:2 * n], lines[2 * n:]


def check_tokenize(tmp):
    files, val_docs, test_docs, train_docs = corpus_documents()
    out = os.path.join(tmp, "corpus")
    tokenize = [sys.executable, os.path.join(ROOT, "scripts", "tokenize")]
    r = run([*tokenize, *files, "--vocab", str(VOCAB), "--out", out])
    m = re.search(r"val.bin (\d+) tokens .*test.bin (\d+) tokens .*train.bin (\d+) tokens .*tokenizer.model (\d+) "
                  r"pieces", r.stdout)
    size = sum(os.path.getsize(f) for f in files)
    if not check(f"tokenize {len(files)} licence files ({size // 1000} kB) --vocab {VOCAB}",
                 r.returncode == 0 and m and size > 200_000, (r.stdout + r.stderr).strip()[-300:]):
        raise RuntimeError("tokenize failed; nothing else can run")
    sp = spm.SentencePieceProcessor(model_file=os.path.join(out, "tokenizer.model"))
    got, want = {}, {}
    for name, docs in (("val", val_docs), ("test", test_docs), ("train", train_docs)):
        got[name] = read_bin(os.path.join(out, f"{name}.bin"))
        want[name] = [i for _, lines in docs for line in lines for i in sp.encode(line)]
    ok = [len(got[k]) for k in ("val", "test", "train")] == [int(m.group(i)) for i in (1, 2, 3)] \
        and sp.get_piece_size() == VOCAB and all(list(got[k]) == want[k] for k in got)
    check("train.bin / val.bin / test.bin: by document (SHA-1 order), the printed counts, headers right, "
          "the library's encoding of each split's documents", ok, f"{[len(x) for x in got.values()]} tokens")
    record = json.load(open(os.path.join(out, "corpus.json")))
    held = {os.path.realpath(x["path"]) for x in record["sources"] if x["split"] != "train"}
    check("corpus.json: every document once with its split; no held-out document in training",
          held == {f for f, _ in val_docs + test_docs} and len(record["sources"]) == len(val_docs + test_docs +
                                                                                      train_docs), str(held))
    r = run([os.environ.get("HARNESS", os.path.join(ROOT, "harness")), "data-check",
             *(os.path.join(out, f"{k}.bin") for k in got)])
    check("harness data-check passes the three files", r.returncode == 0 and r.stdout.count(": ok") == 3,
          r.stdout + r.stderr)
    lines = [x for _, ls in train_docs for x in ls]
    small = []
    for k in range(3):
        small.append(os.path.join(tmp, f"small{k}.txt"))
        with open(small[-1], "w") as f:
            f.write("\n".join(lines[10 * k:10 * k + 10]) + "\n")
    nope = os.path.join(tmp, "nope")
    one_line_error(run([*tokenize, *small, "--vocab", "4096", "--out", nope]),
                   "tokenize: a corpus too small for --vocab 4096", "too small for --vocab 4096", [nope])
    one_line = os.path.join(tmp, "one_line.txt")
    with open(one_line, "w") as f:
        f.write(lines[0] + "\n")
    one_line_error(run([*tokenize, one_line, "--out", nope]), "tokenize: one line, so one document", "by document",
                   [nope])
    latin1 = os.path.join(tmp, "latin1.txt")
    with open(latin1, "wb") as f:
        f.write("caf\u00e9 au lait\n".encode("latin-1") * 50)
    one_line_error(run([*tokenize, latin1, *small, "--out", nope]), "tokenize: text that is not UTF-8",
                   "not UTF-8", [nope])
    one_line_error(run([*tokenize, *small, "--vocab", "2000000", "--out", nope]), "tokenize: --vocab 2000000",
                   "--vocab 2000000", [nope])
    with open(os.path.join(tmp, "small.txt"), "w") as f:
        f.write("\n".join(lines[:30]) + "\n")
    return out, sp, [x for _, ls in val_docs for x in ls]


def check_pieces(tmp):
    """One file, or a file above --piece-mb, is cut into documents at blank lines (recomputed here
    from the rule scripts/tokenize states)."""
    tokenize = [sys.executable, os.path.join(ROOT, "scripts", "tokenize")]
    gpl = "/usr/share/common-licenses/GPL-3"
    data = open(gpl, "rb").read()
    out = os.path.join(tmp, "one_file")
    r = run([*tokenize, gpl, "--vocab", "512", "--out", out])
    record = json.load(open(os.path.join(out, "corpus.json"))) if r.returncode == 0 else {}
    want, start, end, piece = [], 0, 0, len(data) // 20
    for line in data.splitlines(keepends=True):
        end += len(line)
        if end - start >= piece and not line.strip():
            want.append((start, end - start))
            start = end
    want += [(start, end - start)] if end > start else []
    got = sorted((x["start"], x["bytes"]) for x in record.get("sources", []))
    check("tokenize one file (GPL-3): cut at blank lines into pieces of size/20 (the old usage works), "
          "recorded in corpus.json", r.returncode == 0 and record["piece_bytes"] == piece and got == want,
          f"{(r.stdout + r.stderr)[-300:]} {got[:4]} vs {want[:4]}")
    out2 = os.path.join(tmp, "two_files")
    r = run([*tokenize, gpl, "/usr/share/common-licenses/Apache-2.0", "--vocab", "512", "--piece-mb", "0.01",
             "--out", out2])
    record = json.load(open(os.path.join(out2, "corpus.json"))) if r.returncode == 0 else {}
    parts = collections.defaultdict(list)
    for x in record.get("sources", []):
        parts[x["path"]].append((x["start"], x["bytes"]))
    whole = all(sum(b for _, b in v) == os.path.getsize(k) and all(b >= 10_000 for _, b in sorted(v)[:-1])
                for k, v in parts.items())
    ends = all(open(k, "rb").read()[s + b - 2:s + b] == b"\n\n" for k, v in parts.items() for s, b in sorted(v)[:-1])
    check("tokenize --piece-mb 0.01: each file above 10 kB cut into pieces of >= 10 kB ending at a blank line, "
          "together the whole file", r.returncode == 0 and len(parts) == 2 and whole and ends and
          len(record["sources"]) >= 4, f"{(r.stdout + r.stderr)[-300:]} {dict(parts)}")


def write_base(tmp, corpus):
    path = os.path.join(tmp, "sub.yaml")
    with open(path, "w") as f:
        f.write(f"""# written by tests/test_subword.py
model: {{vocab_size: {VOCAB}, d_model: 32, n_head: 4, n_layer: 2, seq_len: {SEQ}}}
train: {{steps: 40, batch_size: 8, lr: 0.003, warmup_steps: 5}}
data: {{task: tokens, path: {corpus}/train.bin, val_path: {corpus}/val.bin,
       tokenizer: {corpus}/tokenizer.model}}
output: {{path: {tmp}/unused.h5, eval_every: 20, eval_batches: 2, probes: 3}}
""")
    return path


def check_sweep(tmp, harness, base, corpus, sp):
    exp = os.path.join(tmp, "subword_test.yaml")
    with open(exp, "w") as f:
        f.write(f"base: {base}\ngrid:\n  model.n_head: [1, 4]\nwidth: fixed_width\nseeds: [0, 1]\n")
    env = dict(os.environ, HARNESS=harness)
    r = run([sys.executable, os.path.join(ROOT, "scripts", "sweep"), exp, "-j", "2", "--results", tmp], env=env)
    outdir = os.path.join(tmp, "subword_test")
    rows = results.Summary(outdir).rows() if os.path.exists(os.path.join(outdir, "summary.h5")) else []
    ok = r.returncode == 0 and len(rows) == 4 and all(row["status"] == "complete" for row in rows)
    check("a 2-seed sweep (1 and 4 heads) on the subword tokens: 4 complete runs in the summary", ok,
          (r.stdout + r.stderr).strip()[-300:] if r.returncode else f"{len(rows)} rows")
    run_path = os.path.join(outdir, "h4_dh8_s0.h5")
    model_bytes = open(os.path.join(corpus, "tokenizer.model"), "rb").read()
    val = read_bin(os.path.join(corpus, "val.bin"))
    with h5py.File(run_path, "r") as f:
        stored = bytes(f["tokenizer/model"][()])
        pieces = [results.text(p) for p in f["tokenizer/pieces"][()]]
        tokens, labels = f["probe/tokens"][()], [results.text(x) for x in f["probe/labels"][()]]
    check("the run stores the tokenizer: /tokenizer/model is the .model file byte for byte, "
          "/tokenizer/pieces its pieces", stored == model_bytes and pieces == [sp.id_to_piece(i) for i in range(VOCAB)],
          f"{len(stored)} bytes, {len(pieces)} pieces")
    check("/probe/labels is the decoded text of /probe/tokens",
          labels == [sp.decode([int(x) for x in row]) for row in tokens],
          repr(labels[0][:40]))
    r = run([harness, "check", run_path])
    check("harness check passes on the subword run (tokenizer, probe texts)", r.returncode == 0 and ": ok" in r.stdout,
          (r.stdout + r.stderr).strip()[-300:])
    doc = open(os.path.join(ROOT, "docs", "results-format.md")).read()
    with h5py.File(run_path, "r") as f:
        names = []
        f.visititems(lambda n, o: names.append("/" + n) if isinstance(o, h5py.Dataset) else None)
    undocumented = [n for n in names if n.startswith("/tokenizer") or n == "/probe/labels"
                    if f"`{n}`" not in doc]
    check("docs/results-format.md names every /tokenizer dataset and /probe/labels", not undocumented,
          str(undocumented))
    in_val = all(any(np.array_equal(val[s:s + len(row)], row) for s in range(len(val) - len(row) + 1))
                 for row in tokens)
    check("with data.val_path the probes are windows of val.bin (the held-out file)", in_val)
    return run_path, outdir


def check_tail_split(tmp, harness, base, corpus):
    out = os.path.join(tmp, "tail.h5")
    r = run([harness, base, "--set", "data.val_path=", "--set", "train.steps=0", "--set", f"output.path={out}"])
    train = read_bin(os.path.join(corpus, "train.bin"))
    tail = train[int(len(train) * 0.9):]
    ok = r.returncode == 0
    if ok:
        with h5py.File(out, "r") as f:
            tokens = f["probe/tokens"][()]
        ok = all(any(np.array_equal(tail[s:s + len(row)], row) for s in range(len(tail) - len(row) + 1))
                 for row in tokens)
    check("without data.val_path the held-out part is the tail of data.path (as before)",
          ok,
          r.stderr[-200:])


def inspect_ids(harness, run_path, text):
    r = run([harness, "inspect", run_path, "--prompt", text])
    m = re.search(r"^input \(\d+ tokens\):(.*)$", r.stdout, re.M)
    return ([int(x) for x in re.findall(r"\((\d+)\)(?= |$)", m.group(1))] if m else None), r


def check_encoder(harness, run_path, sp, held_out):
    texts = [line for line in held_out if 1 <= len(sp.encode(line)) <= SEQ] + TRICKY
    bad = []
    for text in texts:
        got, _ = inspect_ids(harness, run_path, text)
        if got != sp.encode(text):
            bad.append((text, got, sp.encode(text)))
    check(f"the harness's BPE encoder == sentencepiece on {len(texts)} texts "
            f"({len(texts) - len(TRICKY)} held-out lines + spaces, tabs, accents, CJK, emoji)", not bad,
            f"first difference: {bad[0]}" if bad else "")
    got, r = inspect_ids(harness, run_path, "How are")
    shown = re.search(r"^input \(\d+ tokens\): (.*)$", r.stdout, re.M)
    want = " ".join(f"{sp.id_to_piece(i)}({i})" for i in sp.encode("How are"))
    ok = got == sp.encode("How are") and shown and shown.group(1) == want and "▁" in want \
        and "next token predicted" in r.stdout
    check("inspect --prompt 'How are' shows the subword pieces", ok,
          re.search(r"^input.*$", r.stdout, re.M).group(0) if "input" in r.stdout else r.stderr.strip())


def check_reader(tmp, run_path, outdir, sp):
    run_ = results.Run(run_path)
    maps = run_.maps()
    head = maps.isel(step=-1, layer=1, head=2, probe=0)
    labels = run_.token_labels(0)
    ok = maps.dims == ("step", "layer", "head", "probe", "query", "key") and head.shape == (SEQ, SEQ) \
        and np.allclose(head.sum(-1), 1, atol=1e-5) \
        and labels == [tokens.piece_label(sp.id_to_piece(int(i))) for i in run_.probe_tokens()[0]]
    check("heads.results.Run: maps with named dimensions, one head's [query, key] map, pieces as labels", ok,
          repr(maps))
    doc = open(os.path.join(ROOT, "docs", "python.md")).read()
    m = re.search(r"<!-- python-example -->\s*```python\n(.*?)```", doc, re.S)
    if not check("docs/python.md has the Python example (marked <!-- python-example -->)", m is not None):
        return
    code = m.group(1).replace("results/subword/h4_dh16_s0.h5", run_path).replace("results/subword", outdir)
    r = run([sys.executable, "-c", code], cwd=ROOT,  # PYTHONPATH=python: the docs' way without installing
            env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=os.path.join(ROOT, "python")))
    with h5py.File(run_path, "r") as f:  # the map read without the package
        want = f["attn/maps"][-1, 1, 2, 0]
    shown = [float(line.rsplit(None, 1)[1]) for line in r.stdout.splitlines() if " -> " in line]
    ok = r.returncode == 0 and len(shown) == SEQ and "h1_dh32_s0" in r.stdout \
        and np.allclose(shown, want.max(axis=1), atol=5e-4)
    check("docs/python.md's Python example runs as printed: each query's strongest key, as in /attn/maps",
          ok, (r.stderr.strip() or r.stdout)[-300:])

def check_bad_input(tmp, harness, base, corpus, run_path):
    out = os.path.join(tmp, "bad.h5")
    odd = os.path.join(tmp, "odd.bin")
    with open(odd, "wb") as f:  # a headerless file (today's nanoGPT-style ids), one byte short
        f.write(read_bin(os.path.join(corpus, "train.bin"))[:1001].tobytes()[:2001])
    big = os.path.join(tmp, "big.bin")
    ids = read_bin(os.path.join(corpus, "val.bin")).copy()
    ids[123] = VOCAB + 7
    ids.tofile(big)
    headed = open(os.path.join(corpus, "val.bin"), "rb").read()
    bad = {"truncated.bin": headed[:-3], "typed.bin": headed[:12] + struct.pack("<I", 3) + headed[16:],
           "wide.bin": headed[:16] + struct.pack("<I", VOCAB + 1) + headed[20:], "ids.npy": b"\x93NUMPY" + headed,
           "damaged.bin": headed[:100] + bytes([headed[100] ^ 1]) + headed[101:]}
    for name, data in bad.items():
        with open(os.path.join(tmp, name), "wb") as f:
            f.write(data)
    cases = [("an odd-sized train.bin", {"data.path": odd}, "odd size (2001 bytes)"),
             ("an odd-sized val.bin", {"data.val_path": odd}, "odd size (2001 bytes)"),
             ("an id >= vocab_size in val.bin", {"data.val_path": big},
              f"token id {VOCAB + 7} at index 123"),
             ("a truncated token file", {"data.val_path": os.path.join(tmp, "truncated.bin")},
              "is truncated or mis-typed"),
             ("a token file of 3-byte ids", {"data.val_path": os.path.join(tmp, "typed.bin")}, "3 bytes an id"),
             ("a header's vocabulary above model.vocab_size", {"data.val_path": os.path.join(tmp, "wide.bin")},
              f"holds ids below {VOCAB + 1}"),
             ("a NumPy file as token ids", {"data.val_path": os.path.join(tmp, "ids.npy")}, "NumPy .npy file"),
             ("a missing tokenizer", {"data.tokenizer": os.path.join(tmp, "missing.model")},
              "data.tokenizer"),
             ("a tokenizer larger than the vocabulary", {"model.vocab_size": 300}, "has 512 pieces"),
             ("data.tokenizer on the text task", {"data.task": "text", "data.path": os.path.join(tmp, "small.txt"),
                                                  "data.val_path": "", "model.vocab_size": 256},
              "data.tokenizer")]
    for what, sets, needle in cases:
        cmd = [harness, base, "--set", f"output.path={out}"]
        for k, v in sets.items():
            cmd += ["--set", f"{k}={v}"]
        one_line_error(run(cmd), what, needle, [out, out + ".tmp"])
    one_line_error(run([harness, "data-check", os.path.join(tmp, "damaged.bin")]),
                   "data-check: one id changed (the run would take it)", "do not match the header's checksum")
    broken = os.path.join(tmp, "broken.h5")
    shutil.copy(run_path, broken)
    with h5py.File(broken, "a") as f:
        model = f["tokenizer/model"][()]
        del f["tokenizer/model"]
        f["tokenizer/model"] = model[: len(model) // 2]
    textsum.reseal(broken)  # a model that was short when written, not damage to the file
    one_line_error(run([harness, "inspect", broken, "--prompt", "How are"]),
                   "inspect --prompt with a truncated /tokenizer/model", "not a SentencePiece model")
    plain = os.path.join(tmp, "plain.h5")
    run([harness, base, "--set", "data.tokenizer=", "--set", "train.steps=0", "--set", f"output.path={plain}"])
    one_line_error(run([harness, "inspect", plain, "--prompt", "How are"]),
                   "inspect --prompt on a tokens run without a tokenizer", "without a tokenizer")


def suite(harness, tmp):
    corpus, sp, held_out = check_tokenize(tmp)
    check_pieces(tmp)
    base = write_base(tmp, corpus)
    run_path, outdir = check_sweep(tmp, harness, base, corpus, sp)
    check_tail_split(tmp, harness, base, corpus)
    check_encoder(harness, run_path, sp, held_out)
    check_reader(tmp, run_path, outdir, sp)
    check_bad_input(tmp, harness, base, corpus, run_path)


def main(argv):
    return temp_suite(argv, "heads-subword-", suite)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
