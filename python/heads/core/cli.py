"""heads.core.cli: what every command-line front shares: an argument parser whose --help is the
script's docstring, the user-error exception and the one way to exit on it (one line, status 2).

Knows nothing of experiments, results files or the harness.
"""
import os
import re
import sys
import time


class Stopped(SystemExit):
    """SIGINT or SIGTERM (stop_on_signals): the script ends with exit status 130."""


def _stop(signum, frame):
    raise Stopped(130)


def stop_on_signals():
    """SIGINT and SIGTERM end the script at once through Stopped, a SystemExit (status 130), so that
    every `finally` and `except BaseException` on the way out removes its temporaries (a killed
    Python would leave them); earlier results stay, as every write is a rename. A command that
    stops in steps of its own (a sweep's pool) installs its handlers over these."""
    import signal
    for signum in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(signum) in (signal.SIG_DFL, signal.default_int_handler):
            signal.signal(signum, _stop)


def arg_parser(doc):
    """An ArgumentParser whose --help prints the script's docstring (the one place options are
    described) and whose usage line is the docstring's; every script makes one first, so this
    is also where SIGINT/SIGTERM are made to end it cleanly (stop_on_signals)."""
    import argparse
    stop_on_signals()

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
    print(printable(message), file=sys.stderr)
    sys.exit(status)


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text):
    """Text that may hold a file's strings, as a terminal may show it: control characters (an
    escape sequence, a carriage return that rewrites the line) become '?', as in the harness's
    own messages (src/base/error.c); newlines and tabs stay."""
    return _CONTROL.sub("?", str(text))


def shell_quote(s):
    return s if re.fullmatch(r"[\w./=:+,@%-]+", s) else "'" + s.replace("'", "'\\''") + "'"


def now_text():
    return time.strftime("%Y-%m-%d %H:%M:%S")


def indent(text):
    """Text indented as a quoted block under a message line."""
    return "\n".join("    | " + line for line in text.splitlines())


class _QuietStdout:
    """sys.stdout that, once its reader has gone (`| head -1`: EPIPE), sends the rest of the
    output to /dev/null instead of raising, so that the program finishes its work quietly."""

    def __init__(self, stream):
        self._stream = stream

    def _reader_gone(self):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, self._stream.fileno())
        os.close(devnull)

    def write(self, text):
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._reader_gone()
            return len(text)

    def flush(self):
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._reader_gone()

    def __getattr__(self, name):  # isatty, fileno, encoding, ...
        return getattr(self._stream, name)


def survive_closed_stdout():
    """From now on a closed stdout (EPIPE) silences the output instead of ending the program
    with a BrokenPipeError traceback."""
    if not isinstance(sys.stdout, _QuietStdout):
        sys.stdout = _QuietStdout(sys.stdout)
