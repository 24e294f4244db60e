"""heads: the Python side of the harness, one module per concern; the scripts in scripts/ are thin
command-line fronts over it, and users import it to read results (put this folder, python/, on
sys.path or PYTHONPATH).

  cli          argument parser (--help is the script's docstring), UserError, die
  configs      harness config YAML with line:col marks, values as the harness reads them
  harness      the ./harness binary: its command line, `--shapes` parsed
  experiments  experiment files expanded into named runs
  results      THE reader of results files and of a sweep's summary.h5
  summary      a sweep's summary.csv / summary.h5, written
  runstate     a run's lock and log; complete / running / failed / missing
  pool         running runs here, N at a time, or one under its lock
  slurm        a sweep as a Slurm job array; submissions and squeue
  stats        mean, std, Welch's t-test
  gnuplot      running gnuplot, its terminals and data files

Needs numpy and yaml (and h5py to read results files); scipy is optional.
"""
