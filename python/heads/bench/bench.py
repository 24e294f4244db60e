"""heads.bench: the command `scripts/bench` (its usage text is that script's docstring): the
harness and PyTorch (scripts/bench_torch.py, one process per run) trained on the same generated
configs, in rounds, with the FP32 GEMM peak (build/gemm_peak, torch.mm) measured first; step
times from /train/elapsed_s and bench_torch.py's JSON, peak memory from wait4.

Owns what runs and how it is measured: the PyTorch variants and their environments, the config
tables, the rounds, the record written as JSON. The tables printed are heads.bench.bench_report's, what
the machine is heads.bench.bench_machine's. Knows nothing of the harness's internals beyond its command
line and the /train datasets it reads.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

from . import bench_machine, bench_precision
from .bench_report import Report, fmt_ms, report_generate, report_main, report_scaling

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BENCH_TORCH = os.path.join(ROOT, "scripts", "bench_torch.py")
PYTHON = "/usr/bin/python3"
BLAS_DIR = "/usr/lib/x86_64-linux-gnu"
# variant: (model, OpenBLAS build or None for libblas.so.3 as installed, extra environment, description)
VARIANTS = {
    "default": ("idiomatic", None, {}, "python3-torch as installed (libblas.so.3 = {blas})"),
    "openblas": ("idiomatic", "openblas-openmp", {}, "with OpenBLAS (OpenMP build), its own CPU detection"),
    "openblas-pthread": ("idiomatic", "openblas-pthread", {}, "with OpenBLAS (pthreads build, what Recommends install)"),
    "openblas512": ("idiomatic", "openblas-openmp", {"OPENBLAS_CORETYPE": "SkylakeX"},
                    "with OpenBLAS (OpenMP build) forced to its AVX-512 kernels"),
    "reference": ("reference", "openblas-openmp", {}, "the tests' tests/reference.py model, OpenBLAS (OpenMP build)"),
}
VOCAB = 256
LAYERS = 2
PEAK_SIZES = (1024, 1536, 2048, 3072, 4096)

# name, D, H, d_head, T, B
MAIN_CONFIGS = [
    ("D128 H8 T64 B32", 128, 8, 16, 64, 32),
    ("D128 H1 T64 B32", 128, 1, 128, 64, 32),
    ("D256 H8 T128 B16", 256, 8, 32, 128, 16),
    ("D512 H8 T256 B8", 512, 8, 64, 256, 8),
    ("E>D: D256 H24x32 T128 B16", 256, 24, 32, 128, 16),
]
SEQ_CONFIGS = [(f"T{T} B{4096 // T}", 256, 8, 32, T, 4096 // T) for T in (64, 128, 256, 512, 1024)]
HEAD_CONFIGS = [(f"H{H} d_head{256 // H}", 256, H, 256 // H, 128, 16) for H in (1, 2, 4, 8, 16, 32, 64)]
# name, D, H, d_head, T: one generated token's cost by position, cached and recomputed
GENERATE_CONFIGS = [("D128 H8 d_head16 T256", 128, 8, 16, 256), ("D256 H8 d_head32 T1024", 256, 8, 32, 1024)]
GENERATE_REPEATS = 10
# long contexts at fixed tokens per step (B*T = 8192): where the attention's work grows as T^2
CONTEXT_TOKENS = 8192
# PyTorch's allocator (--torch-malloc): glibc's malloc returns every block above its mmap threshold
# (at most 32 MiB) to the kernel when it is freed, so tensors of (B, H, T, T) scores are faulted in
# again at every step, and on a VM that takes freed pages back from its guest (virtio-balloon free
# page reporting) each fault waits for the host. jemalloc told to keep its memory (retain, no
# decay) reuses it instead: PyTorch's CPU tuning guides recommend jemalloc or tcmalloc for this.
JEMALLOC = os.path.join(BLAS_DIR, "libjemalloc.so.2")
JEMALLOC_CONF = "retain:true,dirty_decay_ms:-1,muzzy_decay_ms:-1"
CONTEXT_CONFIGS = [(f"T{T} B{CONTEXT_TOKENS // T}", 256, 8, 32, T, CONTEXT_TOKENS // T)
                   for T in (256, 1024, 2048, 4096)]


def matmul_flops(D, H, dh, T, B, V=VOCAB, L=LAYERS):
    """Forward + backward matmul FLOPs of one step (causal attention counted over t+1 keys)."""
    E, BT = H * dh, B * T
    proj = BT * (L * (2 * D * 3 * E + 2 * E * D) + 2 * D * V)
    attn = L * B * H * 2 * (2 * dh) * (T * (T + 1) / 2)
    return 3 * (proj + attn)


def measure_generate(path, config):
    """build/bench_generate on one config: its JSON (positions, cached_us, full_us), or None."""
    name, D, H, dh, T = config
    rc, out, err, _ = run_measured([path, str(D), str(H), str(dh), str(T), str(GENERATE_REPEATS)])
    if rc != 0:
        print(f"bench_generate {name}: exit {rc}: {err.strip()[-300:]}", file=sys.stderr)
        return None
    return dict(json.loads(out), config=name)


def run_measured(cmd, env=None, timeout=3600):
    """Run cmd; return (exit status, stdout, stderr, max RSS in KiB) of that process alone."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
        deadline = time.time() + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.time() > deadline:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.02)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return proc.returncode, out.read().decode(), err.read().decode(), usage.ru_maxrss


def harness_run(args, name, D, H, dh, T, B, steps, tmp, threads, precision="fp32"):
    import h5py
    path = os.path.join(tmp, "run.h5")
    cfg = os.path.join(tmp, "bench.yaml")
    with open(cfg, "w") as f:
        f.write(f"""# written by scripts/bench for: {name}
model:
  vocab_size: {VOCAB}
  d_model: {D}
  n_head: {H}
  d_head: {dh}
  n_layer: {LAYERS}
  seq_len: {T}
train:
  steps: {steps}
  batch_size: {B}
  lr: 1.0e-3
  warmup_steps: 10
  threads: {threads}
  precision: {precision}
  seed: 0
data:
  task: text
  eval_fraction: 0.25   # a held-out part longer than the longest context (GPL-3 is 35k bytes)
output:
  path: {path}
  log_every: 1
  eval_every: 1000000000
  eval_batches: 1
  attn_every: 0
  probes: 1
""")
    rc, out, err, rss = run_measured([args.harness, cfg, "--force"])
    if rc != 0:
        raise RuntimeError(f"harness failed ({rc}) on {name}:\n{err[-2000:]}")
    with h5py.File(path, "r") as f:
        elapsed = [float(x) for x in f["/train/elapsed_s"][()]]
        loss = float(f["/train/loss"][-1])
    steps_s = [b - a for a, b in zip(elapsed, elapsed[1:])]
    # the training's peak (the run's `memory:` line), as PyTorch's process only trains; the whole
    # run's, with the end-of-run study, beside it
    m = re.search(r"^memory: peak (\d+) MiB in training", err, re.M)
    return {"step_s": steps_s, "max_rss_kib": int(m.group(1)) * 1024 if m else rss, "run_max_rss_kib": rss,
            "loss": loss}


def default_blas():
    """What Debian's libblas.so.3 alternative points at (the BLAS of the 'default' variant)."""
    try:
        target = os.path.realpath("/usr/lib/x86_64-linux-gnu/libblas.so.3")
    except OSError:
        return "unknown"
    if "openblas" in target:
        return "OpenBLAS"
    if "/blas/" in target:
        return "reference BLAS"
    return target


def variant_available(variant):
    build = VARIANTS[variant][1]
    return build is None or os.path.exists(os.path.join(BLAS_DIR, build, "libblas.so.3"))


def torch_malloc_default():
    """jemalloc where it is installed (install-deps bench installs it), else glibc's malloc."""
    return "jemalloc" if os.path.exists(JEMALLOC) else "glibc"


def torch_env(variant, threads, pin=None, malloc="glibc"):
    """The environment of one PyTorch run: OpenBLAS settings inherited from the caller's shell
    (OPENBLAS_CORETYPE, OPENBLAS_L2_SIZE, ...) are dropped, so OpenBLAS detects the CPU itself
    unless the variant says otherwise; pin = a core type for variants that leave it open (the
    ISA match, see main); malloc = "jemalloc" preloads jemalloc, keeping its memory."""
    _, build, extra, _ = VARIANTS[variant]
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENBLAS_")}
    if pin and "OPENBLAS_CORETYPE" not in extra:
        extra = dict(extra, OPENBLAS_CORETYPE=pin)
    env.update(OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads), **extra)
    if build:
        lib = os.path.join(BLAS_DIR, build)
        env["LD_LIBRARY_PATH"] = lib + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    if malloc == "jemalloc":
        env.update(LD_PRELOAD=JEMALLOC, MALLOC_CONF=JEMALLOC_CONF)
    return env


def torch_run(args, variant, name, D, H, dh, T, B, steps, autocast="none"):
    cmd = [PYTHON, BENCH_TORCH, "--vocab", str(VOCAB), "--d-model", str(D),
           "--n-head", str(H), "--d-head", str(dh), "--n-layer", str(LAYERS), "--seq-len", str(T),
           "--batch", str(B), "--steps", str(steps), "--threads", str(args.threads),
           "--budget", str(args.torch_budget), "--model", VARIANTS[variant][0], "--autocast", autocast]
    rc, out, err, rss = run_measured(cmd, env=torch_env(variant, args.threads, args.blas_pin, args.torch_malloc))
    if rc != 0:
        raise RuntimeError(f"bench_torch.py ({variant}) failed ({rc}) on {name}:\n{err[-2000:]}")
    info = json.loads(out)
    info["max_rss_kib"] = rss
    return info


def median_after_warmup(step_s, warmup):
    timed = step_s[warmup:] if len(step_s) > warmup + 2 else step_s[len(step_s) // 2:]
    return statistics.median(timed), len(timed)


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except OSError:
        return float("nan")


STRONGEST_FIRST = ["openblas512", "openblas", "openblas-pthread", "reference", "default"]


def measure_config(args, config, variants, tmp, torch_warmup):
    """Runs the harness and each PyTorch variant on one config, in args.repeat rounds of one run
    of each (so that a slow spell of a shared machine hits both sides); returns the record entry
    ({"harness": ..., "torch_VARIANT": ...}, median_s None where a run failed)."""
    name, D, H, dh, T, B = config
    entry = {"config": name, "D": D, "H": H, "d_head": dh, "T": T, "B": B, "threads": args.threads,
             "flops": matmul_flops(D, H, dh, T, B), "failures": 0}
    sides = ["harness"] + (["harness_1t"] if args.threads > 1 else []) + [f"torch_{v}" for v in variants]
    runs = {side: [] for side in sides}
    failed = set()
    load_start = loadavg()
    for round_ in range(args.repeat):
        for side in sides:
            v = side[len("torch_"):]
            # the reference-BLAS variant is 30x+ slower: one run is plenty
            if side in failed or (round_ > 0 and v == "default" and default_blas() == "reference BLAS"):
                continue
            try:
                if side.startswith("harness"):
                    threads = 1 if side == "harness_1t" else args.threads
                    run = harness_run(args, name, D, H, dh, T, B, args.steps, tmp, threads)
                    run["median_s"] = median_after_warmup(run["step_s"], args.warmup)[0]
                else:
                    run = torch_run(args, v, name, D, H, dh, T, B, args.torch_steps)
                    run["median_s"] = median_after_warmup(run["step_s"], torch_warmup)[0]
                runs[side].append(run)
            except (RuntimeError, OSError, KeyError, ValueError) as e:
                print(e, file=sys.stderr)
                entry["failures"] += 1
                failed.add(side)
    for side in sides:
        if side in failed or not runs[side]:
            entry[side] = dict(median_s=None)
            continue
        medians = [r.pop("median_s") for r in runs[side]]
        entry[side] = dict(runs=runs[side], run_medians_s=medians, median_s=min(medians),
                           max_rss_kib=max(r["max_rss_kib"] for r in runs[side]))
    entry["load"] = [load_start, loadavg()]  # 1-minute load average before and after the config
    h = entry["harness"]["median_s"]
    print(f"  {name}: harness {fmt_ms(h) if h else 'failed'} ms" + "".join(
        f", {v} {fmt_ms(entry[f'torch_{v}']['median_s']) if entry[f'torch_{v}']['median_s'] else 'failed'} ms"
        for v in variants), file=sys.stderr, flush=True)
    return entry


def main(argv, doc):
    """scripts/bench: argv its arguments, doc its usage text (--help); returns the exit status."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--harness", default=os.path.join(ROOT, "harness"))
    ap.add_argument("--gemm-peak", default=os.path.join(ROOT, "build", "gemm_peak"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=40, help="harness steps per config (default 40)")
    ap.add_argument("--warmup", type=int, default=5, help="steps left out of the medians (default 5)")
    ap.add_argument("--torch-steps", type=int, default=None,
                    help="PyTorch steps per config (default: --steps, as the harness; --torch-budget "
                         "may stop a slow variant earlier)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="rounds per config, each one run of every side; the fastest run's median is "
                         "reported (default 3; PyTorch on the reference BLAS always runs once)")
    ap.add_argument("--torch-budget", type=float, default=20.0,
                    help="seconds after which a PyTorch run stops early (at least warm-up + 3 steps; default 20)")
    ap.add_argument("--torch", default=None, help="PyTorch variants, comma-separated: " + ",".join(VARIANTS) +
                    " (default: every one available)")
    ap.add_argument("--torch-malloc", choices=("jemalloc", "glibc"), default=torch_malloc_default(),
                    help="PyTorch's allocator: jemalloc keeping its memory (default where "
                         "libjemalloc2 is installed) or glibc's malloc")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--quick", action="store_true",
                    help="fewer steps, one round, only the main table (or --tables), the peak on 1024 x 1024 only")
    ap.add_argument("--only", default="", help="only the configs whose name contains this text")
    ap.add_argument("--bench-generate", default=os.path.join(ROOT, "build", "bench_generate"))
    ap.add_argument("--tables", default=None, help="comma-separated (default: all; with --quick: main)")
    ap.add_argument("--markdown", help="also write the report as markdown to this file")
    ap.add_argument("--json", help="write every measurement as JSON to this file")
    ap.add_argument("--blas-isa", choices=("match", "native"), default="match",
                    help="match (default): with a harness built for AVX2 on an AVX-512 CPU, pin "
                         "OpenBLAS to its AVX2 kernels too; native: let OpenBLAS pick")
    args = ap.parse_args(argv)
    cpu, harness = bench_machine.cpu_info(), bench_machine.harness_info(args.harness)
    args.blas_pin = bench_machine.blas_pin(harness["isa"], cpu["isa"], args.blas_isa)
    peak_sizes, torch_peak_size = PEAK_SIZES, 2048
    if args.quick:
        args.steps, args.warmup, args.repeat = 15, 3, 1
        args.tables = args.tables or "main"
        peak_sizes, torch_peak_size = (1024,), 1024
    if args.torch_steps is None:
        args.torch_steps = args.steps
    tables = (args.tables or "main,seq,heads,context,generate,precision,contention").split(",")
    variants = []
    if not args.no_torch:
        variants = args.torch.split(",") if args.torch else [
            v for v in VARIANTS if variant_available(v) and not (args.blas_pin and v == "openblas512")]
        for v in variants:
            if v not in VARIANTS:
                ap.error(f"unknown PyTorch variant '{v}'")
            if not variant_available(v):
                ap.error(f"variant {v} needs Debian's lib{VARIANTS[v][1].replace('-', '0-')} "
                         f"({os.path.join(BLAS_DIR, VARIANTS[v][1])})")
    if variants and args.torch_malloc == "jemalloc" and not os.path.exists(JEMALLOC):
        ap.error(f"--torch-malloc jemalloc needs Debian's libjemalloc2 ({JEMALLOC}): scripts/install-deps bench")
    torch_warmup = 3
    for path in (args.harness, args.gemm_peak):
        if not os.access(path, os.X_OK):
            ap.error(f"{path} not found; run `make bench` (it builds the harness and build/gemm_peak)")

    rep = Report()
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    record = {"threads": args.threads, "date": date, "cpu": cpu, "harness": harness,
              "isa": harness["isa"], "blas_pin": args.blas_pin, "blas": {}, "torch_malloc": args.torch_malloc,
              "load_start": loadavg(), "runs": []}
    rep.line(f"# bench: harness ({harness['isa']}) vs PyTorch, {args.threads} threads, {cpu['name']}")
    rep.line()
    for line in bench_machine.header_lines(cpu, harness, args.blas_pin, date, args.threads):
        rep.line(line)
    rep.line()
    if variants:
        rep.line("PyTorch variants (Debian's python3-torch; nn modules unless said otherwise):")
        rep.line()
        for v in variants:
            rep.line(f"* {v}: " + VARIANTS[v][3].format(blas=default_blas()))
        rep.line()
        rep.line("PyTorch's allocator (--torch-malloc): " + (
            f"jemalloc ({JEMALLOC} preloaded, MALLOC_CONF={JEMALLOC_CONF}: freed memory is kept and reused)"
            if args.torch_malloc == "jemalloc" else
            "glibc's malloc (blocks above 32 MiB go back to the kernel when freed and fault in again)"))
        rep.line()
    rep.line(f"load average at start: {record['load_start']:.2f}"
             + ("  (WARNING: the machine is busy; times will be noisy)" if record["load_start"] > 0.7 else ""))
    rep.line()

    # ---- the GEMM peak
    peaks = []
    rc, out, err, _ = run_measured([args.gemm_peak, str(args.threads)] + [str(n) for n in peak_sizes])
    if rc != 0:
        raise SystemExit(f"gemm_peak failed: {err}")
    own = json.loads(out)
    peaks.append((f"harness GEMM ({own['kernel']}), best of N = " + ", ".join(str(n) for n, _ in own["sizes"]), own["gflops"]))
    blases = {}  # one torch.mm per BLAS setting (the reference variant shares openblas's)
    def blas_key(v):
        return VARIANTS[v][1], tuple(sorted(VARIANTS[v][2].items()))
    for v in variants:
        blases.setdefault(blas_key(v), v)
    for v in blases.values():
        rc, out, err, _ = run_measured([PYTHON, BENCH_TORCH, "--peak", str(torch_peak_size),
                                        "--threads", str(args.threads)], env=torch_env(v, args.threads, args.blas_pin, args.torch_malloc))
        if rc != 0:
            raise SystemExit(f"torch.mm peak ({v}) failed: {err[-2000:]}")
        for w in variants:  # the variants that share this BLAS setting
            if blas_key(w) == blas_key(v):
                record["blas"][w] = json.loads(out)["blas"]
        peaks.append((f"torch.mm {torch_peak_size} ({v})", json.loads(out)["gflops"]))
    peak_name, peak = max(peaks, key=lambda p: p[1])
    record["peaks"] = peaks
    rep.line(f"## FP32 GEMM peak ({args.threads} threads)")
    rep.line()
    rep.table(["sgemm", "GFLOP/s"], [[n, f"{g:.0f}"] for n, g in peaks])
    rep.line(f"peak used below: {peak:.0f} GFLOP/s ({peak_name})")
    rep.line()
    if variants:
        rep.line("BLAS as loaded by each PyTorch variant (OpenBLAS's build string and the kernels it runs):")
        rep.line()
        for v in variants:
            rep.line(f"* {v}: " + bench_machine.describe_blas(record["blas"].get(v, {})))
        rep.line()

    failed = 0
    with tempfile.TemporaryDirectory(prefix="bench.") as tmp:
        for table in tables:
            if table == "generate":
                if not os.access(args.bench_generate, os.X_OK):
                    ap.error(f"{args.bench_generate} not found; run `make bench` (it builds build/bench_generate)")
                entries = [measure_generate(args.bench_generate, c) for c in GENERATE_CONFIGS if args.only in c[0]]
                failed += sum(e is None for e in entries)
                entries = [e for e in entries if e]
                record["runs"] += [dict(e, table=table) for e in entries]
                report_generate(rep, entries, GENERATE_REPEATS)
                continue
            if table in ("precision", "contention"):
                configs = [c for c in MAIN_CONFIGS if args.only in c[0]]
                runs = (harness_run, torch_run, median_after_warmup, torch_warmup, matmul_flops)
                if table == "precision":
                    bf16 = re.search(r"bf16: ([^;)]+)", record["harness"]["kernels"])
                    strongest = [v for v in STRONGEST_FIRST if v in variants][:1]
                    out = bench_precision.report_precision(rep, args, configs, strongest[0] if strongest else None,
                                                           tmp, peak, bf16 and bf16.group(1) != "none" and bf16.group(1), runs)
                else:
                    out = bench_precision.report_contention(rep, args, configs, tmp, runs)
                record["runs"] += [dict(e, table=table) for e in out]
                continue
            configs = {"main": MAIN_CONFIGS, "seq": SEQ_CONFIGS, "heads": HEAD_CONFIGS,
                       "context": CONTEXT_CONFIGS}.get(table)
            if configs is None:
                ap.error(f"unknown table '{table}'")
            configs = [c for c in configs if args.only in c[0]]
            if not configs:
                continue
            title = {"main": "bench configs", "seq": "sequence length (D=256, H=8, d_head=32, B*T = 4096 tokens per step)",
                     "heads": "head count at fixed width (D=256, E=256, T=128, B=16)",
                     "context": f"long contexts (D=256, H=8, d_head=32, B*T = {CONTEXT_TOKENS} tokens per step)"}[table]
            rep.line(f"## {title}: {LAYERS} layers, vocab {VOCAB}, text task, {args.threads} threads")
            rep.line()
            # the scaling tables compare with the strongest PyTorch variant only
            table_variants = variants if table == "main" else [v for v in STRONGEST_FIRST if v in variants][:1]
            entries = []
            for config in configs:
                entry = measure_config(args, config, table_variants, tmp, torch_warmup)
                failed += entry.pop("failures")
                record["runs"].append(dict(entry, table=table))
                entries.append(entry)
            if table == "main":
                report_main(rep, entries, table_variants, peak)
            else:
                report_scaling(rep, entries, table_variants, peak)
    record["load_end"] = loadavg()
    rep.line(f"load average at end: {record['load_end']:.2f}. ms/step: median over the steps after the "
             f"warm-up ({args.warmup} harness steps, {torch_warmup} PyTorch steps), the lowest such median "
             f"of {args.repeat} runs (PyTorch on the reference BLAS: 1 run). ratio = PyTorch time / "
             "harness time (> 1: the harness is faster). GFLOP/s and % peak: matmul FLOPs of forward + "
             "backward (causal attention) per harness step time. MiB: the harness's peak RSS in training "
             "(its `memory:` line; the whole run's, with the end-of-run study, is run_max_rss_kib in the "
             "JSON) and PyTorch's max RSS of the process (it only trains; it includes the interpreter and "
             "libtorch, about 230 MiB before the model exists).")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n".join(rep.md) + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(record, f, indent=1)
    return 1 if failed else 0
