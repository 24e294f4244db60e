#!/usr/bin/python3
# suite: every third-party Python module the code imports comes with make test's package set
"""Whatever the Python code imports is installed by `scripts/install-deps test`.

A module this machine happens to have (matplotlib, say) makes a suite pass here and fail on a
fresh machine. So: every module imported by tests/, python/, the Python scripts of scripts/ and
the ```python blocks of README.md and docs/*.md that is neither the standard library nor this
repository's own must be importable by /usr/bin/python3 from a file of a Debian package inside
the dependency closure (Depends and Pre-Depends, no Recommends: the sets install with
--no-install-recommends) of `scripts/install-deps --list test`. Names the module, the first file
importing it and the package it came from. Off Debian (no dpkg or apt-cache) it says skipped.
The CI step .ci/fresh-root proves the same by running everything in a minimal root; this suite
says it in seconds on any Debian machine.
usage: tests/test_installs.py
"""
import ast
import glob
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, finish  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def python_sources():
    """[(where, source text)] of every Python file and documented Python block."""
    files = glob.glob(os.path.join(ROOT, "tests", "**", "*.py"), recursive=True)
    files += glob.glob(os.path.join(ROOT, "python", "**", "*.py"), recursive=True)
    # npm's packages (tests/llama's node-llama-cpp) are not the project's code
    files = [p for p in files if f"{os.sep}node_modules{os.sep}" not in p]
    for path in sorted(glob.glob(os.path.join(ROOT, "scripts", "*"))):
        if not os.path.isfile(path):  # __pycache__, left by a script that imports from scripts/
            continue
        with open(path, errors="replace") as f:
            first = f.readline()
        if path.endswith(".py") or (first.startswith("#!") and "python" in first):
            files.append(path)
    out = [(os.path.relpath(p, ROOT), open(p, errors="replace").read()) for p in sorted(set(files))]
    for doc in [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md"))):
        blocks = re.findall(r"```python\n(.*?)```", open(doc).read(), re.S)
        out += [(f"{os.path.relpath(doc, ROOT)}, Python block {i + 1}", b) for i, b in enumerate(blocks)]
    return out


def top_level_imports(source):
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def own_modules():
    """This repository's importable names: the heads package, the test helpers, the scripts."""
    names = {"heads"}
    for folder in ("tests", "scripts", os.path.join("python", "heads")):
        names.update(os.path.splitext(n)[0] for n in os.listdir(os.path.join(ROOT, folder)))
    return names


def test_set_closure():
    """Every package make test's set installs: the set and its Depends/Pre-Depends, recursively."""
    p = subprocess.run([os.path.join(ROOT, "scripts", "install-deps"), "--list", "test"], capture_output=True,
                       text=True)
    wanted = p.stdout.split()
    q = subprocess.run(["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests", "--no-conflicts",
                        "--no-breaks", "--no-replaces", "--no-enhances", *wanted], capture_output=True, text=True)
    closure = set(wanted)
    for line in q.stdout.splitlines():
        m = re.match(r"\s+\|?(?:Pre)?Depends: <?([^\s>]+)>?", line)
        name = m.group(1) if m else (line.strip() if not line.startswith(" ") else "")
        if name:
            closure.add(name.split(":")[0])
    return wanted, closure


FIND = """import importlib.util, os, sys
for name in sys.argv[1:]:
    spec = importlib.util.find_spec(name)
    where = spec and (spec.origin if spec.origin not in (None, "namespace") else list(spec.submodule_search_locations)[0])
    print(os.path.realpath(where) if where else "")
"""


def module_files(modules):
    """{module: the file /usr/bin/python3 would import it from ("" when it cannot)}, found
    without importing anything."""
    r = subprocess.run(["/usr/bin/python3", "-c", FIND, *modules], capture_output=True, text=True)
    return dict(zip(modules, r.stdout.splitlines()))


def owner(path):
    """The Debian package owning the module file (or its folder); None if none does."""
    for candidate in (path, os.path.dirname(path)):
        d = subprocess.run(["dpkg", "-S", candidate], capture_output=True, text=True)
        if d.returncode == 0:
            return d.stdout.split(":")[0].strip()
    return None


def main():
    if not (shutil.which("dpkg") and shutil.which("apt-cache") and os.path.exists("/usr/bin/python3")):
        print("skipped: not a Debian system (no dpkg or apt-cache)")
        return finish()
    first_user = {}
    stdlib, own = set(sys.stdlib_module_names), own_modules()
    for where, source in python_sources():
        for name in sorted(top_level_imports(source) - stdlib - own):
            if not name.startswith("_"):
                first_user.setdefault(name, where)
    wanted, closure = test_set_closure()
    check(f"scripts/install-deps --list test names packages ({len(wanted)}), closure {len(closure)}",
          len(wanted) > 5 and len(closure) > len(wanted))
    files = module_files(sorted(first_user))
    for name, where in sorted(first_user.items()):
        path = files.get(name) or None
        package = owner(path) if path else None
        check(f"{name} (imported by {where}) comes with the test set: {package or path or 'not importable'}",
              package in closure,
              "not importable by /usr/bin/python3" if path is None else
              f"{path} belongs to {package or 'no Debian package'}, which scripts/install-deps test does not install")
    return finish()


if __name__ == "__main__":
    sys.exit(main())
