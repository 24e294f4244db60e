#!/usr/bin/python3
# suite: the end-of-run study's memory at a long context, and the phase the memory line names
# suite-args: --harness {harness}
"""test_study_memory.py: the study after training streams, and the run says what set its peak.

1. A long-ish context (T 2048, d_model 64, 4 heads of 16, batch 4, 2 layers, 2 threads, patching
   on): the memory line (just before the final held-out losses) is `memory: peak N MiB in training, M MiB at the end (with the study
   and patching), set by PHASE`, PHASE one of the phases the end of a run marks and, here, one of
   patching's; the bench's own pattern (python/heads/bench/bench.py) reads N from it.
2. There the whole run's peak is at most STUDY_BOUND times training's (what the study adds at
   most training's own peak): the first thread's model is the trained one, whose backward part
   is released while the threads run forwards, the second thread's a view, and the clean
   patching run keeps no residual stream. With a view per thread and both runs' whole hook sets
   the run peaked at 2.5 times training's (224 against 89 MiB); now 1.8 times (157 against 88).
3. The whole run's peak RSS (wait4's, as /usr/bin/time reports it) is at most the estimate
   `harness --shapes` prints for it with the study: the estimate stays an upper bound.
4. Without patching (output.patch_batches 0) the line says so, and names the study or training.
usage: tests/test_study_memory.py [--harness PATH] [--keep]
"""
import os
import re
import subprocess
import sys

from checks import check, temp_suite

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STUDY_BOUND = 2.0
CONFIG = """model: {{vocab_size: 256, d_model: 64, n_head: 4, d_head: 16, n_layer: 2, seq_len: 2048}}
train: {{steps: 2, batch_size: 4, warmup_steps: 1, threads: 2, seed: 0}}
data: {{task: text, eval_fraction: 0.25}}
output: {{path: {path}, log_every: 1, eval_every: 1000, eval_batches: 1, attn_every: 0, probes: 1,
         patch_batches: {patch_batches}}}
"""
# every phase peak_phase_end marks (src/train/train.c, src/analysis/headstudy.c, patch_heads.c),
# in the order a run goes through them
STUDY_PHASES = ["the study (the held-out batches' head states, importance)",
                "the study (single-head ablations)", "the study (pruning curves)",
                "the study (composition and copying scores)"]
PATCHING_PHASES = ["patching (the clean and corrupted runs)", "patching (activation patching of each head)",
                   "patching (path patching)", "patching (attribution patching)",
                   "patching (direct logit attribution)"]
PHASES = ["training", "keeping the trained state", *STUDY_PHASES, *PATCHING_PHASES, "writing the results"]
LINE = re.compile(r"^memory: peak (\d+) MiB in training, (\d+) MiB at the end \(with ([^)]*)\), set by (.+)$",
                  re.M)
RUN_RSS = ("import resource, subprocess, sys\n"
           "p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)\n"
           "print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
           "sys.stderr.write(p.stderr)\n")


def marked_phases():
    """The phases the sources mark (every peak_phase_end("…") of src/)."""
    found = set()
    for folder, _, names in os.walk(os.path.join(ROOT, "src")):
        for n in names:
            if n.endswith(".c"):
                with open(os.path.join(folder, n)) as f:
                    found |= set(re.findall(r'peak_phase_end\("([^"]*)"\)', f.read()))
    return found


def bench_pattern():
    """The pattern scripts/bench reads the training figure with, from its own source."""
    with open(os.path.join(ROOT, "python", "heads", "bench", "bench.py")) as f:
        found = re.search(r're\.search\(r"(\^memory:[^"]*)"', f.read())
    return re.compile(found.group(1), re.M) if found else None


def run(harness, tmp, name, patch_batches):
    """The run of CONFIG in its own Python parent (so the children's max RSS is its alone): (exit
    status, max RSS in MiB, stderr, config path)."""
    config = os.path.join(tmp, name + ".yaml")
    with open(config, "w") as f:
        f.write(CONFIG.format(path=os.path.join(tmp, name + ".h5"), patch_batches=patch_batches))
    env = dict(os.environ, OMP_WAIT_POLICY="passive")
    p = subprocess.run([sys.executable, "-c", RUN_RSS, harness, config, "--force"], capture_output=True,
                       text=True, timeout=600, env=env)
    rc, rss_kib = (int(x) for x in p.stdout.split())
    return rc, rss_kib / 1024.0, p.stderr, config


def estimate_mib(harness, config):
    """The estimated peak with the study that --shapes prints, in MiB."""
    p = subprocess.run([harness, "--shapes", config], capture_output=True, text=True, timeout=60)
    units = {"B": 2 ** -20, "KiB": 2 ** -10, "MiB": 1, "GiB": 2 ** 10, "TiB": 2 ** 20}
    found = re.search(r"^  with the study +([\d.]+) (\w+)", p.stdout, re.M)
    return float(found.group(1)) * units[found.group(2)] if found else None


def body(harness, tmp):
    rc, rss, err, config = run(harness, tmp, "long", 1)
    m = LINE.search(err)
    check("T 2048 with patching: the run completes and its last memory line has the form "
          "`memory: peak N MiB in training, M MiB at the end (with …), set by PHASE`",
          rc == 0 and m is not None and any(line.startswith("memory: ")
                                            for line in err.rstrip().splitlines()[-5:]), err[-600:])
    if not m:
        return
    training, end, ran, phase = int(m.group(1)), int(m.group(2)), m.group(3), m.group(4)
    check(f"T 2048: the line says what ran ({ran}) and names a phase of patching: {phase}",
          ran == "the study and patching" and phase in PATCHING_PHASES, m.group(0))
    pattern = bench_pattern()
    found = pattern.search(err) if pattern else None
    check("scripts/bench's pattern reads the training figure from the line",
          found is not None and int(found.group(1)) == training, pattern.pattern if pattern else "no pattern")
    check(f"T 2048: the whole run's peak {end} MiB is at most {STUDY_BOUND} x training's {training} MiB "
          f"(the study streams over its threads' models)", end <= STUDY_BOUND * training, m.group(0))
    check(f"T 2048: the line's end figure {end} MiB is the process's max RSS {rss:.0f} MiB",
          abs(end - rss) <= 2, f"{end} vs {rss:.1f}")
    estimate = estimate_mib(harness, config)
    check(f"T 2048: the max RSS {rss:.0f} MiB is at most the --shapes estimate with the study "
          f"({estimate} MiB)", estimate is not None and rss <= estimate)
    rc, rss, err, _ = run(harness, tmp, "nopatch", 0)
    m = LINE.search(err)
    check("no patching: the line says so and names the study or training"
          + (f": {m.group(4)}" if m else ""),
          rc == 0 and m is not None and m.group(3) == "the study, no patching"
          and m.group(4) in ["training", "keeping the trained state", *STUDY_PHASES, "writing the results"],
          err[-600:])
    marked = marked_phases()
    check("the phases this suite knows are the ones the sources mark", marked == set(PHASES),
          f"only marked: {marked - set(PHASES)}; only here: {set(PHASES) - marked}")


if __name__ == "__main__":
    sys.exit(temp_suite(sys.argv, "study-memory-", body))
