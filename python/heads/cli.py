"""heads.cli: what every command-line front shares: an argument parser whose --help is the
script's docstring, the user-error exception and the one way to exit on it (one line, status 2).

Knows nothing of experiments, results files or the harness.
"""
import re
import sys
import time


def arg_parser(doc):
    """An ArgumentParser whose --help prints the script's docstring (the one place options are
    described) and whose usage line is the docstring's."""
    import argparse

    class HelpAction(argparse.Action):
        def __call__(self, parser, namespace, values, option_string=None):
            try:
                print(doc.strip(), flush=True)
            except BrokenPipeError:  # `--help | head`
                pass
            parser.exit()

    usage = re.search(r"^usage: (.*)$", doc, re.M)
    ap = argparse.ArgumentParser(add_help=False, usage=usage.group(1) if usage else None)
    ap.add_argument("-h", "--help", nargs=0, action=HelpAction)
    return ap


class UserError(Exception):
    """A mistake in the user's input: printed as one line, the script exits with status 2."""


def die(message, status=2):
    print(message, file=sys.stderr)
    sys.exit(status)


def shell_quote(s):
    return s if re.fullmatch(r"[\w./=:+,@%-]+", s) else "'" + s.replace("'", "'\\''") + "'"


def now_text():
    return time.strftime("%Y-%m-%d %H:%M:%S")


def indent(text):
    """Text indented as a quoted block under a message line."""
    return "\n".join("    | " + line for line in text.splitlines())
