"""heads.core.doctext: plain-text documents from installed documentation, for scripts/corpus:
HTML pages (Python's html.parser; one document per page), GNU info manuals (one per node), Perl
POD (one per file); the key under which two documents count as the same (near-exact
duplicates); the licence names a Debian copyright file declares.

Conversion keeps prose and code blocks and drops what is not text of the page: HTML scripts,
styles, navigation bars, sidebars and footers (tags and the class names Sphinx, DocBook and
asciidoc give them), info node headers, menus and heading underlines, POD commands and
formatting codes. Paragraphs are separated by one blank line, which scripts/tokenize's pieces
cut at.
Knows nothing of apt, packages' layout, tokenizers or the harness.
"""
import gzip
import hashlib
import html
import html.parser
import re

SKIP_TAGS = {"script", "style", "nav", "header", "footer", "head", "noscript", "svg", "button", "form"}
SKIP_CLASSES = {"sphinxsidebar", "related", "footer", "navheader", "navfooter", "headerlink", "toc",
                "breadcrumb", "navigation", "sidebar", "mobile-nav", "toc-title"}
BLOCK_TAGS = {"p", "div", "br", "li", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "tr", "table", "dt", "dd",
              "section", "blockquote", "ul", "ol", "dl", "article", "main", "body", "hr", "figure", "caption"}
VOID_TAGS = {"br", "hr", "img", "meta", "link", "input", "area", "base", "col", "embed", "source", "wbr"}


class _Page(html.parser.HTMLParser):
    """The text of one HTML page: blocks as paragraphs, <pre> verbatim, skipped parts left out."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.open, self.skipped, self.pre, self.out = [], 0, 0, []

    def handle_starttag(self, tag, attrs):
        if tag in BLOCK_TAGS:
            self.out.append("\n\n")
        if tag in VOID_TAGS:
            return
        classes = set((dict(attrs).get("class") or "").split())
        skip = tag in SKIP_TAGS or bool(classes & SKIP_CLASSES) or dict(attrs).get("role") == "navigation"
        self.open.append((tag, skip))
        self.skipped += skip
        self.pre += tag == "pre"

    def handle_endtag(self, tag):
        if tag in BLOCK_TAGS:
            self.out.append("\n\n")
        if not any(t == tag for t, _ in self.open):
            return  # a stray end tag
        while self.open:
            t, skip = self.open.pop()
            self.skipped -= skip
            self.pre -= t == "pre"
            if t == tag:
                break

    def handle_data(self, data):
        if self.skipped:
            return
        if not self.pre:
            data = re.sub(r"\s+", " ", data)
            if not self.out or self.out[-1].endswith("\n"):
                data = data.lstrip(" ")
        self.out.append(data)


def paragraphs(text):
    """Lines stripped at the right, runs of blank lines made one, lines of spaces removed, no
    blank line at either end."""
    lines = [line.rstrip() for line in text.splitlines()]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip("\n") + "\n"


def html_text(source):
    """The text of an HTML page (a str)."""
    page = _Page()
    page.feed(source)
    page.close()
    return paragraphs("".join(page.out))


def read_maybe_gzip(path):
    """A file's text, gunzipped when its name ends in .gz; undecodable bytes replaced."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        return f.read().decode("utf-8", errors="replace")


_UNDERLINE = re.compile(r"^\s*([*=\-.])\1{2,}\s*$")


def info_nodes(source):
    """[(node name, text)] of a GNU info file: one entry per node, without the index nodes, menus,
    the node header and heading underlines."""
    out = []
    for part in source.split("\x1f")[1:]:
        part = part.lstrip("\n")
        head, _, body = part.partition("\n")
        m = re.match(r"File: [^,]*,\s+Node: ([^,\n]+)", head)
        if not m or re.search(r"\bIndex$", m.group(1).strip()):
            continue  # the tag table, the indirect table, an index
        body = body.split("\n* Menu:", 1)[0]
        text = "\n".join(line for line in body.splitlines() if not _UNDERLINE.match(line))
        out.append((m.group(1).strip(), paragraphs(text)))
    return out


_POD_CODE = re.compile(r"([A-Z])(?:<<+\s+(.*?)\s+>>+|<([^<>]*)>)")  # C<< a->b >> or C<text>
_POD_ESCAPES = {"lt": "<", "gt": ">", "verbar": "|", "sol": "/", "quot": '"', "amp": "&"}


def pod_text(source):
    """The text of a POD document: =head and =item lines as their text, other commands and
    formatting codes (B<>, C<>, L<text|link>, E<gt> ...) removed, verbatim paragraphs kept."""
    out, in_pod_block = [], False
    for line in source.splitlines():
        m = re.match(r"=(\w+)\s*(.*)", line)
        if m:
            cmd, rest = m.groups()
            in_pod_block = cmd == "begin" or (in_pod_block and cmd != "end")
            out.append(rest if cmd.startswith("head") or cmd == "item" else "")
        elif not in_pod_block:
            out.append(line)
    text = "\n".join(out)
    while True:
        new = _POD_CODE.sub(lambda m: _pod_code(m.group(1), m.group(2) or m.group(3) or ""), text)
        if new == text:
            return paragraphs(text)
        text = new


def _pod_code(kind, inner):
    if kind == "E":
        if inner in _POD_ESCAPES:
            return _POD_ESCAPES[inner]
        try:
            if not inner[:1].isdigit():
                return html.unescape(f"&{inner};")
            return chr(int(inner, 16 if inner[:2].lower() == "0x" else 8 if inner[:1] == "0" else 10))
        except (ValueError, OverflowError):
            return inner
    if kind == "L":
        return inner.split("|", 1)[0] if "|" in inner else inner.split("/", 1)[0] or inner
    return "" if kind in "XZ" else inner


def same_key(text):
    """Two documents are the same (a near-exact duplicate) when these keys match: the SHA-1 of
    their words, lower-cased, without punctuation or spacing."""
    return hashlib.sha1(" ".join(re.findall(r"\w+", text.lower())).encode()).hexdigest()


def copyright_licences(text):
    """The short licence names a machine-readable (DEP-5) copyright file declares, in order, each
    once; [] for a free-form file."""
    if not text.startswith("Format:"):
        return []
    names = []
    for m in re.finditer(r"^License:[ \t]*(\S[^\n]*)", text, re.M):
        name = m.group(1).strip()
        if len(name) <= 60 and len(name.split()) <= 8 and name not in names:
            names.append(name)
    return names


def documents_of(fmt, path):
    """[(where, text)] of one file in a format: html, info or pod."""
    source = read_maybe_gzip(path)
    if fmt == "html":
        return [(path, html_text(source))]
    if fmt == "info":
        return [(f"{path}#{node}", text) for node, text in info_nodes(source)]
    if fmt == "pod":
        return [(path, pod_text(source))]
    raise ValueError(f"unknown format {fmt}")


def write_documents(entries, min_chars, write):
    """Convert entries [(package, format, path)] in order into documents, keeping the first of
    each group of the same (same_key) and those of at least min_chars characters; write(rel, text)
    stores a kept one under the relative name PKG/NNNNN.txt. Returns {"kept": [{file, source, chars}],
    "short": n, "exact_duplicates": n, "near_duplicates": n}."""
    seen_exact, seen_key = set(), set()
    out = {"kept": [], "short": 0, "exact_duplicates": 0, "near_duplicates": 0}
    counts = {}
    for package, fmt, path in entries:
        for where, text in documents_of(fmt, path):
            if len(text.strip()) < min_chars:
                out["short"] += 1
                continue
            exact, key = hashlib.sha1(text.encode()).hexdigest(), same_key(text)
            if exact in seen_exact or key in seen_key:
                out["exact_duplicates" if exact in seen_exact else "near_duplicates"] += 1
                continue
            seen_exact.add(exact)
            seen_key.add(key)
            counts[package] = counts.get(package, 0) + 1
            rel = f"{package}/{counts[package]:05d}.txt"
            write(rel, text)
            out["kept"].append({"file": rel, "source": where, "chars": len(text)})
    return out
