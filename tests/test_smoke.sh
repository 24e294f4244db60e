#!/bin/bash
# suite: smoke run (make check's end to end: train, check, eval, inspect)
# suite-args: {harness}
# tests/test_smoke.sh HARNESS: the shortest end-to-end path a change can break, for `make check`
# (the one-minute loop): a 30-step run of configs/heads12.yaml's layout passes `harness check`,
# names its final held-out losses, `harness eval` repeats them bit for bit, and `inspect` runs
# the stored model. The whole command line is tests/test_cli.sh.
set -u
harness=${1:-./harness}
harness=$(cd "$(dirname "$harness")" && pwd)/$(basename "$harness")
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
check() { if [ "$1" = 0 ]; then echo "ok - $2"; pass=$((pass + 1)); else echo "FAIL - $2"; fail=$((fail + 1)); fi; }

run="$tmp/smoke.h5"
"$harness" configs/heads12.yaml --set train.steps=30 --set train.threads=1 --set output.eval_every=10 \
    --set output.attn_every=10 --set output.path="$run" > "$tmp/out" 2> "$tmp/err"
check $? "a 30-step heads12 run completes"
"$harness" check "$run" > /dev/null 2>&1
check $? "harness check passes it"
grep -q '^final held-out loss, validation split: ' "$tmp/err" && grep -q '^final held-out loss, test split: ' "$tmp/err"
check $? "its last lines name the final held-out loss of each split"
val=$("$harness" eval "$run" --split validation --json 2>/dev/null | sed -n 's/.*"loss": \([^,]*\),.*/\1/p')
want=$(/usr/bin/python3 -c "import h5py,sys; print(repr(float(h5py.File(sys.argv[1])['heldout/loss'][0])))" "$run" 2>/dev/null)
[ -n "$val" ] && /usr/bin/python3 -c "import sys; sys.exit(float(sys.argv[1]) != float(sys.argv[2]))" "$val" "$want"
check $? "harness eval repeats /heldout's validation loss bit for bit ($val)"
"$harness" inspect "$run" --tokens 0,5,9,12,5,9 > /dev/null 2>&1
check $? "inspect runs the stored model"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
