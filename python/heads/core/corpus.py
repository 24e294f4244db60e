"""heads.core.corpus: subword corpora for the `tokens` task: a SentencePiece BPE model trained on text
files, and nanoGPT-style train.bin / val.bin (little-endian uint16 ids) encoded with it.

Knows nothing of results files or runs. The harness reads the .model itself (src/data/tokenizer.c)
and supports exactly what make_corpus trains: BPE, the identity normalizer (no NFKC), byte
fallback, no user-defined symbols.

Each non-empty line of the corpus is one SentencePiece sentence: line breaks become word
boundaries (the "▁" that starts every line), so the token stream has no newline token.
"""
import io
import os
import re
import tempfile

from .cli import UserError

MAX_VOCAB = 65536  # ids are stored as uint16


def read_lines(paths):
    """The non-empty lines of the files, in order (a file named twice, e.g. through a symlink,
    is read once); (lines, total bytes)."""
    seen, lines, size = set(), [], 0
    for path in paths:
        real = os.path.realpath(path)
        if real in seen:
            continue
        seen.add(real)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise UserError(f"{path}: cannot read: {e.strerror}")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise UserError(f"{path}: not UTF-8 text (byte {e.start}); convert it first, "
                              "e.g. iconv -t UTF-8")
        size += len(data)
        lines += [line for line in text.splitlines() if line.strip()]
    return lines, size


def split_lines(lines, val_fraction):
    """(train, val): the last val_fraction of the lines are held out (at least one each)."""
    n_val = max(1, int(round(len(lines) * val_fraction)))
    if len(lines) - n_val < 1:
        raise UserError(f"the corpus has {len(lines)} non-empty line(s); it needs at least 2 "
                          "(one to train on, one to hold out)")
    return lines[:-n_val], lines[-n_val:]


def train_bpe(lines, vocab, where):
    """The bytes of a SentencePiece BPE model with `vocab` pieces trained on lines."""
    import sentencepiece as spm
    if not 256 + 4 <= vocab <= MAX_VOCAB:
        raise UserError(f"--vocab {vocab}: must be in [260, {MAX_VOCAB}] (256 byte pieces, "
                          "<unk>, <s>, </s> and at least one merge; ids are uint16)")
    model = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(lines), model_writer=model, vocab_size=vocab, model_type="bpe",
            normalization_rule_name="identity", byte_fallback=True, character_coverage=1.0,
            max_sentence_length=1 << 16, num_threads=1, minloglevel=2)
    except RuntimeError as e:
        m = re.search(r"Vocabulary size (?:is )?too high \((\d+)\).*?<= (\d+)", str(e))
        if m:
            raise UserError(f"{where}: too small for --vocab {vocab}: SentencePiece can make at most "
                              f"{m.group(2)} pieces from it; use --vocab {m.group(2)} or less, or a "
                              "larger corpus")
        raise UserError(f"{where}: SentencePiece training failed: {str(e).splitlines()[0]}")
    return model.getvalue()


def encode(model_bytes, lines, progress=None):
    """Token ids of lines, one after the other, as a uint16 numpy array."""
    import numpy as np
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_proto=model_bytes)
    ids = []
    step = max(1, len(lines) // 10)
    for i, line in enumerate(lines):
        ids += sp.encode(line)
        if progress and (i + 1) % step == 0:
            progress(i + 1, len(lines))
    return np.asarray(ids, dtype="<u2")


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomically(outdir, files):
    """files: {name: bytes}. Each is written to a temporary name in outdir and renamed into
    place only after all are written, so a failure leaves no half-written file."""
    os.makedirs(outdir, exist_ok=True)
    temps = {}
    try:
        for name, data in files.items():
            fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=outdir)
            temps[name] = tmp
            os.chmod(tmp, 0o666 & ~_umask())
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
    except OSError as e:
        for tmp in temps.values():
            if os.path.exists(tmp):
                os.unlink(tmp)
        raise UserError(f"{outdir}: cannot write: {e.strerror}")
    for name, tmp in temps.items():
        os.replace(tmp, os.path.join(outdir, name))


def make_corpus(paths, vocab, outdir, val_fraction=0.1, say=print):
    """Train the tokenizer on the head of the corpus, encode both parts, write tokenizer.model,
    train.bin and val.bin into outdir. Returns {"train": n, "val": n, "vocab": vocab, "bytes": n}."""
    if not 256 + 4 <= vocab <= MAX_VOCAB:
        raise UserError(f"--vocab {vocab}: must be in [260, {MAX_VOCAB}] (256 byte pieces, "
                        "<unk>, <s>, </s> and at least one merge; ids are uint16)")
    lines, size = read_lines(paths)
    where = paths[0] if len(paths) == 1 else f"{paths[0]} (+{len(paths) - 1} files)"
    if not lines:
        raise UserError(f"{where}: no text (every line is empty)")
    train, val = split_lines(lines, val_fraction)
    say(f"tokenize: training a {vocab}-piece SentencePiece BPE model on {len(train)} lines "
        f"({size / 1000:.0f} kB of text, the last {len(val)} lines held out)")
    model = train_bpe(train, vocab, where)
    train_ids = encode(model, train, lambda i, n: say(f"tokenize: encoding {100 * i // n}%", end="\r"))
    val_ids = encode(model, val)
    write_atomically(outdir, {"tokenizer.model": model, "train.bin": train_ids.tobytes(),
                              "val.bin": val_ids.tobytes()})
    return {"train": len(train_ids), "val": len(val_ids), "vocab": vocab, "bytes": size}
