"""heads.core.tokens: how a probe's tokens are shown to a person (axis labels in scripts/plot, the token
strip of scripts/report): bytes for text, the tokenizer's pieces for subword runs, and readable
names for the synthetic tasks' ids.

Knows the tasks' vocabularies as docs/configuration.md's Tasks section lays them out (induction: token 0 is
BOS; two_source: BOS, '=', the a and b symbols, then the S*S pair tokens). Knows nothing of
plotting or HTML; never writes.
"""

VISIBLE = {" ": "␣", "\n": "↵", "\t": "→", "\r": "␍"}


def byte_label(byte):
    """A byte (or one-character string) as a one-character label: visible space and newline."""
    c = chr(byte) if isinstance(byte, int) else byte
    return VISIBLE.get(c, c if c.isprintable() else "·")


def two_source_symbols(vocab_size):
    """S, the symbols per slot of the two_source task: the largest with 2 + 2S + S^2 <= V."""
    s = 1
    while 2 + 2 * (s + 1) + (s + 1) * (s + 1) <= vocab_size:
        s += 1
    return s


def piece_label(piece):
    """A tokenizer piece (SentencePiece marks a leading space with U+2581) shown as text."""
    return "".join(VISIBLE.get(c, c) for c in piece.replace("\u2581", " "))


def token_labels(task, vocab_size, tokens, pieces=None):
    """One short label per token id of a probe.

    task: the run's data.task; tokens: ints; pieces: the tokenizer's pieces by id when the
    results file records them (subword runs), else None."""
    tokens = [int(t) for t in tokens]
    if pieces is not None:
        return [piece_label(pieces[t]) if 0 <= t < len(pieces) else str(t) for t in tokens]
    if task == "text":
        return [byte_label(t) if 0 <= t < 256 else str(t) for t in tokens]
    if task == "two_source":
        s = two_source_symbols(vocab_size)
        out = []
        for t in tokens:
            if t == 0:
                out.append("BOS")
            elif t == 1:
                out.append("=")
            elif t < 2 + s:
                out.append(f"a{t - 2}")
            elif t < 2 + 2 * s:
                out.append(f"b{t - 2 - s}")
            else:
                a, b = divmod(t - 2 - 2 * s, s)
                out.append(f"({a},{b})")
        return out
    if task == "induction":
        return ["BOS" if t == 0 else str(t) for t in tokens]
    return [str(t) for t in tokens]


def task_legend(task, vocab_size):
    """One sentence saying what the labels mean, for a figure's or a page's caption."""
    if task == "text":
        return "tokens are bytes (␣ space, ↵ newline, · unprintable)"
    if task == "two_source":
        s = two_source_symbols(vocab_size)
        return (f"tokens: BOS, '=' (the query), a0…a{s - 1} and b0…b{s - 1} (the two sources), "
                "(a,b) the pair token to predict")
    if task == "induction":
        return "tokens are symbol ids (BOS = token 0); the probe repeats a random segment"
    return "tokens are ids of the token file"
