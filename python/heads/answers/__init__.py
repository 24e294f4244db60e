"""heads.answers: what a sweep answers: how it is laid out (sweepaxes), its layouts compared with
statistics (compare), and the L0 sweeps against pruning (l0curve).

May import: core, read, sweep
"""
