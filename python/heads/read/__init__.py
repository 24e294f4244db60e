"""heads.read: reading a run: THE reader of results files and of a sweep's summary.h5 (results),
what /patching, /dla and /scores/copying say (causal) and what /prune says (pruning).

May import: core
"""
