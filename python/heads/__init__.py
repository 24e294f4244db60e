"""heads: the Python side of the harness; the scripts in scripts/ are thin command-line fronts over
it, and users import it to read results (`from heads import results`; put this folder's parent,
python/, on sys.path or PYTHONPATH, or pip install -e python/).

One subpackage per layer, each importing only those above it in this list (its __init__ says
which; scripts/check-layout checks it):

  core     the command line, configs with line:col marks, the ./harness binary, words, statistics,
           tokens as text, SentencePiece corpora
  read     THE reader of results files and summary.h5 (read.results, also `heads.results`), what
           /patching, /dla and /prune say
  sweep    experiments into runs, a run's lock, log and state, local pools and Slurm, the summary,
           scripts/sweep
  answers  how a sweep is laid out, its layouts compared (scripts/compare), the L0 sweeps
  report   the HTML report's data and its one self-contained page (scripts/report)
  plots    the figures (gnuplot): scripts/plot and scripts/plot-sweep
  bench    scripts/bench
  export   runs to TransformerLens, torch, npz and GGUF (scripts/export)

Needs numpy and yaml (and h5py to read results files; the bench modules need only h5py); scipy is
optional. A missing one is one line naming the Debian package and the pip/conda name (require,
require_or_exit below), not a traceback: the scripts run under Debian's /usr/bin/python3 (what
`make test` provisions) and under a user's own `python3 scripts/plot ...` in a venv or conda
environment alike.
"""
import importlib
import os
import sys

# module: (Debian package, pip / conda name)
PACKAGES = {"numpy": ("python3-numpy", "numpy"), "yaml": ("python3-yaml", "pyyaml"),
            "h5py": ("python3-h5py", "h5py"), "scipy": ("python3-scipy", "scipy")}


class MissingModule(ImportError):
    """A Python module the package needs cannot be imported; the message says how to get it."""


def require(*modules):
    """Import each module or raise MissingModule with one line saying where to get it."""
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            deb, pip = PACKAGES[name]
            raise MissingModule(
                f"needs the Python module {name}, which {sys.executable or 'python'} cannot import: "
                f"on Debian/Ubuntu install {deb} (for /usr/bin/python3; scripts/install-deps test "
                f"installs it), or run `pip install {pip}` / `conda install {pip}` in your environment"
            ) from None


def utf8_mode():
    """Under a locale that is not UTF-8 (LC_ALL=C with PYTHONUTF8=0), start this command again
    in Python's UTF-8 mode: otherwise every text file, log line and message that holds a
    non-ASCII path (or a non-ASCII config value) would end it with a UnicodeEncodeError. The
    arguments pass on as the bytes they were."""
    if sys.flags.utf8_mode or sys.getfilesystemencoding().lower().replace("-", "") == "utf8":
        return
    if sys.argv and sys.argv[0] and os.path.exists(sys.argv[0]):
        os.execv(sys.executable, [sys.executable, "-X", "utf8", *sys.orig_argv[1:]]
                 if hasattr(sys, "orig_argv") else [sys.executable, "-X", "utf8", *sys.argv])


def require_or_exit(*modules):
    """require() for a command-line script (which it first puts in UTF-8 mode: utf8_mode): the
    message as one line, exit status 2."""
    utf8_mode()
    try:
        require(*modules)
    except MissingModule as e:
        print(f"{os.path.basename(sys.argv[0] or 'heads')}: {e}", file=sys.stderr)
        sys.exit(2)

