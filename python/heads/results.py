"""heads.results: the name users import (`from heads import results`) for heads.read.results, the
reader of results files; this module is that one, not a copy."""
import sys

from .read import results as _results

sys.modules[__name__] = _results
