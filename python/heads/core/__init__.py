"""heads.core: what every part of the package shares: the command line (cli), harness configs with
line:col marks (configs), the ./harness binary (harness), numbers and words as printed (words),
statistics (stats), a probe's tokens as text (tokens), SentencePiece corpora (corpus) and the one
rule for opening a path someone else may have put a link or a FIFO at (safefile).

May import: nothing of heads but its top (require)
"""
