"""heads.bench.bench_report: the tables `scripts/bench` prints (and writes as Markdown): the harness alone
(ms/step, tokens/s, GFLOP/s, % of the GEMM peak, memory, the one-thread speed-up), the harness
against each PyTorch variant with their ratio, the lowest ratios, the scaling tables, and one
generated token's cost by position through the K/V cache and by a full recompute.

Takes the entries heads.bench measured; knows nothing of how they were run.
"""


def fmt_ms(s):
    return f"{s * 1e3:.1f}" if s < 10 else f"{s * 1e3:.0f}"


def mib(kib):
    return f"{kib / 1024:.0f}"


class Report:
    """Prints as it goes; keeps the markdown too."""

    def __init__(self):
        self.md = []

    def line(self, text=""):
        print(text, flush=True)
        self.md.append(text)

    def table(self, header, rows):
        widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
        def fmt(r):
            return "| " + " | ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(r, widths))) + " |"
        self.line(fmt(header))
        self.line("|" + "|".join("-" * (w + 2) for w in widths) + "|")
        for r in rows:
            self.line(fmt(r))
        self.line()


HARNESS_HEADER = ["harness ms/step", "tokens/s", "GFLOP/s", "% peak", "harness MiB"]
THREADS_HEADER = ["1 thread ms/step", "speed-up"]


def harness_cells(entry, peak):
    h = entry["harness"]
    if h["median_s"] is None:
        return ["failed", "", "", "", ""]
    s, tokens = h["median_s"], entry["B"] * entry["T"]
    return [fmt_ms(s), f"{tokens / s / 1e3:.0f}k", f"{entry['flops'] / s / 1e9:.0f}",
            f"{100 * entry['flops'] / s / 1e9 / peak:.0f}%", mib(h["max_rss_kib"])]


def thread_speedup(entry):
    """One-thread time over the bench's thread count's time (None without both)."""
    one, many = entry.get("harness_1t", {}).get("median_s"), entry["harness"]["median_s"]
    return one / many if one and many else None


def thread_cells(entry):
    if "harness_1t" not in entry:
        return []
    one, r = entry["harness_1t"]["median_s"], thread_speedup(entry)
    return [fmt_ms(one) if one else "failed", f"{r:.2f}x" if r else ""]


def ratio(entry, v):
    h, t = entry["harness"]["median_s"], entry[f"torch_{v}"]["median_s"]
    return t / h if h and t else None


def report_main(rep, entries, variants, peak):
    """The harness alone, then one row per (config, PyTorch variant), then the lowest ratios."""
    threads = THREADS_HEADER if entries and "harness_1t" in entries[0] else []
    rep.table(["config"] + HARNESS_HEADER + threads,
              [[e["config"]] + harness_cells(e, peak) + thread_cells(e) for e in entries])
    rows = []
    for e in entries:
        for v in variants:
            t, r = e[f"torch_{v}"], ratio(e, v)
            rows.append([e["config"], v, fmt_ms(t["median_s"]) if t["median_s"] else "failed",
                         fmt_ms(e["harness"]["median_s"]) if e["harness"]["median_s"] else "failed",
                         f"{r:.2f}x" if r else "", mib(t["max_rss_kib"]) if t["median_s"] else "",
                         mib(e["harness"]["max_rss_kib"]) if e["harness"]["median_s"] else ""])
    rep.table(["config", "PyTorch", "PyTorch ms/step", "harness ms/step", "ratio", "PyTorch MiB",
               "harness MiB"], rows)
    lowest = []
    for v in variants:
        ratios = [(ratio(e, v), e["config"]) for e in entries if ratio(e, v)]
        if ratios:
            r, where = min(ratios)
            n_2x = sum(1 for x, _ in ratios if x >= 2.0)
            lowest.append([v, f"{r:.2f}x", where, f"{n_2x} of {len(entries)}"])
    rep.table(["PyTorch", "lowest ratio", "on", "configs at >= 2x"], lowest)
    speedups = [(thread_speedup(e), e["config"]) for e in entries if thread_speedup(e)]
    if speedups:
        r, where = min(speedups)
        rep.line(f"threads: the lowest speed-up of {entries[0]['threads']} threads over 1 is {r:.2f}x "
                 f"({where}); {sum(1 for x, _ in speedups if x >= 1.8)} of {len(speedups)} configs at >= 1.8x")
        rep.line()


def report_scaling(rep, entries, variants, peak):
    header = ["config"] + HARNESS_HEADER + (THREADS_HEADER if entries and "harness_1t" in entries[0] else [])
    for v in variants:
        header += [f"torch[{v}] ms/step", "ratio", f"torch[{v}] MiB", "MiB ratio"]
    header.append("load avg")
    rows = []
    for e in entries:
        row = [e["config"]] + harness_cells(e, peak) + thread_cells(e)
        for v in variants:
            t, r = e[f"torch_{v}"], ratio(e, v)
            both = t["median_s"] and e["harness"]["median_s"]
            row += [fmt_ms(t["median_s"]) if t["median_s"] else "failed", f"{r:.1f}x" if r else "",
                    mib(t["max_rss_kib"]) if t["median_s"] else "",
                    f"{t['max_rss_kib'] / e['harness']['max_rss_kib']:.1f}x" if both else ""]
        load = e.get("load")
        rows.append(row + [f"{load[0]:.1f} -> {load[1]:.1f}" if load else ""])
    rep.table(header, rows)
    rep.line("MiB ratio: PyTorch's max RSS / the harness's (> 1: the harness uses less); load avg: the "
             "1-minute load average when the config's runs began and ended.")
    rep.line()


def report_generate(rep, entries, repeats):
    """Per config, one generated token's CPU time at each position: through the K/V cache (one
    token through every block, attention over the cached keys) and by a full forward over the
    sequence so far, which is what generating without a cache costs."""
    for e in entries:
        rep.line(f"## generating one token: {e['config']}, 2 layers, vocab 256, 1 thread "
                 f"(process CPU time, fastest of {repeats})")
        rep.line()
        rows = [[str(p), f"{c:.1f}", f"{f:.1f}", f"{f / c:.1f}x"]
                for p, c, f in zip(e["positions"], e["cached_us"], e["full_us"])]
        rep.table(["position", "K/V cache µs/token", "full recompute µs/token", "recompute / cache"], rows)
