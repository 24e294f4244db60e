#!/usr/bin/python3
# suite: scripts/corpus: documentation to plain text, deduplicated, licences named
"""scripts/corpus's steps on a planted folder, then (as root, with Debian's archive reachable) the
script itself on two small packages.

usage: /usr/bin/python3 tests/test_corpus.py [--keep]

Checks (one line each, then "N passed, M failed"):
  - HTML: the page's prose and its <pre> code kept (indentation too), entities decoded; scripts,
    styles, <nav>, Sphinx's sidebar and "related" bars and DocBook's navheader left out;
  - info: one document per node, without the node header, the menu, heading underlines, the
    index node and the tag table (a gzipped file);
  - POD: =head and =item text kept, other commands and B<>, C<< >>, L<text|link>, E<gt>, X<>
    removed, verbatim paragraphs kept;
  - dedup: of a page, its exact copy and a copy differing only in case, punctuation and spacing,
    one is kept (the first), counted as one exact and one near duplicate; a page under
    --min-chars is dropped as short; kept documents are numbered per package;
  - licences: a DEP-5 copyright file's short License names, each once, sentences left out; a
    free-form file gives none (the script then names the licence itself);
  - scripts/corpus as an unprivileged user: exit 2, one line saying to run it as root, nothing
    written; an unknown --packages name: exit 2, one line;
  - as root with the archive reachable (skipped otherwise): scripts/corpus --packages
    gnu-standards,maint-guide installs them, writes text/, manifest.json naming each package's
    version and licences, and train/val/test token files whose documents are the text files.
"""
import gzip
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.dont_write_bytecode = True
sys.path.insert(0, HERE)
from checks import check, temp_suite  # noqa: E402
from heads.core import doctext  # noqa: E402

CORPUS = [sys.executable, os.path.join(ROOT, "scripts", "corpus")]
PROSE = ("The quick brown fox jumps over the lazy dog, and the documentation of this imaginary module "
         "explains at some length why a fox would do such a thing on an ordinary afternoon. ")
PAGE = f"""<!DOCTYPE html><html><head><title>T</title><style>p {{ color: red }}</style>
<script>var x = "script text";</script></head><body>
<div class="related" role="navigation"><ul><li><a href="a.html">previous</a></li></ul></div>
<div class="navheader">Chapter 3. Header bar</div>
<nav>site navigation</nav>
<div class="body"><h1>Foxes &amp; dogs<a class="headerlink" href="#x">¶</a></h1>
<p>{PROSE}</p><p>Second   paragraph
 over two lines.</p>
<pre>def jump(fox):
    return fox.over(dog)</pre>
</div><div class="sphinxsidebar"><h3>Quick search</h3></div>
<div class="footer">© footer text</div></body></html>
"""
INFO = ("This is x.info, produced by makeinfo.\n\n\x1f\nFile: x.info,  Node: Top,  Next: Foxes,  Up: (dir)\n\n"
        "Top node\n********\n\nThe top node's text.\n\n* Menu:\n\n* Foxes::   About foxes.\n\n"
        "\x1f\nFile: x.info,  Node: Foxes,  Next: Index,  Prev: Top,  Up: Top\n\n1 Foxes\n=======\n\n"
        f"{PROSE}\n\n\x1f\nFile: x.info,  Node: Index,  Prev: Foxes,  Up: Top\n\nIndex\n*****\n\n* fox: Foxes.\n\n"
        "\x1f\nTag Table:\nNode: Top\x7f37\nNode: Foxes\x7f200\n\x1f\nEnd Tag Table\n")
POD = ("=pod\n\n=head1 NAME\n\nperlfox - B<foxes> in C<< $a->jump >> and L<the dog|perldog> E<gt> X<fox>cats\n\n"
       "=over 4\n\n=item jump\n\nJumps.\n\n=back\n\n    my $verbatim = 1;\n\n=begin html\n\n<b>raw</b>\n\n"
       "=end html\n\n=cut\n")
DEP5 = ("Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\nFiles: *\n"
        "License: GPL-2+\n\nFiles: doc/*\nLicense: GFDL-1.3+\n\nFiles: x\nLicense: GPL-2+\n\n"
        "License: Permission is hereby granted, free of charge, to any person obtaining a copy\n")


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=1200, **kw)


def one_line_error(r, what, needle, must_not_exist=()):
    lines = r.stderr.strip().splitlines()
    ok = r.returncode == 2 and len(lines) == 1 and needle in lines[0] and "Traceback" not in r.stderr \
        and not any(os.path.exists(p) for p in must_not_exist)
    check(f"bad input: {what}: exit 2, one line, nothing written", ok, f"exit {r.returncode}: {r.stderr[-300:]}")


def plant(tmp):
    folder = os.path.join(tmp, "planted")
    os.makedirs(folder)
    files = {"page.html": PAGE, "copy.html": PAGE,
             "near.html": PAGE.replace(PROSE, PROSE.upper().replace(",", " ;")).replace("over two", "over  two"),
             "stub.html": "<html><body><p>Moved.</p></body></html>", "perlfox.pod": POD}
    for name, text in files.items():
        with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
            f.write(text)
    with gzip.open(os.path.join(folder, "x.info.gz"), "wt", encoding="utf-8") as f:
        f.write(INFO)
    return folder


def check_conversion(folder):
    text = doctext.documents_of("html", os.path.join(folder, "page.html"))[0][1]
    kept = all(x in text for x in ("Foxes & dogs", PROSE.strip(), "Second paragraph over two lines.",
                                   "def jump(fox):\n    return fox.over(dog)"))
    dropped = [x for x in ("color", "script text", "previous", "Header bar", "site navigation", "Quick search",
                           "footer text", "¶", "<p>") if x in text]
    check("HTML: prose, headings and <pre> code kept; scripts, styles, navigation, sidebar, footer dropped",
          kept and not dropped and "\n\n\n" not in text, f"{dropped} in {text!r}")
    nodes = doctext.documents_of("info", os.path.join(folder, "x.info.gz"))
    names = [w.split("#")[1] for w, _ in nodes]
    body = "".join(t for _, t in nodes)
    check("info: one document per node (Top, Foxes), no index, tag table, menu, header or underlines",
          names == ["Top", "Foxes"] and PROSE.strip() in body and not any(
              x in body for x in ("File: x.info", "* Menu", "****", "===", "Tag Table", "fox: Foxes")), repr(nodes))
    pod = doctext.documents_of("pod", os.path.join(folder, "perlfox.pod"))[0][1]
    want = "NAME\n\nperlfox - foxes in $a->jump and the dog > cats\n\njump\n\nJumps.\n\n    my $verbatim = 1;\n"
    check("POD: headings and items as text, formatting codes and commands removed, verbatim kept", pod == want,
          repr(pod))


def check_dedup(folder):
    entries = [("pkg-a", "html", os.path.join(folder, n)) for n in ("page.html", "copy.html", "near.html",
                                                                   "stub.html")]
    entries += [("pkg-b", "info", os.path.join(folder, "x.info.gz")), ("pkg-b", "pod",
                                                                        os.path.join(folder, "perlfox.pod"))]
    written = {}
    r = doctext.write_documents(entries, 20, lambda rel, text: written.__setitem__(rel, text))
    sources = [os.path.basename(d["source"]) for d in r["kept"]]
    check("dedup: a page kept once (its exact copy and its case/punctuation/spacing variant dropped), "
          "a stub under --min-chars dropped, documents numbered per package",
          sources == ["page.html", "x.info.gz#Top", "x.info.gz#Foxes", "perlfox.pod"] and
          (r["exact_duplicates"], r["near_duplicates"], r["short"]) == (1, 1, 1) and
          sorted(written) == ["pkg-a/00001.txt", "pkg-b/00001.txt", "pkg-b/00002.txt", "pkg-b/00003.txt"],
          f"{sources} {r['exact_duplicates'], r['near_duplicates'], r['short']} {sorted(written)}")


def check_licences():
    got = doctext.copyright_licences(DEP5)
    check("licences: a DEP-5 file's short License names once each; a free-form file none",
          got == ["GPL-2+", "GFDL-1.3+"] and doctext.copyright_licences("This package was debianized by\n") == [],
          str(got))


def check_script(tmp):
    out = os.path.join(tmp, "refused")
    one_line_error(run([*CORPUS, "--packages", "gnu-standards,nonesuch", "--out", out]), "an unknown --packages",
                   "nonesuch", [out])
    if os.geteuid() == 0 and shutil.which("setpriv"):
        # a copy the unprivileged user can read: the checkout may sit in root's 0700 home
        copy = os.path.join(tmp, "checkout")
        shutil.copytree(os.path.join(ROOT, "python"), os.path.join(copy, "python"),
                        ignore=shutil.ignore_patterns("__pycache__"))
        os.makedirs(os.path.join(copy, "scripts"))
        shutil.copy(CORPUS[1], os.path.join(copy, "scripts"))
        for d, dirs, files in os.walk(tmp):
            os.chmod(d, 0o777)
            for f in files:
                os.chmod(os.path.join(d, f), 0o644)
        one_line_error(run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", CORPUS[0],
                            os.path.join(copy, "scripts", "corpus"), "--packages", "gnu-standards", "--out", out],
                           cwd=tmp), "scripts/corpus not as root", "run it as root", [out])
    else:
        r = run([*CORPUS, "--packages", "gnu-standards", "--out", out])
        one_line_error(r, "scripts/corpus not as root", "run it as root", [out])
    if os.geteuid() != 0 or run(["apt-get", "update", "-q"]).returncode != 0:
        print("# skipped: scripts/corpus --packages gnu-standards,maint-guide (needs root and Debian's archive)")
        return
    out = os.path.join(tmp, "debian")
    r = run([*CORPUS, "--packages", "gnu-standards,maint-guide", "--vocab", "512", "--out", out])
    manifest = json.load(open(os.path.join(out, "manifest.json"))) if r.returncode == 0 else {}
    corpus = json.load(open(os.path.join(out, "corpus.json"))) if r.returncode == 0 else {}
    names = {p["name"]: p for p in manifest.get("packages", [])}
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(os.path.join(out, "text")) for f in fs)
    check("scripts/corpus --packages gnu-standards,maint-guide: manifest names each package's version and "
          "licences, text/ has its documents, tokenize split them by document",
          r.returncode == 0 and set(names) == {"gnu-standards", "maint-guide"} and
          all(p["version"] and p["licences"] and p["documents"] > 0 for p in names.values()) and
          len(files) == len(manifest["kept"]) and
          {s["path"] for s in corpus["sources"]} == set(files) and
          all(os.path.exists(os.path.join(out, f"{k}.bin")) for k in ("train", "val", "test")),
          (r.stdout + r.stderr)[-400:])


def suite(harness, tmp):
    folder = plant(tmp)
    check_conversion(folder)
    check_dedup(folder)
    check_licences()
    check_script(tmp)


def main(argv):
    return temp_suite(argv, "heads-corpus-", suite)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
