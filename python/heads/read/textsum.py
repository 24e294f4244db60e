"""heads.read.textsum: the text checksum of a results file (format 1.4), as src/results/results_text.c
computes it: one CRC-32 over every string of the file (every string attribute, config_yaml and
the /config strings included, and every string dataset), which HDF5 itself checksums nowhere
(docs/results-format.md#checksums-format-13 says how, byte for byte). heads.read.verify's reader child checks
it (text_problem) for every file a command reads; tests that edit a file on purpose reseal it.

Needs only h5py and numpy: it runs inside that child, which imports nothing else of heads.
"""
import struct
import zlib

import h5py
import numpy


def raw(oid, is_attr):
    """The bytes of every string of an attribute or dataset (h5py ids), undecoded: a damaged byte
    need not be UTF-8."""
    t = oid.get_type()
    if t.is_variable_str():
        buf = numpy.empty(oid.shape, dtype=h5py.string_dtype("ascii"))
        mtype = h5py.h5t.py_create(buf.dtype)
        oid.read(buf, mtype=mtype) if is_attr else oid.read(h5py.h5s.ALL, h5py.h5s.ALL, buf, mtype=mtype)
        return [b or b"" for b in buf.ravel()]
    size = t.get_size()
    buf = numpy.empty(oid.shape, dtype="S%d" % size)
    oid.read(buf) if is_attr else oid.read(h5py.h5s.ALL, h5py.h5s.ALL, buf)
    data = buf.tobytes()
    return [data[i * size:(i + 1) * size] for i in range(buf.size)]


def text_sum(f):
    """The sum of an open file: records "PATH@ATTR" and "PATH" (a string dataset), sorted by
    their bytes; each the key, a NUL, the element count, each element's length and bytes."""
    records = []

    def add(key, oid, is_attr):
        if oid.get_type().get_class() != h5py.h5t.STRING:
            return
        elements = raw(oid, is_attr)
        records.append((key.encode("utf-8", "surrogateescape"), struct.pack("<Q", len(elements))
                        + b"".join(struct.pack("<Q", len(e)) + e for e in elements)))

    def attrs(path, obj):
        for name in obj.attrs:
            add(path + "@" + name, obj.attrs.get_id(name), True)
    attrs("/", f)

    def visit(name, obj):
        attrs("/" + name, obj)
        if isinstance(obj, h5py.Dataset):
            add("/" + name, obj.id, False)
    f.visititems(visit)
    crc = 0
    for key, data in sorted(records):
        crc = zlib.crc32(data, zlib.crc32(key + b"\0", crc))
    return crc


def text_problem(f):
    """Why an open file's strings are not what its text_checksum says ('' when they are)."""
    if "text_checksum" not in f.attrs:
        # before 1.4 there is none; a writer still running has none yet
        version = (raw(f.attrs.get_id("format_version"), True) or [b""])[0] \
            if "format_version" in f.attrs else b""
        status = (raw(f.attrs.get_id("status"), True) or [b""])[0] if "status" in f.attrs else b""
        major, _, minor = version.decode("ascii", "replace").partition(".")
        if major == "1" and minor.isdigit() and int(minor) >= 4 and status != b"running":
            return "it has no text_checksum (every closed file of format 1.4 has one)"
        return ""
    if int(f.attrs["text_checksum"]) != text_sum(f):
        return ("its text checksum fails: a string it holds (config_yaml, a /config value, a "
                "status, a label) is not what the harness wrote")
    return ""


def reseal(path):
    """Write a file's text_checksum anew after its strings were edited on purpose (tests)."""
    with h5py.File(path, "r+") as f:
        if "text_checksum" in f.attrs:
            del f.attrs["text_checksum"]
        crc = text_sum(f)
        f.attrs.create("text_checksum", crc, dtype=numpy.uint32)
