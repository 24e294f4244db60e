"""heads.core.corpus: subword corpora for the `tokens` task: a SentencePiece BPE model trained on a
sample of the training documents, and train.bin / val.bin / test.bin encoded with it in a stream,
in the header format src/data/token_file.h reads (and `harness data-check` verifies).

A document is one input file (a folder gives every file under it), except that a file larger than
piece_bytes, or the only file given, is cut into pieces (pieces()). The split is by document: the
documents, ordered by their SHA-1, give the first val_fraction to validation, the next
test_fraction to test and the rest to training, so a held-out document is never seen in training
and the split does not depend on the order the files are named in; a document whose bytes repeat
an earlier one is dropped. Each non-empty line is one SentencePiece sentence: line breaks become
word boundaries (the "▁" that starts every line), so the token stream has no newline token.

Memory is bounded by the sample (the tokenizer is trained on at most sample_bytes of training
lines, taken evenly through them), one chunk of lines per encoding process and the largest
document (read whole to check it is UTF-8; at most about 2·piece_bytes unless a single line is
longer): never by the corpus.
Knows nothing of results files or runs. The harness reads the .model itself (src/data/tokenizer.c)
and supports exactly what train_bpe trains: BPE, the identity normalizer (no NFKC), byte
fallback, no user-defined symbols.
"""
import collections
import hashlib
import io
import json
import multiprocessing
import os
import re
import struct
import tempfile
import time
import zlib
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from .cli import UserError

MAX_VOCAB = 1 << 20  # model.vocab_size's limit; above 65536 ids are uint32
MAGIC, VERSION, HEADER_BYTES = b"HEADSTOK", 1, 64  # src/data/token_file.h
CHUNK_BYTES = 1 << 20  # lines an encoding process takes at a time
PIECE_BYTES = 1_000_000  # a longer file is cut into documents of about this size
ONE_FILE_PIECES = 20  # a corpus of one file is cut into about this many documents
Doc = collections.namedtuple("Doc", "path start size sha1")  # a document: a file or a piece of one


def header(width, vocab, count, crc):
    """The 64-byte header of a token file (src/data/token_file.h's layout)."""
    return struct.pack("<8sIIIIQI", MAGIC, VERSION, width, vocab, HEADER_BYTES, count, crc).ljust(HEADER_BYTES,
                                                                                                  b"\0")


def documents(paths):
    """The files named, a folder giving every regular file under it (sorted), each once."""
    seen, out = set(), []
    for path in paths:
        if os.path.isdir(path):
            found = sorted(os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs)
        elif os.path.exists(path):
            found = [path]
        else:
            raise UserError(f"{path}: cannot read: No such file or directory")
        for f in found:
            real = os.path.realpath(f)
            if real not in seen and os.path.isfile(real):
                seen.add(real)
                out.append(f)
    return out


def read_text(path, start=0, size=-1):
    """A document's text and bytes (size bytes from start; -1: to the end); UserError when it
    cannot be read or is not UTF-8."""
    try:
        with open(path, "rb") as f:
            f.seek(start)
            data = f.read(size)
    except OSError as e:
        raise UserError(f"{path}: cannot read: {e.strerror}")
    try:
        return data.decode("utf-8"), data
    except UnicodeDecodeError as e:
        raise UserError(f"{path}: not UTF-8 text (byte {start + e.start}); convert it first, e.g. iconv -t UTF-8")


def pieces(path, piece_bytes):
    """The documents of one file: the file itself when it is at most piece_bytes long, else pieces
    cut at blank lines: each ends at the first blank line once it holds piece_bytes, or at the first
    line end once it holds 2·piece_bytes (a text without paragraphs). Read in a stream: one piece
    in memory at a time."""
    try:
        f = open(path, "rb")
    except OSError as e:
        raise UserError(f"{path}: cannot read: {e.strerror}")
    with f:
        start, part, size = 0, [], 0
        for line in f:
            part.append(line)
            size += len(line)
            if size >= piece_bytes and (not line.strip() or size >= 2 * piece_bytes):
                yield _doc(path, start, b"".join(part))
                start, part, size = start + size, [], 0
        if part or start == 0:
            yield _doc(path, start, b"".join(part))


def _doc(path, start, data):
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(f"{path}: not UTF-8 text (byte {start + e.start}); convert it first, e.g. iconv -t UTF-8")
    return Doc(path, start, len(data), hashlib.sha1(data).hexdigest())


def piece_size(files, piece_bytes):
    """The piece size for these files: piece_bytes, or for a corpus of one file its size over
    ONE_FILE_PIECES when that is less, so it still gives enough documents to split."""
    if len(files) != 1:
        return piece_bytes
    try:
        size = os.path.getsize(files[0])
    except OSError as e:
        raise UserError(f"{files[0]}: cannot read: {e.strerror}")
    return max(1, min(piece_bytes, size // ONE_FILE_PIECES))


def split_documents(paths, val_fraction, test_fraction, piece_bytes=PIECE_BYTES):
    """{"train"|"val"|"test": [Doc]} by the SHA-1 order (module docstring), and the dropped
    duplicates. Each held-out split with a fraction > 0 gets at least one document."""
    docs, by_hash, duplicates = [], {}, []
    cut = piece_size(paths, piece_bytes)
    for path in paths:
        for doc in pieces(path, cut):
            if doc.sha1 in by_hash:
                duplicates.append({"path": path, "start": doc.start, "same_as": by_hash[doc.sha1]})
                continue
            by_hash[doc.sha1] = path
            docs.append(doc)
    docs.sort(key=lambda d: d.sha1)
    n_val = max(1, round(len(docs) * val_fraction)) if val_fraction > 0 else 0
    n_test = max(1, round(len(docs) * test_fraction)) if test_fraction > 0 else 0
    if len(docs) - n_val - n_test < 1 or not any(d.size for d in docs):
        raise UserError(f"{paths[0]}: {len(docs)} distinct document(s) after cutting at blank lines; the split is "
                        f"by document, so it needs at least {n_val + n_test + 1}: give more text")
    return {"val": docs[:n_val], "test": docs[n_val:n_val + n_test], "train": docs[n_val + n_test:]}, duplicates


def lines_of(doc):
    return [line for line in read_text(doc.path, doc.start, doc.size)[0].splitlines() if line.strip()]


def sample_lines(train_docs, sample_bytes):
    """At most sample_bytes of the training lines, every k-th line so the sample spans them all."""
    total = sum(d.size for d in train_docs)
    every = max(1, -(-total // max(1, sample_bytes)))
    sample, size, i = [], 0, 0
    for doc in train_docs:
        for line in lines_of(doc):
            n = len(line.encode("utf-8")) + 1
            if i % every == 0 and size + n <= sample_bytes:
                sample.append(line)
                size += n
            i += 1
    return sample, {"bytes": size, "lines": len(sample), "every_kth_line": every, "of_bytes": total}


def train_bpe(lines, vocab, where, threads=1):
    """The bytes of a SentencePiece BPE model with `vocab` pieces trained on lines."""
    import sentencepiece as spm
    if not 256 + 4 <= vocab <= MAX_VOCAB:
        raise UserError(f"--vocab {vocab}: must be in [260, {MAX_VOCAB}] (256 byte pieces, "
                          "<unk>, <s>, </s> and at least one merge)")
    model = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(lines), model_writer=model, vocab_size=vocab, model_type="bpe",
            normalization_rule_name="identity", byte_fallback=True, character_coverage=1.0,
            max_sentence_length=1 << 16, num_threads=threads, minloglevel=2)
    except RuntimeError as e:
        m = re.search(r"Vocabulary size (?:is )?too high \((\d+)\).*?<= (\d+)", str(e))
        if m:
            raise UserError(f"{where}: too small for --vocab {vocab}: SentencePiece can make at most "
                              f"{m.group(2)} pieces from it; use --vocab {m.group(2)} or less, or a "
                              "larger corpus")
        raise UserError(f"{where}: SentencePiece training failed: {str(e).splitlines()[0]}")
    return model.getvalue()


_processor = None


def _start_worker(model_bytes):
    global _processor
    import sentencepiece as spm
    _processor = spm.SentencePieceProcessor(model_proto=model_bytes)


def _encode_chunk(args):
    """The ids of a chunk of lines, as the little-endian bytes of the file's id type."""
    import numpy as np
    lines, dtype = args
    ids = [i for line in lines for i in _processor.encode(line)]
    return np.asarray(ids, dtype=dtype).tobytes()


def chunks(docs, dtype):
    """(lines, dtype, bytes of text) of at most CHUNK_BYTES each, document after document."""
    for doc in docs:
        part, size = [], 0
        for line in lines_of(doc):
            part.append(line)
            size += len(line) + 1
            if size >= CHUNK_BYTES:
                yield (part, dtype), size
                part, size = [], 0
        if part:
            yield (part, dtype), size


Staged = collections.namedtuple("Staged", "tmp name")  # a file written, waiting for its rename


class TokenWriter:
    """A token file written under a temporary name in outdir: the header last, at offset 0."""

    def __init__(self, outdir, name):
        fd, self.tmp = tempfile.mkstemp(prefix=f".{name}.", dir=outdir)
        os.chmod(self.tmp, 0o666 & ~_umask())
        self.f, self.name, self.count, self.crc = os.fdopen(fd, "wb"), name, 0, 0
        self.f.write(bytes(HEADER_BYTES))

    def write(self, data, width):
        self.f.write(data)
        self.crc = zlib.crc32(data, self.crc)
        self.count += len(data) // width

    def finish(self, width, vocab):
        self.f.seek(0)
        self.f.write(header(width, vocab, self.count, self.crc))
        self.f.flush()
        os.fsync(self.f.fileno())
        self.f.close()


def encode_splits(model, splits, outdir, vocab, jobs, say, writers):
    """Encode every split's documents in a stream on `jobs` processes (at most 2·jobs chunks in
    flight) into writers[split] (TokenWriter, added as each starts, so a failure can remove them);
    the id width."""
    dtype, width = ("<u2", 2) if vocab <= 65536 else ("<u4", 4)
    total = sum(d.size for docs in splits.values() for d in docs)
    done, start = 0, time.monotonic()
    pool = ProcessPoolExecutor(jobs, multiprocessing.get_context("fork"), _start_worker, (model,))
    try:  # a worker that dies breaks the pool (an error), where multiprocessing.Pool would wait forever
        for name, docs in splits.items():
            w = writers[name] = TokenWriter(outdir, f"{name}.bin")
            pending = collections.deque()
            for args, size in chunks(docs, dtype):
                pending.append((pool.submit(_encode_chunk, args), size))
                while len(pending) > 2 * jobs or (pending and pending[0][0].done()):
                    result, n = pending.popleft()
                    w.write(result.result(), width)
                    done += n
                    rate = done / max(1e-9, time.monotonic() - start) / 1e6
                    say(f"tokenize: encoding {100 * done // max(1, total)}% ({done / 1e6:.0f} of "
                        f"{total / 1e6:.0f} MB, {rate:.1f} MB/s)", end="\r")
            while pending:
                result, n = pending.popleft()
                w.write(result.result(), width)
                done += n
            w.finish(width, vocab)
    except BrokenProcessPool:
        raise UserError(f"{outdir}: an encoding process died (killed, or out of memory); nothing written")
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    return width


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def make_corpus(paths, vocab, outdir, val_fraction=0.05, test_fraction=0.05, sample_bytes=20_000_000, jobs=2,
                say=print, piece_bytes=PIECE_BYTES):
    """Split the documents, train the tokenizer on a sample of the training ones, encode every
    split, write tokenizer.model, train.bin, val.bin, test.bin (test_fraction > 0) and corpus.json
    into outdir, each renamed into place only once all are written. Returns the record."""
    if not 256 + 4 <= vocab <= MAX_VOCAB:
        raise UserError(f"--vocab {vocab}: must be in [260, {MAX_VOCAB}] (256 byte pieces, "
                        "<unk>, <s>, </s> and at least one merge)")
    files = documents(paths)
    where = paths[0] if len(paths) == 1 else f"{paths[0]} (+{len(paths) - 1} more)"
    if not files:
        raise UserError(f"{where}: no files")
    splits, duplicates = split_documents(files, val_fraction, test_fraction, piece_bytes)
    sample, sample_info = sample_lines(splits["train"], sample_bytes)
    if not sample:
        raise UserError(f"{where}: no text in the training documents (every line is empty)")
    say(f"tokenize: training a {vocab}-piece SentencePiece BPE model on {sample_info['bytes'] / 1e6:.1f} MB "
        f"({len(sample)} lines) of {sample_info['of_bytes'] / 1e6:.1f} MB in {len(splits['train'])} training "
        f"documents ({len(splits['val'])} validation, {len(splits['test'])} test held out)")
    model = train_bpe(sample, vocab, where, jobs)
    del sample
    os.makedirs(outdir, exist_ok=True)
    if not splits["test"]:
        del splits["test"]
    writers = {}
    try:
        width = encode_splits(model, splits, outdir, vocab, jobs, say, writers)
        record = {"format": "src/data/token_file.h version 1", "vocab": vocab, "id_type": f"uint{8 * width}",
                  "tokenizer": {"type": "SentencePiece BPE", "normalizer": "identity", "byte_fallback": True},
                  "sample": sample_info, "split_rule": "documents by SHA-1; val_fraction, then test_fraction",
                  "document_rule": "a file, or a piece of one cut at blank lines (heads.core.corpus.pieces)",
                  "piece_bytes": piece_size(files, piece_bytes),
                  "val_fraction": val_fraction, "test_fraction": test_fraction, "duplicates_dropped": duplicates,
                  "splits": {name: {"file": f"{name}.bin", "documents": len(splits[name]),
                                    "bytes": sum(d.size for d in splits[name]), "tokens": w.count,
                                    "crc32": f"{w.crc:08x}"} for name, w in writers.items()},
                  "sources": [{"path": d.path, "start": d.start, "bytes": d.size, "sha1": d.sha1, "split": name}
                              for name, docs in splits.items() for d in docs]}
        small = {"tokenizer.model": model, "corpus.json": (json.dumps(record, indent=1) + "\n").encode()}
        for name, data in small.items():
            fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=outdir)
            os.chmod(tmp, 0o666 & ~_umask())
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            writers[name] = Staged(tmp, name)
    except BaseException as e:
        for w in writers.values():
            if os.path.exists(w.tmp):
                os.unlink(w.tmp)
        if isinstance(e, OSError):
            raise UserError(f"{outdir}: cannot write: {e.strerror}")
        raise
    for w in writers.values():
        os.replace(w.tmp, os.path.join(outdir, w.name))
    return record
