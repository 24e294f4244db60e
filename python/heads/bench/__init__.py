"""heads.bench: scripts/bench: what runs and how it is measured (bench), its tables
(bench_report), the CPU and the harness's ISA path (bench_machine).

May import: core
"""
