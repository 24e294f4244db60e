"""heads.core.safefile: files opened so that what sits at a path cannot redirect a write or stall a
read: the Python side of src/base/safefile.c, with the same rule and the same words.

A results folder may be shared: anyone who can write into it can put a symbolic link, a FIFO or
a device where a script writes or reads. open_write refuses a link or anything but a regular file
at the path (a UserError naming it), never writes through one; check_regular refuses a FIFO, a
device or a directory before a library (h5py, gnuplot) opens the path and blocks on it. Files
made by mkstemp and moved into place with os.replace need neither: mkstemp never follows a link
and a rename replaces one.
Knows nothing of experiments, results files or the harness.
"""
import errno
import os
import stat

from .cli import UserError

_MODES = {"w": os.O_WRONLY | os.O_CREAT | os.O_TRUNC, "a": os.O_WRONLY | os.O_CREAT | os.O_APPEND,
          "a+": os.O_RDWR | os.O_CREAT | os.O_APPEND}


def kind(mode):
    """'a FIFO', 'a directory', ... as src/base/safefile.c names them."""
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"),
                       (stat.S_ISBLK, "a device"), (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "not a regular file"


def _refusal(path, mode):
    if stat.S_ISLNK(mode):
        return f"{path}: it is a symbolic link, and a write never follows one; remove it"
    return f"{path}: it is {kind(mode)}, not a regular file; refused"


def refuse_unsafe_target(path):
    """UserError when a symbolic link or a non-regular file is at path, for a program that
    opens path for writing by itself (gnuplot's `set output`); a regular file or nothing passes."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(st.st_mode):
        raise UserError(_refusal(path, st.st_mode))


def open_write(path, mode="w", **kwargs):
    """open(path, mode) for writing ('w', 'a', 'a+', with 'b' or not), refusing a symbolic link or
    a non-regular file at path (UserError) instead of writing through it or waiting on it."""
    flags = _MODES[mode.replace("b", "")] | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    refuse_unsafe_target(path)
    try:
        fd = os.open(path, flags & ~os.O_TRUNC, 0o666)  # truncated only once known regular
    except OSError as e:
        try:
            st = os.lstat(path)
        except OSError:
            raise e from None
        if stat.S_ISREG(st.st_mode):
            raise
        raise UserError(_refusal(path, st.st_mode)) from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise UserError(_refusal(path, st.st_mode))
    os.set_blocking(fd, True)
    if flags & os.O_TRUNC:
        os.ftruncate(fd, 0)
    return os.fdopen(fd, mode, **kwargs)


def open_read(path, mode="r", **kwargs):
    """open(path, mode) for reading, without waiting on a FIFO or opening a device: anything but a
    regular file (links followed) is an OSError (EINVAL, 'it is a FIFO, not a regular file'), so
    that a caller's `except OSError` treats it as a file it cannot read."""
    try:
        st = os.stat(path)
    except OSError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise OSError(errno.EINVAL, f"it is {kind(st.st_mode)}, not a regular file", path)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):  # replaced since the stat
        os.close(fd)
        raise OSError(errno.EINVAL, f"it is {kind(st.st_mode)}, not a regular file", path)
    os.set_blocking(fd, True)
    return os.fdopen(fd, mode, **kwargs)


def check_regular(path):
    """Refuse (UserError) a FIFO, a device or a directory at path before anything opens it; a
    missing path passes (the open says so)."""
    try:
        st = os.stat(path)
    except OSError:
        return
    if not stat.S_ISREG(st.st_mode):
        raise UserError(f"{path}: not a regular file ({kind(st.st_mode)}); refused before opening it")


def make_dirs(directory):
    """mkdir -p of directory, as the harness makes output.path's folders, never through a link:
    each missing folder is made by mkdir (which never follows one) and checked with lstat to be a
    folder, so a symbolic link (dangling or not) or a file where a folder is to be made is a
    UserError naming it. Folders already there are the caller's path, used as they are. Returns
    the folders it made, outermost first (for the caller to remove again if it writes nothing)."""
    missing = []
    while directory and not os.path.isdir(directory):
        missing.append(directory)
        parent = os.path.dirname(directory)
        if parent == directory:
            break
        directory = parent
    made = []
    for path in reversed(missing):
        try:
            os.mkdir(path)
            made.append(path)
        except FileExistsError:
            pass
        except OSError as e:
            raise UserError(f"{path}: cannot create the folder: {e.strerror}") from None
        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode):
            raise UserError(_refusal(path, st.st_mode) if stat.S_ISLNK(st.st_mode)
                            else f"{path}: it is {kind(st.st_mode)}, not a folder; refused")
    return made
