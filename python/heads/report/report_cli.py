"""heads.report.report_cli: the command `scripts/report` (its usage text is that script's docstring): a
run's results file or a sweep's directory to one self-contained HTML page; for a sweep, also a page
per complete run in report/ beside it, linked from the sweep's table.

Owns which pages are written where and the command's messages; the data is heads.report.report_run's and
heads.report.report_sweep's, the page heads.report.report_page's.
"""
import os

from ..sweep import sweepread
from ..core import cli
from . import report_page, report_run, report_sweep
from ..read import results
from ..core.words import plural


def report_one(path, out, budget):
    """One run's page at out; returns its size in bytes."""
    data = report_run.read_run(path, budget)
    size = report_page.write(out, data)
    return size


def report_dir(directory, out, metric, budget):
    """A sweep's page at out and a page per complete run in report/ beside it, linked from
    the sweep's rows; returns (the sweep page's size, how many run pages)."""
    run_dir = os.path.join(os.path.dirname(os.path.abspath(out)), "report")
    links = {}
    summary = sweepread.Summary(directory, "scripts/report")
    for i in range(summary.n):
        run = str(summary["run"][i])
        h5 = summary.run_path(i)
        if summary["status"][i] != "complete" or not os.path.exists(h5):
            continue
        page = os.path.join(run_dir, run + ".html")
        report_one(h5, page, budget)
        links[run] = os.path.relpath(page, os.path.dirname(os.path.abspath(out)))
    data = report_sweep.read_sweep(directory, metric, links)
    return report_page.write(out, data), len(links)


def main(doc):
    """scripts/report: doc is its usage text (--help); returns the exit status."""
    ap = cli.arg_parser(doc)
    ap.add_argument("target")
    ap.add_argument("-o", "--output")
    ap.add_argument("--metric")  # default: compare's (the test split when the runs have one)
    ap.add_argument("--max-map-mb", type=float, default=16.0)
    args = ap.parse_args()
    budget = int(args.max_map_mb * (1 << 20))
    try:
        if os.path.isdir(args.target):
            out = args.output or os.path.join(args.target, "report.html")
            size, n = report_dir(args.target, out, args.metric, budget)
            print(f"{out}: {size / 1e6:.2f} MB, sweep of {plural(n, 'run report')} in "
                  f"{os.path.join(os.path.dirname(out) or '.', 'report')}/")
        elif os.path.exists(args.target):
            out = args.output or os.path.splitext(args.target)[0] + ".html"
            size = report_one(args.target, out, budget)
            print(f"{out}: {size / 1e6:.2f} MB")
        elif args.target.endswith(".h5"):
            cli.die(results.not_there(args.target))
        else:
            cli.die(f"{args.target}: no such file or directory (give a results file or a sweep's "
                   "results directory)")
    except cli.UserError as e:
        cli.die(str(e))
    except OSError as e:
        cli.die(f"{e.filename or args.target}: {e.strerror}")
    return 0
