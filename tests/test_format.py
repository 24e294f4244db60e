#!/usr/bin/python3
# suite: results format: self-description, docs coverage, harness check
# suite-args: {harness}
"""The results file describes itself, the docs describe every part of it, and `harness check`
catches what breaks the contract.

  self-describing  format_version; /config booleans read by h5py as numpy.bool_; every dataset
                   has description and units attributes and a label per dimension; /attn/maps is
                   (snapshot, layer, head, probe, query, key) with /attn/step attached, /train/*
                   attached to /train/step, /eval/* to /eval/step
  docs             every dataset and attribute the harness writes (runs with every switch, a text
                   run, an interrupted run with /checkpoint, --dump-grads) is named in
                   docs/results-format.md; every key of `harness --keys` is in docs/configuration.md's config
                   table with its default
  check            passes on those files; finds a broken attention row, a score or class that
                   does not follow from the maps, a missing description, a string boolean, a wrong
                   shape, an unknown status; learned head gates (train.head_l0, a run that closes
                   some heads, and an interrupted one): a P(open) above 1, /heads/kept not following
                   from /params/log_alpha, a closed head's nonzero W_o row, a trajectory off the
                   /train rows, gate datasets without the key, missing AdamW moments of log_alpha
                   (exit 1, one line each); refuses a truncated file, a
                   non-HDF5 file, a missing file and a future format_version (exit 2)
  readers          inspect, train.init_from, --resume and the Python reader (scripts/plot) refuse a
                   future major format_version; a newer minor one is read
  text checksum    (1.4) config_yaml or a /config string edited after the harness closed the file:
                   check, inspect and the Python reader call it damaged (text checksum); a 1.4
                   file without text_checksum is damaged; a 1.3 file without one reads
usage: tests/test_format.py [HARNESS]
"""
import csv
import io
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np

from checks import check, finish, run_check

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
from heads.read import textsum  # noqa: E402  (tests edit files on purpose: they reseal them)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HARNESS = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(ROOT, "harness")
TMP = tempfile.mkdtemp(prefix="test_format.")
BASE = """model: {vocab_size: 32, d_model: 24, n_head: 4, n_layer: 2, seq_len: 24}
train: {steps: 20, batch_size: 8, lr: 3.0e-3, warmup_steps: 5, seed: 1, threads: 1}
data: {task: induction, min_period: 3, max_period: 8}
output: {log_every: 5, eval_every: 10, eval_batches: 2, attn_every: 10, probes: 3}
"""
SWITCHES = ["model.sink=true", "model.output_gate=true", "model.n_kv_head=2", "model.pos=rope"]


def harness(*args, timeout=300):
    return subprocess.run([HARNESS, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def train(name, *sets):
    path = os.path.join(TMP, name + ".h5")
    args = [os.path.join(TMP, "base.yaml"), "--set", f"output.path={path}"]
    for s in sets:
        args += ["--set", s]
    p = harness(*args)
    check(f"run {name} completes", p.returncode == 0, p.stderr[-400:])
    return path


def interrupted_run(name="interrupted", *sets):
    """A run stopped by SIGINT: status interrupted, with /checkpoint."""
    path = os.path.join(TMP, name + ".h5")
    cmd = [HARNESS, os.path.join(TMP, "base.yaml"), "--set", f"output.path={path}",
           "--set", "train.steps=100000", "--set", "output.log_every=1"] + sum((["--set", s] for s in sets), [])
    with open(os.path.join(TMP, "int.log"), "w") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log)
        for _ in range(600):
            time.sleep(0.1)
            with open(log.name) as f:
                if re.search(r"^step 1[0-9]/", f.read(), re.M):
                    break
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)
    check("SIGINT run ends interrupted (exit 130)", proc.returncode == 130, f"exit {proc.returncode}")
    return path


def every_dataset(f):
    out = []
    f.visititems(lambda name, obj: out.append("/" + name) if isinstance(obj, h5py.Dataset) else None)
    return out


def documented_name(path):
    """/params/layer3/w_qkv -> layer{l}/w_qkv; /grads/... and /checkpoint/adam_m/... like /params."""
    path = re.sub(r"layer\d+", "layer{l}", path)
    for group in ("/params/", "/grads/", "/checkpoint/adam_m/", "/checkpoint/adam_v/"):
        if path.startswith(group):
            return group.rstrip("/"), path[len(group):]
    return None, path


def test_self_describing(files):
    with h5py.File(files["switches"], "r") as f:
        check("format_version is 1.7", f.attrs.get("format_version") in ("1.7", b"1.7"))
        for key in ("sink", "output_gate"):
            value = f["/config"].attrs[key]
            check(f"/config {key} is read by h5py as numpy.bool_ (True)", isinstance(value, np.bool_) and value,
                  f"{type(value).__name__} {value!r}")
        maps = f["/attn/maps"]
        check("/attn/maps dimensions are (snapshot, layer, head, probe, query, key)",
              tuple(d.label for d in maps.dims) == ("snapshot", "layer", "head", "probe", "query", "key"),
              str([d.label for d in maps.dims]))
        for name, scale in (("/attn/maps", "/attn/step"), ("/scores/prev", "/attn/step"),
                            ("/train/loss", "/train/step"), ("/train/elapsed_s", "/train/step"),
                            ("/eval/loss", "/eval/step")):
            attached = [s.name for s in f[name].dims[0].values()]
            check(f"{name} axis 0 is attached to the dimension scale {scale}", attached == [scale], str(attached))
            check(f"{name}: the scale's values are {scale}'s",
                  np.array_equal(f[name].dims[0][0][()], f[scale][()]))
    for run, path in files.items():
        with h5py.File(path, "r") as f:
            bad = []
            for name in every_dataset(f):
                ds = f[name]
                desc, units = ds.attrs.get("description"), ds.attrs.get("units")
                labels = [d.label for d in ds.dims]
                if not isinstance(desc, str) or not desc or not isinstance(units, str) or not units or "" in labels:
                    bad.append(f"{name} (description {desc!r}, units {units!r}, labels {labels})")
            check(f"{run}: every dataset has a description, units and a label per dimension", not bad,
                  "; ".join(bad[:4]))


def test_docs(files):
    with open(os.path.join(ROOT, "docs/results-format.md")) as fh:
        doc = fh.read()
    missing = set()
    for path in files.values():
        with h5py.File(path, "r") as f:
            for name in every_dataset(f):
                group, rest = documented_name(name)
                # a tensor is described once, under /params; /grads and /checkpoint name its group
                wanted = [f"`{rest}`", f"/params/{rest}`"] if group else [f"`{rest}`", f"`{rest}"]
                if group and f"`{group}" not in doc:
                    missing.add(group)
                if not any(w in doc for w in wanted):
                    missing.add(name)
            for obj in ("/", "/config", "/checkpoint"):
                if obj in f:
                    missing.update(f"{obj} attribute {a}" for a in f[obj].attrs if f"`{a}`" not in doc)
            if "/batch" in f:  # --dump-grads: its root attribute loss
                missing.update(a for a in f.attrs if f"`{a}`" not in doc)
    check("docs/results-format.md names every dataset and attribute the harness writes", not missing,
          ", ".join(sorted(missing)[:12]))


def docs_config_table():
    """{key: default cell} of the configuration table in docs/configuration.md."""
    with open(os.path.join(ROOT, "docs", "configuration.md")) as fh:
        text = fh.read()
    rows = {}
    for line in text.splitlines():
        m = re.match(r"\|\s*`((?:model|train|data|output)\.\w+)`\s*\|([^|]*)\|", line)
        if m:
            rows[m.group(1)] = m.group(2).strip()
    return rows


def same_default(kind, default, cell):
    cell = cell.replace("`", "").strip()
    if kind in ("int", "float"):
        first = cell.split()[0] if cell else ""
        try:
            return float(first) == float(default)
        except ValueError:
            return False
    if kind in ("string", "strings"):
        return cell == f'"{default}"' or cell == f'["{default}"]'
    return cell.split()[0] == default if cell else False


def test_keys_and_config_docs():
    p = harness("--keys")
    rows = list(csv.DictReader(io.StringIO(p.stdout), delimiter="\t"))
    check("--keys prints a header and one row per key (key, type, default, range, meaning)",
          p.returncode == 0 and len(rows) > 40 and all(r["meaning"] and r["type"] for r in rows),
          p.stderr + p.stdout[:200])
    table = docs_config_table()
    missing = [r["key"] for r in rows if r["key"] not in table]
    wrong = [f"{r['key']}: docs '{table[r['key']]}', --keys '{r['default']}'" for r in rows
             if r["key"] in table and not same_default(r["type"], r["default"], table[r["key"]])]
    check("every config key is in docs/configuration.md's config table", not missing, ", ".join(missing))
    check("docs/configuration.md's config table gives every key's default as --keys does", not wrong, "; ".join(wrong))
    extra = [k for k in table if k not in {r["key"] for r in rows}]
    check("docs/configuration.md's config table has no key the harness does not know", not extra, ", ".join(extra))
    for r in rows:  # an explicit 0 means "derive": said in the range column of every such key
        if r["default"] == "0" and r["type"] == "int" and r["key"] not in ("train.seed", "data.max_prefix",
                                                                           "train.steps"):
            check(f"--keys says what 0 means for {r['key']} ({r['range']})", "0 =" in r["range"] or "0 dis" in r["range"])
    q = harness("--keys", "n_head", "train.lr")
    named = list(csv.DictReader(io.StringIO(q.stdout), delimiter="\t"))
    check("--keys n_head train.lr: the header and those two rows, as the whole table has them",
          q.returncode == 0 and named == [r for r in rows if r["key"] in ("model.n_head", "train.lr")], q.stdout + q.stderr)
    for args, says in ((["--keys", "junk"], "--keys: unknown config key 'junk'"),
                       (["--keys", "n_head", "path"], "--keys: 'path' is in several sections (data.path, output.path)"),
                       (["--keys", "--set"], "--keys: unknown config key '--set'")):
        q = harness(*args)
        check(f"harness {' '.join(args)}: exit 2, one clear line, nothing on stdout", q.returncode == 2 and
              q.stderr.startswith(says) and q.stderr.count("\n") == 1 and not q.stdout, q.stderr)


def test_keys_page():
    """docs/keys.md is what scripts/keys-doc makes from this harness's --keys: never stale."""
    p = subprocess.run([os.path.join(ROOT, "scripts", "keys-doc")], cwd=ROOT, capture_output=True, text=True,
                       env=dict(os.environ, HARNESS=HARNESS))
    with open(os.path.join(ROOT, "docs", "keys.md")) as fh:
        page = fh.read()
    rows = [ln for ln in page.splitlines() if ln.startswith("| `")]
    n_keys = len(harness("--keys").stdout.splitlines()) - 1
    stale = [f"{a!r} != {b!r}" for a, b in zip(page.splitlines(), p.stdout.splitlines()) if a != b]
    check(f"docs/keys.md is scripts/keys-doc's output, one row per key ({len(rows)} of {n_keys}); "
          "regenerate it with scripts/keys-doc > docs/keys.md",
          p.returncode == 0 and page == p.stdout and len(rows) == n_keys, (p.stderr + "; ".join(stale[:3]))[:600])


def tampered(src, name, edit, reseal=True):
    """A copy of src edited as a writer might have made it: its text checksum made anew
    (heads.read.textsum.reseal), unless reseal=False (an edit no writer made: damage)."""
    path = os.path.join(TMP, name + ".h5")
    shutil.copy(src, path)
    with h5py.File(path, "r+") as f:
        edit(f)
    if reseal:
        textsum.reseal(path)
    return path


def expect_problem(src, what, edit, pattern):
    path = tampered(src, what.replace(" ", "_"), edit)
    p = harness("check", path)
    lines = [ln for ln in p.stdout.splitlines() if re.search(pattern, ln)]
    check(f"check finds {what} (exit 1, a line matching '{pattern}')", p.returncode == 1 and lines,
          f"exit {p.returncode}: {p.stdout[-400:]}{p.stderr}")


def scale_row(f):
    maps = f["/attn/maps"]
    m = maps[-1]
    m[0, 0, 0, 5, :6] *= 0.9
    maps[-1] = m


def test_check_gates(files):
    """The learned head gates (train.head_l0): what check recomputes and bounds."""
    gated = files["head_l0"]
    with h5py.File(gated, "r") as f:
        kept = f["/heads/kept"][()]
    check("the head_l0 file of the test closes some heads and keeps others", 0 < kept.sum() < kept.size,
          str(kept.tolist()))
    closed = tuple(int(i) for i in np.argwhere(kept == 0)[0]) if (kept == 0).any() else (0, 0)
    d_head = 24 // 4

    def flip_kept(f):
        k = f["/heads/kept"][()]
        k[0, 0] = 1 - k[0, 0]
        f["/heads/kept"][...] = k

    def reopen_w_o(f):
        l, h = closed
        w = f[f"/params/layer{l}/w_o"][()]
        w[h * d_head, 0] = 0.5
        f[f"/params/layer{l}/w_o"][...] = w

    expect_problem(gated, "a P(open) above 1", lambda f: f["/gates/p_open"].__setitem__((1, 0, 0), 1.5),
                   r"/gates/p_open: 1 values outside \[0, 1\]")
    expect_problem(gated, "a kept head that does not follow from log_alpha", flip_kept,
                   r"/heads/kept: 1 heads differ from P\(open\) > 1/2")
    expect_problem(gated, "a closed head with a nonzero row of W_o", reopen_w_o,
                   r"1 closed heads \(/heads/kept 0\) have nonzero rows of W_o")
    expect_problem(gated, "a gate trajectory off the train rows",
                   lambda f: f["/gates/step"].__setitem__(1, 6), r"/gates/step differs from /train/step")
    expect_problem(files["base"], "gate datasets without train.head_l0",
                   lambda f: f.create_dataset("/heads/kept", data=np.ones((2, 4), np.int32)),
                   r"/heads/kept is there, but train.head_l0 is 0")
    expect_problem(files["head_l0_interrupted"], "an interrupted gated run without the gates' AdamW moments",
                   lambda f: f.__delitem__("/checkpoint/adam_v/log_alpha"), r"/checkpoint/adam_v/log_alpha")


def test_check(files):
    for run, path in files.items():
        p = harness("check", path)
        # one line, "ok (STATUS run, format X)", and for an interrupted run what resumes it
        said = p.stdout.strip().splitlines()
        check(f"check passes the {run} file", p.returncode == 0 and len(said) == 1 and re.match(
            r"\S+: ok \(\w+ run, format [\d.]+\)(; an interrupted run at step \d+ of \d+: harness CONFIG --resume "
            r"continues it)?$", said[0]) is not None, p.stdout[-600:] + p.stderr)
    good = files["base"]

    def set_score(f):
        f["/scores/induction"][-1, 1, 2] += 0.01

    def set_class(f):
        cls = f["/scores/class"][()].astype(str)
        cls[0, 0] = "induction" if cls[0, 0] != "induction" else "prev"
        del f["/scores/class"]
        f.create_dataset("/scores/class", data=cls.astype(object), dtype=h5py.string_dtype())

    def string_bool(f):
        del f["/config"].attrs["sink"]
        f["/config"].attrs["sink"] = "false"

    def wrong_shape(f):
        del f["/params/tok_emb"]
        f["/params/tok_emb"] = np.zeros((3, 3), np.float32)

    expect_problem(good, "an attention row that does not sum to 1", scale_row, r"/attn/maps snapshot \d+: 1 rows sum")
    expect_problem(good, "a score that does not follow from the maps", set_score, r"/scores/induction differs")
    expect_problem(good, "a class that does not follow from the scores", set_class, r"/scores/class layer 0 head 0")
    expect_problem(good, "a missing description", lambda f: f["/train/loss"].attrs.__delitem__("description"),
                   r"/train/loss: attribute description")
    expect_problem(good, "a boolean stored as a string", string_bool, r"/config sink is not an HDF5 boolean")
    expect_problem(good, "a tensor of the wrong shape", wrong_shape, r"/params/tok_emb has shape \(3, 3\)")
    expect_problem(good, "an unknown status", lambda f: f.attrs.__setitem__("status", "done"), r"status 'done'")
    expect_problem(good, "a future step in a causal map",
                   lambda f: f["/attn/maps"].__setitem__((0, 0, 0, 0, 2, 5), 0.5), r"future keys")
    expect_problem(files["switches"], "a row above 1 with a sink",
                   lambda f: f["/attn/maps"].__setitem__((0, 0, 0, 0, 3, 0), 1.5), r"above 1 with model.sink")
    test_check_gates(files)

    def earlier(version, *keys, yaml_too=False):
        def edit(f):
            f.attrs["format_version"] = version
            for key in keys:
                del f["/config"].attrs[key]
            if yaml_too:  # the resolved config the earlier harness wrote had no line for them
                text = f.attrs["config_yaml"]
                text = text.decode() if isinstance(text, bytes) else text
                kept = [ln for ln in text.splitlines(True) if ln.strip().split(":")[0] not in keys]
                check(f"config_yaml had a line for each of {keys}", len(kept) == len(text.splitlines()) - len(keys))
                f.attrs["config_yaml"] = "".join(kept)
        return edit

    # a file an earlier 1.x wrote has no /config attribute for a key added since (1.7's precision,
    # data_seed, snapshot_study): its config_yaml does not name them, so they took their defaults
    old = tampered(good, "earlier", earlier("1.6", "precision", "data_seed", "snapshot_study", yaml_too=True))
    p = harness("check", old)
    check("check passes a 1.6 file without the keys added since, and names its version",
          p.returncode == 0 and p.stdout.strip().endswith("ok (complete run, format 1.6)"), p.stdout[-400:])
    expect_problem(good, "a key missing in a file of this version", earlier("1.7", "precision"),
                   r"/config has no attribute precision \(train.precision\)")
    expect_problem(good, "a key config_yaml names missing in an earlier file", earlier("1.6", "n_head"),
                   r"/config has no attribute n_head \(model.n_head\)")

    # unusable input: exit 2 and one clear line on stderr
    truncated = os.path.join(TMP, "truncated.h5")
    with open(good, "rb") as src, open(truncated, "wb") as dst:
        dst.write(src.read()[:3000])
    text = os.path.join(TMP, "text.h5")
    with open(text, "w") as fh:
        fh.write("not HDF5\n")
    future = tampered(good, "future", lambda f: f.attrs.__setitem__("format_version", "2.0"))
    garbled = tampered(good, "garbled", lambda f: f.attrs.__setitem__("format_version", "one"))
    for what, args, pattern in (("a truncated file", [truncated], "not an HDF5 results file"),
                                ("a non-HDF5 file", [text], "not an HDF5 results file"),
                                ("a missing file", [os.path.join(TMP, "none.h5")], "nothing there"),
                                ("a future format_version", [future], "format 2.0, but this harness reads format 1.x"),
                                ("a garbled format_version", [garbled], "not MAJOR.MINOR"),
                                ("no file", [], "no results file given"),
                                ("an unknown option", ["--junk"], "unknown option")):
        p = harness("check", *args)
        check(f"check on {what}: exit 2, '{pattern}'", p.returncode == 2 and pattern in p.stderr and not p.stdout,
              f"exit {p.returncode}: {p.stderr.strip()[:300]} {p.stdout[:200]}")
    p = harness("check", good, truncated, good)
    check("check of several files: each reported, exit status the worst (2)",
          p.returncode == 2 and p.stdout.count(": ok (") == 2 and "not an HDF5 results file" in p.stderr,
          f"exit {p.returncode}: {p.stdout[-300:]} {p.stderr[-300:]}")
    p = harness("check", "--help")
    check("check --help", p.returncode == 0 and "usage: harness check" in p.stdout)


def shapes_total(*sets):
    """The whole-model parameter total `harness --shapes` prints for base.yaml with these --sets."""
    p = harness("--shapes", os.path.join(TMP, "base.yaml"), *sum((["--set", s] for s in sets), []))
    m = re.search(r"^parameters.*?^  total +[\d,]+ +([\d,]+)$", p.stdout, re.M | re.S)
    return int(m.group(1).replace(",", "")) if m else None


def test_params_counted(files):
    """/params holds exactly the tensors the layout uses, and --shapes counts exactly those."""
    layouts = {"learned": (files["base"], []), "rope": (files["switches"], SWITCHES),
               "none": (train("nopos", "model.pos=none"), ["model.pos=none"]),
               "shortformer": (train("shortformer", "model.pos=shortformer"), ["model.pos=shortformer"])}
    for pos, (path, sets) in layouts.items():
        with h5py.File(path, "r") as f:
            stored = sum(f["params"][n[1:]].size for n in every_dataset(f["params"]))
            has_pos = "pos_emb" in f["params"]
        check(f"pos {pos}: /params/pos_emb {'stored' if pos in ('learned', 'shortformer') else 'absent'}",
              has_pos == (pos in ("learned", "shortformer")), f"pos_emb in /params: {has_pos}")
        total = shapes_total(*sets)
        check(f"pos {pos}: --shapes counts the {stored:,} stored parameters", total == stored,
              f"--shapes total {total}")

    def add_pos_emb(f):  # as 1.1 wrote it for a rotary run: zeros, described and labelled
        d = f["params"].create_dataset("pos_emb", data=np.zeros((24, 24), np.float32))
        d.attrs["description"] = "learned position embedding W_pos (zeros and unused with pos rope or none)"
        d.attrs["units"] = "1"
        d.dims[0].label, d.dims[1].label = "position", "d_model"

    def legacy(f):
        add_pos_emb(f)
        f.attrs["format_version"] = "1.1"
    p = harness("check", tampered(files["switches"], "legacy_pos_emb", legacy))
    check("check passes a 1.1 rotary file with its unused zero pos_emb", p.returncode == 0, p.stdout[-300:])
    expect_problem(files["switches"], "a 1.2 rotary file with a pos_emb", add_pos_emb,
                   r"/params holds \d+ datasets, but the model has \d+ tensors")


def test_readers_refuse_future(files):
    future = tampered(files["base"], "future_reader", lambda f: f.attrs.__setitem__("format_version", "2.0"))
    p = harness("inspect", future, "--tokens", "1,2,3")
    check("inspect refuses a future format_version (exit 2)", p.returncode == 2 and "format 2.0" in p.stderr, p.stderr)
    p = harness(os.path.join(TMP, "base.yaml"), "--set", f"train.init_from={future}",
                "--set", f"output.path={os.path.join(TMP, 'from_future.h5')}")
    check("train.init_from refuses a future format_version (exit 2, file:line:col)",
          p.returncode == 2 and "format 2.0" in p.stderr and re.match(r"^--set:1:1: ", p.stderr), p.stderr)
    resume = tampered(files["interrupted"], "future_resume", lambda f: f.attrs.__setitem__("format_version", "3.1"))
    p = harness(os.path.join(TMP, "base.yaml"), "--set", f"output.path={resume}", "--set", "train.steps=100000",
                "--set", "output.log_every=1", "--resume")
    check("--resume refuses a future format_version (exit 2)", p.returncode == 2 and "format 3.1" in p.stderr, p.stderr)
    p = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "scripts/plot"), future, "-o", os.path.join(TMP, "p")],
                       capture_output=True, text=True, timeout=120)
    check("scripts/plot (the Python reader, heads.results.open_file) refuses it: exit 2, one line",
          p.returncode == 2 and "format 2.0" in p.stderr and p.stderr.count("\n") == 1, p.stderr)
    newer_minor = tampered(files["base"], "minor", lambda f: f.attrs.__setitem__("format_version", "1.7"))
    p = harness("inspect", newer_minor, "--tokens", "1,2,3")
    check("a newer minor version (1.7) is read", p.returncode == 0, p.stderr)


def test_text_checksum(files):
    from heads.read import verify

    def edit_config(f):
        f.attrs["config_yaml"] = f.attrs["config_yaml"].replace("n_head: 4", "n_head: 2")

    def edit_task(f):
        f["config"].attrs["task"] = "text"
    for what, edit in (("config_yaml", edit_config), ("/config task", edit_task)):
        path = tampered(files["base"], "edited_" + what.replace("/", "").replace(" ", "_"), edit,
                        reseal=False)
        p = harness("check", path)
        check(f"{what} edited: check calls the file damaged (exit 2, text checksum)",
              p.returncode == 2 and "text checksum fails" in p.stdout + p.stderr, p.stdout + p.stderr)
        p = harness("inspect", path, "--tokens", "1,2,3")
        check(f"{what} edited: inspect refuses it (exit 2)",
              p.returncode == 2 and "text checksum fails" in p.stderr, p.stderr)
        check(f"{what} edited: the Python reader's guard names it",
              verify.damage(path).startswith("damaged: its text checksum fails"), verify.damage(path))
    gone = tampered(files["base"], "no_text_checksum", lambda f: f.attrs.__delitem__("text_checksum"),
                    reseal=False)
    p = harness("check", gone)
    check("a 1.4 file without text_checksum: damaged (exit 2)",
          p.returncode == 2 and "no text_checksum" in p.stdout + p.stderr, p.stdout + p.stderr)
    check("... and to the Python reader", "no text_checksum" in verify.damage(gone), verify.damage(gone))

    def older(f):
        del f.attrs["text_checksum"]
        f.attrs["format_version"] = "1.3"
    old = tampered(files["base"], "format_1_3", older, reseal=False)
    p = harness("check", old)
    check("a 1.3 file (no text checksum) still checks and reads", p.returncode == 0 and verify.damage(old) == "",
          p.stdout[-300:] + verify.damage(old))


def main():
    with open(os.path.join(TMP, "base.yaml"), "w") as fh:
        fh.write(BASE)
    files = {"base": train("base"), "switches": train("switches", *SWITCHES),
             "text": train("text", "data.task=text", "model.vocab_size=256", "output.probe_text=[abcdefgh, ijklmnop]"),
             "interrupted": interrupted_run(),
             "head_l0": train("head_l0", "train.head_l0=3", "train.lr=0.03"),
             "head_l0_interrupted": interrupted_run("head_l0_interrupted", "train.head_l0=1")}
    dump = os.path.join(TMP, "grads.h5")
    p = harness(os.path.join(TMP, "base.yaml"), "--dump-grads", dump, *sum((["--set", s] for s in SWITCHES), []))
    check("--dump-grads writes its file", p.returncode == 0, p.stderr)
    files["dump_grads"] = dump
    run_check("self-describing datasets", lambda: test_self_describing(files))
    run_check("docs cover the file", lambda: test_docs(files))
    run_check("--keys and the table of docs/configuration.md", test_keys_and_config_docs)
    run_check("docs/keys.md from --keys", test_keys_page)
    run_check("harness check", lambda: test_check(files))
    run_check("readers refuse a future format", lambda: test_readers_refuse_future(files))
    run_check("parameters stored and counted", lambda: test_params_counted(files))
    run_check("the text checksum", lambda: test_text_checksum(files))
    shutil.rmtree(TMP, ignore_errors=True)
    sys.exit(finish())


main()
