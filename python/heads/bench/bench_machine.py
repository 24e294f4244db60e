"""heads.bench.bench_machine: what `scripts/bench` ran on, for its header and its JSON (used by
heads.bench).

Owns: the CPU (model, family/model numbers, vector extensions from /proc/cpuinfo), what the
harness binary says about its own kernels (`harness --version`: the ISA path AVX-512 / AVX2 /
portable, the GEMM tile and blocking, the cache sizes it read), and the ISA match: on a CPU with
AVX-512, a harness built for AVX2 (`-march=x86-64-v3`, the stand-in for an AVX2-only machine) is
compared with OpenBLAS pinned to its AVX2 kernels. It knows nothing of the tables or timings.
"""
import os
import subprocess

# OpenBLAS core type with the same vector width as a harness build, where the CPU offers more
# (OpenBLAS's AVX2 + FMA kernels are its Haswell ones; Zen 1-3 use them too; its SSE kernels
# without FMA, the portable x86-64-v2 build's width, are its Nehalem ones)
BLAS_PIN = {"AVX2": "Haswell", "portable": "Nehalem"}
WIDER = {"AVX2": ("AVX-512",), "portable": ("AVX-512", "AVX2")}  # what the CPU must offer beyond the build


def cpu_info():
    """Model name (+ family/model numbers) and the vector extensions of the first CPU."""
    fields = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        pass
    flags = fields.get("flags", "").split()
    isa = [name for flag, name in (("avx512f", "AVX-512"), ("avx2", "AVX2"), ("fma", "FMA"))
           if flag in flags]
    name = fields.get("model name", "unknown CPU")
    if "cpu family" in fields:
        name += f" (family {fields['cpu family']}, model {fields.get('model', '?')})"
    return {"name": name, "isa": isa, "cpus": os.cpu_count()}


def harness_info(path):
    """`harness --version`: its first line, and the kernels line whose first word is the ISA path."""
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        out = f"unknown ({e})"
    lines = out.strip().splitlines()
    kernels = next((l.split(":", 1)[1].strip() for l in lines if l.startswith("kernels:")), "")
    return {"version": lines[0] if lines else "unknown", "kernels": kernels,
            "isa": kernels.split()[0] if kernels else "unknown"}


def blas_pin(harness_isa, cpu_isa, mode):
    """The OPENBLAS_CORETYPE for the PyTorch variants that leave it open, or None: with mode
    "match", an AVX2 harness on an AVX-512 CPU gets OpenBLAS's AVX2 kernels and a portable one on
    an x86 CPU with AVX2 or AVX-512 OpenBLAS's SSE kernels (the same vector width)."""
    if mode == "match" and harness_isa in BLAS_PIN and any(w in cpu_isa for w in WIDER[harness_isa]):
        return BLAS_PIN[harness_isa]
    return None


def describe_blas(info):
    """One line for a bench_torch.py "blas" record."""
    if info.get("config"):
        return f"{info['config']} (kernels: {info.get('corename', '?')})"
    libs = [os.path.basename(p) for p in info.get("libraries", [])]
    return ", ".join(libs) or "no BLAS library found in the process"


def header_lines(cpu, harness, pin, date, threads):
    """The header of the report: what ran where."""
    lines = [f"* date: {date}",
             f"* CPU: {cpu['name']}, {cpu['cpus']} CPUs, vector extensions {' '.join(cpu['isa']) or 'none'}",
             f"* harness: {harness['version']}",
             f"* ISA path of the harness kernels (`harness --version`): **{harness['isa']}**"
             f"{harness['kernels'][len(harness['isa']):]}",
             f"* threads: {threads} (and 1, for the one-thread column)",
             f"* OMP_WAIT_POLICY: {os.environ.get('OMP_WAIT_POLICY') or 'unset (libgomp spins at barriers)'}"
             " (both sides inherit it; on a shared machine spinning threads slow both, PyTorch's most)"]
    if pin:
        lines.append(f"* {harness['isa']} stand-in: this CPU has {' and '.join(w for w in WIDER[harness['isa']] if w in cpu['isa'])} "
                     f"but the harness build uses {harness['isa']}; "
                     f"OpenBLAS is pinned to its {pin} ({harness['isa']}) kernels (OPENBLAS_CORETYPE={pin}) "
                     f"so that both sides use the same vector width, as on a CPU without them; "
                     "the AVX-512 variant is left out")
    elif harness["isa"] != "AVX-512" and "AVX-512" in cpu["isa"]:
        lines.append(f"* note: the harness build uses {harness['isa']} kernels on an AVX-512 CPU, "
                     "while OpenBLAS picks its own kernels")
    return lines
