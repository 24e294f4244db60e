#!/usr/bin/python3
# suite: the source tree's layout (scripts/check-layout) and its map, docs/code.md
# suite-args: --harness {harness}
"""test_layout.py: the tree follows its layout rules, and the rules can fail.

1. scripts/check-layout on this tree (its objects: the build of --harness) finds no problem:
   folders by layer, includes one way, no circles between files (C and Python), units a reader
   can hold.
2. The checker fails where it should: small trees made here, each with one fault (a wrong-way
   include, a bare include of another folder's header, a circle of calls between two files of
   one folder, two folders that may include each other, a Python import circle, a Python import
   of a subpackage its __init__ does not name), each named in its output with exit status 1;
   and warns, exit status 0, of a 71-line function, a 601-line C file, a 451-line Python module.
3. docs/code.md is what scripts/code-map makes of the tree (so the map cannot drift), and it
   names every source file and every folder's include rule.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PASS = FAIL = 0


def check(what, ok, detail=""):
    global PASS, FAIL
    if ok:
        PASS += 1
        print(f"ok - {what}")
    else:
        FAIL += 1
        print(f"FAIL - {what}" + (f"\n    {detail}" if detail else ""))


def run_checker(root, build):
    p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "check-layout"), "--root", root,
                        "--build", build], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def compile_tree(root, build):
    """Objects of every .c of a small tree (what nm reads)."""
    for dirpath, _, names in os.walk(os.path.join(root, "src")):
        for n in names:
            if n.endswith(".c"):
                src = os.path.join(dirpath, n)
                obj = os.path.join(build, os.path.relpath(src, root))[:-2] + ".o"
                os.makedirs(os.path.dirname(obj), exist_ok=True)
                # every folder on the path: a bare include of another folder's header compiles, and
                # only the checker refuses it
                dirs = [os.path.join(root, "src", d) for d in os.listdir(os.path.join(root, "src"))]
                subprocess.run(["cc", "-c", "-I" + os.path.join(root, "src")] + ["-I" + d for d in dirs] +
                               [src, "-o", obj], check=True)


def small_tree(root):
    """Two folders, low below high, one file each, a Python package of two modules: no fault."""
    write(root, "src/low/README.md", "# low\n\nMay include: nothing\n")
    write(root, "src/high/README.md", "# high\n\nMay include: low\n")
    write(root, "src/low/a.h", "int a(int x);\n")
    write(root, "src/low/a.c", '#include "a.h"\nint a(int x) { return x + 1; }\n')
    write(root, "src/low/b.h", "int b(int x);\n")
    write(root, "src/low/b.c", '#include "b.h"\n#include "a.h"\nint b(int x) { return a(x) * 2; }\n')
    # 70 lines: the longest a function may be
    write(root, "src/high/c.c", '#include "low/b.h"\nint c(int x) {\n' + "    x++;\n" * 67 + "    return b(x) - 1;\n}\n")
    write(root, "kernels/k.h", "int k(void);\n")
    write(root, "python/heads/__init__.py", "")
    write(root, "python/heads/lo/__init__.py", '"""lo.\n\nMay import: nothing\n"""\n')
    write(root, "python/heads/hi/__init__.py", '"""hi.\n\nMay import: lo\n"""\n')
    write(root, "python/heads/lo/two.py", "X = 1\n")
    write(root, "python/heads/lo/three.py", "from . import two\n")
    write(root, "python/heads/hi/one.py", "from ..lo import two\n")


FAULTS = [
    ("an include the wrong way (low includes high)",
     lambda r: write(r, "src/low/a.c", '#include "a.h"\n#include "high/c.h"\nint a(int x) { return x + 1; }\n')
     or write(r, "src/high/c.h", "int c(int x);\n"),
     "may include only"),
    ("a bare include of another folder's header",
     lambda r: write(r, "src/high/c.c", '#include "b.h"\nint c(int x) { return x; }\n'),
     "bare"),
    ("a circle of calls between two files of one folder",
     lambda r: write(r, "src/low/a.c", '#include "a.h"\nint b(int x);\nint a(int x) { return x ? b(x - 1) : 0; }\n'),
     "in a circle: src/low/a.c <-> src/low/b.c"),
    ("two folders that may include each other",
     lambda r: write(r, "src/low/README.md", "# low\n\nMay include: high\n"),
     "folders may include each other in a circle"),
    ("a Python import circle",
     lambda r: write(r, "python/heads/lo/two.py", "from . import three\nX = 1\n"),
     "import each other in a circle"),
    ("a Python import the wrong way (lo imports hi)",
     lambda r: write(r, "python/heads/lo/two.py", "from ..hi import one\nX = 1\n"),
     "heads.lo may import only nothing"),
    ("a folder without a README",
     lambda r: os.remove(os.path.join(r, "src/high/README.md")),
     "no README.md"),
]
# sizes over their limits: warnings (printed, exit status 0), not problems
WARNINGS = [
    ("a function of 71 lines",
     lambda r: write(r, "src/low/a.c", '#include "a.h"\nint a(int x) {\n' + "    x++;\n" * 68 + "    return x;\n}\n"),
     "warning: src/low/a.c:2: a is 71 lines, over 70"),
    ("a C file of 601 lines",
     lambda r: write(r, "src/low/a.c", '#include "a.h"\nint a(int x) { return x + 1; }\n' + "\n" * 599),
     "warning: src/low/a.c: 601 lines, over 600"),
    ("a Python module of 451 lines",
     lambda r: write(r, "python/heads/lo/two.py", "X = 1\n" * 451),
     "warning: python/heads/lo/two.py: 451 lines, over 450"),
]


def test_fault_trees():
    with tempfile.TemporaryDirectory() as tmp:
        clean = os.path.join(tmp, "clean")
        small_tree(clean)
        compile_tree(clean, os.path.join(clean, "build"))
        rc, out = run_checker(clean, os.path.join(clean, "build"))
        check("the checker passes a small tree with no fault", rc == 0 and "layout: 0 problems, 0 warnings" in out, out)
        for i, (what, fault, expect) in enumerate(FAULTS + WARNINGS):
            root = os.path.join(tmp, f"fault{i}")
            shutil.copytree(clean, root, ignore=shutil.ignore_patterns("build"))
            fault(root)
            compile_tree(root, os.path.join(root, "build"))
            rc, out = run_checker(root, os.path.join(root, "build"))
            if i < len(FAULTS):
                check(f"the checker finds {what} (a problem: exit status 1)", rc == 1 and expect in out, out)
            else:
                check(f"the checker warns of {what} (a warning: exit status 0)",
                      rc == 0 and expect in out and "layout: 0 problems, 1 warning" in out, out)


def test_this_tree(build):
    rc, out = run_checker(ROOT, build)
    check("this tree: folders by layer, no circles, units a reader can hold (scripts/check-layout)",
          rc == 0, out.strip())


def test_code_map():
    p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "code-map")], capture_output=True, text=True)
    with open(os.path.join(ROOT, "docs", "code.md")) as f:
        page = f.read()
    check("docs/code.md is scripts/code-map's output (run scripts/code-map > docs/code.md)",
          p.returncode == 0 and p.stdout == page, p.stderr)
    missing = []
    for top in ("src", "kernels", "python/heads"):
        for dirpath, _, names in os.walk(os.path.join(ROOT, top)):
            for n in names:
                if n.endswith((".c", ".h", ".py")) and f"`{n}`" not in page:
                    missing.append(os.path.relpath(os.path.join(dirpath, n), ROOT))
    check("docs/code.md names every source file", not missing, " ".join(missing[:10]))
    folders = [d for d in sorted(os.listdir(os.path.join(ROOT, "src"))) if os.path.isdir(os.path.join(ROOT, "src", d))]
    check("docs/code.md gives every src/ folder's include rule",
          all(f"`src/{d}/`" in page for d in folders) and page.count("May include:") >= len(folders))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--harness", default=os.path.join(ROOT, "build", "harness"))
    a = p.parse_args()
    build = os.path.dirname(os.path.abspath(a.harness))
    test_this_tree(build)
    test_fault_trees()
    test_code_map()
    print(f"{PASS} passed, {FAIL} failed")
    return 1 if FAIL else 0


if __name__ == "__main__":
    sys.exit(main())
