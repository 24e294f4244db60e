"""bench_precision: scripts/bench's precision and contention tables (issue-level questions that
the main tables do not ask): FP32 against bf16 on both sides, and the harness beside busy
processes. Owns the measuring loops and the two tables; the single runs (harness_run, torch_run)
and the medians are bench.py's, passed in. Must not know: the report's other tables."""
import os
import signal
import subprocess

from .bench_report import fmt_ms


def _best(run, median, warmup, rounds):
    """The lowest per-run median step time of `rounds` runs of run() (None if a run failed)."""
    best = None
    for _ in range(rounds):
        try:
            m = median(run()["step_s"], warmup)[0]
        except (RuntimeError, OSError, KeyError, ValueError) as e:
            print(e, flush=True)
            return None
        best = m if best is None else min(best, m)
    return best


def report_precision(rep, args, configs, variant, tmp, peak, bf16_path, runs):
    """ms/step of the harness in fp32 and bf16 and of PyTorch (variant) in FP32 and under bf16
    autocast, per config; % of the FP32 GEMM peak for the FP32 step. runs = (harness_run,
    torch_run, median_after_warmup, torch_warmup, matmul_flops)."""
    harness_run, torch_run, median, torch_warmup, matmul_flops = runs
    rows, record = [], []
    for name, D, H, dh, T, B in configs:
        cell = {}
        for prec in ("fp32", "bf16") if bf16_path else ("fp32",):
            cell[prec] = _best(lambda: harness_run(args, name, D, H, dh, T, B, args.steps, tmp, args.threads, prec),
                               median, args.warmup, args.repeat)
        for ac in ("none", "bf16") if variant else ():
            cell["torch_" + ac] = _best(lambda: torch_run(args, variant, name, D, H, dh, T, B, args.torch_steps, ac),
                                        median, torch_warmup, args.repeat)
        flops = matmul_flops(D, H, dh, T, B)
        f32, b16 = cell.get("fp32"), cell.get("bf16")
        tb = cell.get("torch_bf16")
        rows.append([name, fmt_ms(f32) if f32 else "-", fmt_ms(b16) if b16 else "-",
                     f"{f32 / b16:.2f}x" if f32 and b16 else "-",
                     fmt_ms(cell["torch_none"]) if cell.get("torch_none") else "-",
                     fmt_ms(tb) if tb else "-", f"{tb / b16:.2f}x" if tb and b16 else "-",
                     f"{100 * flops / f32 / 1e9 / peak:.0f} %" if f32 else "-"])
        record.append(dict(config=name, **{k: v for k, v in cell.items()}))
    rep.line(f"## FP32 and bf16 ({args.threads} threads; harness bf16 path: {bf16_path or 'none on this CPU'}; "
             f"PyTorch: {variant or 'not run'}, bf16 = torch.autocast('cpu', bfloat16))")
    rep.line()
    rep.table(["config", "harness fp32 ms", "harness bf16 ms", "bf16 speed-up", "torch fp32 ms",
               "torch bf16 ms", "torch bf16 / harness bf16", "fp32 % of GEMM peak"], rows)
    rep.line()
    return record


def _busy(n):
    """n busy loops (`sh -c 'while :; do :; done'`), each in its own process group."""
    return [subprocess.Popen(["sh", "-c", "while :; do :; done"], start_new_session=True) for _ in range(n)]


def _stop(procs):
    for p in procs:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait()


CONTENTION_STEPS = 120  # past the thread-count probes at steps 6 and 58-108 (src/train/threads_adapt.c)


def _mean_after_warmup(step_s, warmup):
    """The mean step: the probes' steps at the other thread count weigh in (a median hides them)."""
    timed = step_s[warmup:]
    return sum(timed) / len(timed), len(timed)


def report_contention(rep, args, configs, tmp, runs):
    """The harness at its default threads (train.threads 0) and at 1 thread, quiet and beside one
    and two busy processes (the user's machine with a compile running), in the user's default
    environment: no OMP_WAIT_POLICY or GOMP_SPINCOUNT (src/cli/wait_policy.c sets the spin)."""
    harness_run = runs[0]
    steps = max(args.steps, CONTENTION_STEPS)
    saved = {k: os.environ.pop(k) for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT") if k in os.environ}
    rows, record = [], []
    try:
        for name, D, H, dh, T, B in configs:
            row = [name]
            for competitors in (0, 1, 2):
                procs = _busy(competitors)
                try:
                    default, one = (_best(lambda: harness_run(args, name, D, H, dh, T, B, steps, tmp, threads),
                                          _mean_after_warmup, args.warmup, args.repeat) for threads in (0, 1))
                finally:
                    _stop(procs)
                row += [fmt_ms(default) if default else "-", fmt_ms(one) if one else "-",
                        f"{one / default:.2f}x" if default and one else "-"]
                record.append(dict(config=name, competitors=competitors, default_s=default, one_thread_s=one))
            rows.append(row)
    finally:
        os.environ.update(saved)
    rep.line(f"## Shared machine: mean ms/step of {steps} steps at the default threads and at 1 thread, beside 0, "
             f"1 and 2 busy processes ({os.cpu_count()} CPUs)")
    rep.line()
    rep.table(["config"] + [f"{load}: {col}" for load in ("quiet", "1 busy", "2 busy")
                            for col in ("default", "1 thread", "1 thread / default")], rows)
    rep.line()
    return record
