"""heads.read.verify: the guard every reader of results files goes through: a file is read whole --
every attribute, every dataset (each chunk's Fletcher-32 checksum verified), its strings against
the text checksum (format 1.4, src/results/results_text.c) -- in a child process before this process
opens it, since HDF5 can crash or hang on a damaged file and a reader must name the file and the
problem instead. The child also sums the file's bytes (CRC-32), which a sweep's summary records
for every run it stands for (heads.sweep.sweepread compares them).

Knows nothing of what the files hold; never writes one (only its cache of verdicts, under
$XDG_CACHE_HOME).
"""
import os
import select
import signal
import subprocess
import sys

from ..core.cli import UserError
from ..core import harness, safefile


# ---- the guard: a damaged file is named, never read by this process
#
# HDF5 trusts a file's metadata: one damaged byte (in a file of the older format, or a place no
# checksum covers) can crash the library inside h5py, which no try/except catches. So every file
# is first read whole -- every attribute, every dataset (each chunk's Fletcher-32 checksum
# verified) -- by one child process for all the files a command asks about; a file the child
# dies on, or takes too long over, is damaged, and the child is started again for the rest.
# Results are kept per (path, size, mtime, ctime, inode): for the life of this process, and in a
# cache file ($XDG_CACHE_HOME/heads/verified-2, else ~/.cache/heads/verified-2) so that a file is
# read whole once, not by every command (a rewritten file is a new inode or mtime, and its ctime
# moves even when its mtime is set back: read again). "-2": verdicts of this walker (strings and
# the bytes' sum included), not of the one before it.

_WALKER = r"""
import os, sys, zlib
import h5py, numpy
sys.path.insert(0, sys.argv[1])
from heads.read.textsum import text_problem
def why(e):
    t = str(e)
    if "Fletcher32" in t or "checksum" in t:
        return "its checksum fails: the stored bytes are damaged"
    return "the file is damaged there (" + " ".join(t.split())[:160] + ")"
def walk(path):
    try:
        f = h5py.File(path, "r")
    except Exception as e:
        return "not an HDF5 results file (not HDF5 at all, or truncated)"
    bad = []
    def attrs(name, obj):
        for key in list(obj.attrs):
            try:
                obj.attrs[key]
            except Exception as e:
                bad.append(name + ": attribute " + key + " cannot be read: " + why(e))
                return
    def visit(name, obj):
        if bad:
            return True
        attrs("/" + name, obj)
        if isinstance(obj, h5py.Dataset) and not bad:
            try:
                step = max(1, (64 << 20) // max(1, obj.dtype.itemsize * int(numpy.prod(obj.shape[1:]))))
                if obj.shape == () or obj.size == 0:
                    obj[()]
                else:
                    for at in range(0, obj.shape[0], step):
                        obj[at:at + step]
            except Exception as e:
                bad.append("/" + name + " cannot be read: " + why(e))
        return True if bad else None
    try:
        with f:
            attrs("/", f)
            if not bad:
                f.visititems(visit)
    except Exception as e:
        bad.append("its groups cannot be listed: " + why(e))
    if not bad:
        try:
            with h5py.File(path, "r") as f:
                problem = text_problem(f)
        except Exception as e:
            problem = "its strings cannot be read: " + why(e)
        if problem:
            return "damaged: " + problem
    return "damaged: " + bad[0] if bad else ""
def file_sum(path):
    crc = 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            crc = zlib.crc32(block, crc)
    return crc
out = sys.stdout
for line in sys.stdin.buffer:
    path = os.fsdecode(line.rstrip(b"\n"))
    out.write("B\n")
    out.flush()
    try:
        crc = "%08x" % file_sum(path)
    except OSError:
        crc = "-"
    out.write("R " + crc + " " + walk(path).encode("ascii", "backslashreplace").decode() + "\n")
    out.flush()
"""

class Verdict:
    """What the child found in a file: problem ('' when it reads whole, else one line without the
    path), crc (CRC-32 of its bytes, None when unknown), and the size and mtime_ns it had."""

    def __init__(self, problem, crc, size, mtime_ns):
        self.problem, self.crc, self.size, self.mtime_ns = problem, crc, size, mtime_ns


_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the child imports heads.read.textsum
_VERDICTS = {}  # (path, size, mtime_ns, ctime_ns, inode) -> (problem, crc or None)
# Verdicts that may be the machine's, not the file's: a read that did not finish in time (a loaded
# machine, a slow disk) or a child killed by SIGKILL (the kernel's out-of-memory killer, a user).
# They hold for this process only; the cache file keeps only what the file's bytes decide.
_UNCERTAIN = set()
_CACHE_LOADED = []
_CACHE_LIMIT = 4 << 20  # bytes of the cache file before it starts again


def _cache_path():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "heads", "verified-2")


def _load_cache():
    """The verdicts earlier commands stored (lines 'size mtime_ns ctime_ns inode crc problem\tpath')."""
    if _CACHE_LOADED:
        return
    _CACHE_LOADED.append(True)
    try:
        with open(_cache_path(), encoding="utf-8", errors="surrogateescape") as f:
            for line in f:
                head, sep, path = line.rstrip("\n").partition("\t")
                fields = (head.split(" ", 5) + [""] * 6)[:6]
                if sep and all(x.isdigit() for x in fields[:4]) and len(fields[4]) == 8:
                    key = (path,) + tuple(int(x) for x in fields[:4])
                    _VERDICTS[key] = (fields[5], int(fields[4], 16))
    except (OSError, ValueError):
        pass


def _store(verdicts):
    """Append verdicts {key: (problem, crc)} to the cache file (one short line each, O_APPEND:
    lines of concurrent commands do not mix); a cache that cannot be written is no cache."""
    path = _cache_path()
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if os.path.exists(path) and os.path.getsize(path) > _CACHE_LIMIT:
            os.unlink(path)
        text = "".join(f"{k[1]} {k[2]} {k[3]} {k[4]} {crc:08x} {' '.join(p.split())}\t{k[0]}\n"
                       for k, (p, crc) in verdicts.items()
                       if crc is not None and "\n" not in k[0] and "\t" not in k[0])
        with safefile.open_write(path, "ab") as f:
            f.write(text.encode("utf-8", "surrogateescape"))
    except (OSError, UserError):
        pass


def _key(path):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (os.path.abspath(path), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def _seconds(path):
    """Seconds the child may spend on a file: a minute, plus one per 20 MB (as harness check)."""
    try:
        return 60 + os.path.getsize(path) / (20 << 20)
    except OSError:
        return 60


def verdicts(paths):
    """{path: Verdict} for the files of paths that are there; one child process reads all the
    files not seen before (as they are now: a file that changes is read again)."""
    _load_cache()
    todo = []
    for p in dict.fromkeys(paths):
        k = _key(p)
        if k is not None and k not in _VERDICTS and os.path.isfile(p):
            todo.append((p, k))
    keys = [k for _, k in todo]
    while todo:
        todo = _walk(todo)
    if keys:
        _store({k: _VERDICTS[k] for k in keys if k in _VERDICTS and k not in _UNCERTAIN})
    out = {}
    for p in paths:
        k = _key(p)
        if k in _VERDICTS:
            out[p] = Verdict(*_VERDICTS[k], k[1], k[2])
    return out


def damages(paths):
    """{path: problem} for the files of paths that are there: '' when the file reads whole,
    else one line without the path ('damaged: /train/loss cannot be read: its checksum fails:
    ...', 'damaged: its text checksum fails: ...', 'damaged: the HDF5 library crashed reading it
    (SIGSEGV)', 'not an HDF5 results file ...')."""
    return {p: v.problem for p, v in verdicts(paths).items()}


def _walk(todo):
    """Read the files of todo in one child; returns the files it did not reach (it died)."""
    child = subprocess.Popen([sys.executable, "-c", _WALKER, _PACKAGE_ROOT], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             env=dict(os.environ, PYTHONWARNINGS="ignore"),
                             preexec_fn=_limit_memory)
    try:
        child.stdin.write(b"".join(os.fsencode(p) + b"\n" for p, _ in todo))
        child.stdin.close()
    except BrokenPipeError:
        pass
    for i, (path, key) in enumerate(todo):
        line = _read_line(child.stdout, 60)
        if line == "B":
            line = _read_line(child.stdout, _seconds(path))
        if line is not None and line.startswith("R "):
            crc, _, problem = line[2:].partition(" ")
            _VERDICTS[key] = (problem, int(crc, 16) if crc != "-" else None)
            continue
        if line is None:  # still busy with this file: stuck in it
            child.kill()
            _VERDICTS[key] = (f"damaged: reading it did not finish in {_seconds(path):.0f} s "
                              "(the HDF5 library is stuck in its metadata)", _file_sum(path))
            _UNCERTAIN.add(key)
        else:
            rc = child.wait()
            how = f"signal {_signal_name(-rc)}" if rc < 0 else f"exit status {rc}"
            _VERDICTS[key] = (f"damaged: the HDF5 library crashed reading it ({how})",
                              _file_sum(path))
            if rc == -signal.SIGKILL:
                _UNCERTAIN.add(key)
        child.wait()
        return todo[i + 1:]
    child.wait()
    return []


def _file_sum(path):
    """CRC-32 of a file's bytes (reading bytes cannot crash), None when it cannot be read."""
    import zlib
    crc = 0
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                crc = zlib.crc32(block, crc)
    except OSError:
        return None
    return crc


def _limit_memory():
    """In the child: at most _CHILD_MEMORY of address space (or the lower limit it has already), so that sizes read from a damaged
    file end in a MemoryError (the file is damaged), not in a machine out of memory."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = _CHILD_MEMORY if hard == resource.RLIM_INFINITY else min(_CHILD_MEMORY, hard)
    if soft == resource.RLIM_INFINITY or soft > limit:  # lowered, never raised (any `ulimit -v`)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


_CHILD_MEMORY = 8 << 30  # the child reads in slabs of 64 MiB: a few of them, and h5py itself


def _read_line(stream, seconds):
    """One line of the child's output (without the newline): '' at its end, None when none came
    within seconds."""
    ready, _, _ = select.select([stream], [], [], seconds)
    if not ready:
        return None
    return stream.readline().decode("ascii", "replace").rstrip("\n")


def _signal_name(n):
    try:
        return signal.Signals(n).name
    except ValueError:
        return str(n)


def damage(path):
    """The problem of one file ('' when it reads whole, or when it is not there)."""
    return damages([path]).get(path, "")


def refuse_damaged(path):
    """UserError naming the file and its problem, unless it reads whole and the harness's
    readers accept the config and parameters it stores (when it stores a config); a FIFO, a
    device or a directory is refused before anything opens it."""
    safefile.check_regular(path)
    problem = damage(path)
    if problem:
        raise UserError(f"{path}: {problem}")
    refusal = harness.stored_refusal(path) if _has_config(path) else ""
    if refusal:
        raise UserError(refusal)


def _has_config(path):
    """Whether a file that reads whole stores a config (config_yaml or /config) for the harness
    to judge; one without either (made by hand: a test's fixture) has none to trust."""
    import h5py
    try:
        with h5py.File(path, "r") as f:
            return "config_yaml" in f.attrs or "config" in f
    except OSError:
        return True


