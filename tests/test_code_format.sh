#!/bin/bash
# suite: code format (.clang-format)
# tests/test_code_format.sh: every tracked .c and .h file is exactly what `clang-format` makes of
# it with the repository's .clang-format (`clang-format --dry-run -Werror`), one check per file;
# first, that the check itself can fail: a misformatted snippet must be refused under the same
# style. Fix a file with `clang-format -i FILE`. Says "skipped: clang-format not installed" (and
# counts nothing) only when the binary is missing; scripts/install-deps test installs it.
set -u
cd "$(dirname "$0")/.."
pass=0
fail=0
ok() { echo "ok - $1"; pass=$((pass + 1)); }
bad() { echo "FAIL - $1"; fail=$((fail + 1)); }

if ! command -v clang-format > /dev/null 2>&1; then
    echo "skipped: clang-format not installed (scripts/install-deps test installs it)"
    echo "0 passed, 0 failed"
    exit 0
fi
echo "# $(clang-format --version)"

if [ -f .clang-format ]; then ok ".clang-format is at the top of the repository"
else bad ".clang-format is missing at the top of the repository"
fi

# The check refuses a file that is not formatted (so a pass below means something).
if printf 'int  f(int x){return x ;}\n' |
    clang-format --style=file --dry-run -Werror --assume-filename=src/probe.c > /dev/null 2>&1; then
    bad "a misformatted snippet passes clang-format --dry-run -Werror: the check cannot fail"
else ok "a misformatted snippet is refused"
fi

# The tracked C files (every .c and .h under find when this is not a git checkout).
if files=$(git ls-files '*.c' '*.h' 2> /dev/null) && [ -n "$files" ]; then :
else files=$(find src kernels tests scripts -name '*.[ch]' | sort)
fi
for f in $files; do
    [ -f "$f" ] || continue
    if out=$(clang-format --style=file --dry-run -Werror "$f" 2>&1); then ok "$f follows .clang-format"
    else
        places=$(printf '%s\n' "$out" | grep -c 'error: code should be clang-formatted')
        first=$(printf '%s\n' "$out" | sed -n 's/^[^:]*:\([0-9]*:[0-9]*\): error.*/\1/p' | head -1)
        bad "$f differs from clang-format in $places places, the first at $first (clang-format -i $f)"
    fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
