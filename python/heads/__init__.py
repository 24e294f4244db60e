"""heads: the Python side of the harness, one module per concern; the scripts in scripts/ are thin
command-line fronts over it, and users import it to read results (put this folder, python/, on
sys.path or PYTHONPATH).

  cli          argument parser (--help is the script's docstring), UserError, die
  configs      harness config YAML with line:col marks, values as the harness reads them
  harness      the ./harness binary: its command line, `--shapes` parsed
  experiments  experiment files expanded into named runs
  results      THE reader of results files (a sweep's summary.h5: sweepread)
  verify       the readers' guard: a file read whole in a child first (checksums, text checksum)
  textsum      the text checksum of a results file (format 1.4), as the harness computes it
  states       a run file's state, one rule for every command (complete, stale, damaged, ...)
  summary      a sweep's summary.csv / summary.h5, written
  sweepread    a sweep's summary.h5 read back, checked against its run files
  runstate     a run's lock and log; complete / running / failed / missing
  status_cli   scripts/sweep --status: every run of a results directory, or one run
  pool         running runs here, N at a time, or one under its lock
  slurm        a sweep as a Slurm job array; submissions and squeue
  stats        mean, std, Welch's t-test
  pruning      what /prune says: heads needed, prunable fraction, Holm's adjustment, mean curves
  compare      a sweep's head counts compared (scripts/compare and the sweep report)
  gnuplot      running gnuplot, its terminals and data files
  heatmaps     layer x head heatmaps (gnuplot)
  studyplots   the head study's figures: heads, pruning curves, composition; per sweep
  tokens       a probe's tokens as text, per task
  report_run, report_study, report_sweep, report_page
               the HTML report: a run's data, its pruning and composition sections, a sweep's
               data, one self-contained page (code in report_assets/)
  export       runs to TransformerLens, torch, npz
  corpus       SentencePiece corpora (scripts/tokenize)
  sweep_cli    scripts/sweep: the command line, the checks, the plan, the pool or Slurm, the summary
  plot_run     scripts/plot: a run's figures
  plot_sweep   scripts/plot-sweep: a sweep's figures
  report_cli   scripts/report: a run's or a sweep's pages, where they go
  bench, bench_report, bench_machine
               scripts/bench: what runs and how it is measured, its tables, the machine it ran on

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

