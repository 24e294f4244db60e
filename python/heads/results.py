"""heads.results: the reader as users import it (`from heads import results`, docs/python.md):
everything heads.read.results offers (Run, RunResult, open_file, damage, ...) and Summary, a
sweep's summary.h5 verified against the run files it stands for (heads.sweep.sweepread). Nothing
inside the package imports this module: it stands above every subpackage."""
from .read.results import *  # noqa: F401,F403
from .sweep.sweepread import Summary  # noqa: F401
