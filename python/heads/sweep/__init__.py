"""heads.sweep: running a sweep: experiments into named runs (experiments, runnames), a run's
lock, log and state (runstate), local runs N at a time (pool), Slurm job arrays (slurm), the
summary written (summary) and scripts/sweep itself (sweep_cli).

May import: core, read
"""
