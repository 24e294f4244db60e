#!/usr/bin/python3
# suite: the default run's induction mechanism over 3 seeds
# suite-args: {harness}
"""The default run shows the 2-layer induction mechanism, over 3 seeds.

Trains configs/heads12.yaml at seeds 0, 1, 2 and checks, on each results file, that layer 0 has a
previous-token head and layer 1 an induction head, each scoring above 0.5 at the end (the classes
docs/model.md defines), that the held-out loss ends far below ln(vocab_size), and that the highest
layer-1 <- layer-0 K-composition (/circuits/k_composition, Elhage et al. 2021) pairs a layer-1
induction head with a layer-0 previous-token head: the induction circuit, found from the weights.
The same claim tested causally: the strongest K-path of path patching (/patching/path_k, layer 1's
K/V heads reading layer 0's heads) runs from a previous-token head to an induction head.
usage: tests/test_mechanism.py [HARNESS]
"""
import math
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np

from checks import check, finish

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HARNESS = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(ROOT, "harness")


with tempfile.TemporaryDirectory() as tmp:
    for seed in (0, 1, 2):
        out = os.path.join(tmp, f"seed{seed}.h5")
        run = subprocess.run([HARNESS, "configs/heads12.yaml", "--set", f"train.seed={seed}",
                              "--set", f"output.path={out}"], cwd=ROOT, capture_output=True,
                             text=True, timeout=900)
        if run.returncode != 0:
            check(f"seed {seed}: heads12 run", False, run.stderr[-500:])
            continue
        with h5py.File(out, "r") as f:
            prev0 = float(f["/scores/prev"][-1][0].max())
            ind1 = float(f["/scores/induction"][-1][1].max())
            classes = f["/scores/class"][()].astype(str)
            vocab = int(f["/config"].attrs["vocab_size"])
            eval_loss = float(f["/eval/loss"][-1])
            k_comp = f["/circuits/k_composition"][1, :, 0, :] if "/circuits/k_composition" in f \
                else None
            path_k = f["/patching/path_k"][1, :, 0, :] if "/patching/path_k" in f else None
        check(f"seed {seed}: layer 0 has a previous-token head (best prev {prev0:.3f})",
              prev0 > 0.5 and "prev" in classes[0], f"classes {list(classes[0])}")
        check(f"seed {seed}: layer 1 has an induction head (best induction {ind1:.3f})",
              ind1 > 0.5 and "induction" in classes[1], f"classes {list(classes[1])}")
        check(f"seed {seed}: held-out loss {eval_loss:.4f} far below ln(V) = {math.log(vocab):.2f}",
              eval_loss < 0.1 * math.log(vocab))
        if k_comp is None:
            check(f"seed {seed}: /circuits/k_composition written", False, "missing")
            continue
        if path_k is None:
            check(f"seed {seed}: /patching/path_k written", False, "missing")
        else:
            receiver, sender = divmod(int(np.nanargmax(path_k)), path_k.shape[1])
            others = path_k[:, classes[0] != "prev"]
            runner_up = float(np.nanmax(others)) if others.size else float("nan")
            check(f"seed {seed}: strongest K-path L0H{sender} -> L1H{receiver} ({float(path_k.max()):+.4f} of "
                  f"the clean-corrupted span; the strongest from a head not previous-token {runner_up:+.4f}) "
                  f"runs from a previous-token head to an induction head",
                  classes[0][sender] == "prev" and classes[1][receiver] == "induction",
                  f"classes {classes[0][sender]} -> {classes[1][receiver]}")
        later, earlier = divmod(int(k_comp.argmax()), k_comp.shape[1])
        check(f"seed {seed}: highest K-composition L1H{later} <- L0H{earlier} "
              f"({float(k_comp.max()):.3f}) pairs an induction head with a previous-token head",
              classes[1][later] == "induction" and classes[0][earlier] == "prev",
              f"classes {classes[1][later]} <- {classes[0][earlier]}")
sys.exit(finish())
