#!/bin/bash
# suite: command line and bad input
# suite-args: {harness}
# tests/test_cli.sh HARNESS: the command line end to end: help, --shapes, a short training run
# checked by `harness check` against docs/results-format.md, inspect, and bad input of every kind
# (exit status 2, a "file:line:col: message" line, no partial results file, no earlier result lost).
set -u
harness=${1:-./harness}
harness=$(cd "$(dirname "$harness")" && pwd)/$(basename "$harness")
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
ok() { echo "ok - $1"; pass=$((pass + 1)); }
bad() { echo "FAIL - $1"; fail=$((fail + 1)); }

# A small, fast config every case starts from.
cat > "$tmp/base.yaml" <<YAML
model: {vocab_size: 32, d_model: 24, n_head: 4, n_layer: 2, seq_len: 24}
train: {steps: 30, batch_size: 8, lr: 3.0e-3, warmup_steps: 5, seed: 1, threads: 2}
data: {task: induction, min_period: 3, max_period: 8}
output: {path: $tmp/run.h5, log_every: 5, eval_every: 10, eval_batches: 2, attn_every: 10, probes: 3}
YAML

# expect_user_error NAME CONFIG_FILE EXPECTED_SUBSTRING [harness args...]
expect_user_error() {
    local name=$1 file=$2 want=$3
    shift 3
    rm -f "$tmp/run.h5" "$tmp/run.h5.tmp"
    "$harness" "$file" "$@" > "$tmp/out" 2> "$tmp/err"
    local status=$?
    local first
    first=$(head -1 "$tmp/err")
    if [ $status -ne 2 ]; then bad "$name: exit status $status, expected 2 ($first)"
    elif ! grep -qE '^[^:]+:[0-9]+:[0-9]+: ' "$tmp/err"; then bad "$name: no file:line:col message: '$first'"
    elif ! grep -qF -- "$want" "$tmp/err"; then bad "$name: message lacks '$want': '$first'"
    elif [ -e "$tmp/run.h5" ] || [ -e "$tmp/run.h5.tmp" ]; then bad "$name: left a results file behind"
    else ok "$name -> $first"
    fi
}

# ---- help and shapes
"$harness" --help | grep -q -- "--set section.key=value" && ok "--help lists the options" || bad "--help"
# --version names the kernels' ISA path (the bench's header reads it from there)
kernels_line=$("$harness" --version | grep '^kernels: ')
if echo "$kernels_line" | grep -qE '^kernels: (AVX-512|AVX2|portable) \(GEMM .*KC [0-9]+ fixed; MC [0-9]+, NC [0-9]+'; then
    ok "--version: $kernels_line"
else bad "--version has no 'kernels: ISA (GEMM ...)' line: '$kernels_line'"
fi
"$harness" --shapes configs/heads12.yaml > "$tmp/shapes" 2>&1 && grep -q "QKV" "$tmp/shapes" \
    && ok "--shapes heads12" || bad "--shapes heads12: $(head -3 "$tmp/shapes")"
one=$("$harness" --shapes "$tmp/base.yaml" --set model.d_model=768 --set model.n_head=1 --set model.seq_len=1024 --set model.vocab_size=50257 | grep "total forward")
twelve=$("$harness" --shapes "$tmp/base.yaml" --set model.d_model=768 --set model.n_head=12 --set model.seq_len=1024 --set model.vocab_size=50257 | grep "total forward")
[ -n "$one" ] && [ "$one" = "$twelve" ] && ok "--shapes: 1x768 and 12x64 cost the same FLOPs" || bad "--shapes 1x768 vs 12x64: '$one' vs '$twelve'"
timeout 10 "$harness" --shapes configs/qwen_style.yaml > "$tmp/qwen" 2>&1 && grep -q "5120" "$tmp/qwen" \
    && ok "--shapes on a real-size Qwen-style layout (no allocation)" || bad "--shapes qwen_style: $(head -3 "$tmp/qwen")"

# ---- --shapes lists every parameter: the rows add up to the total (output gate and sink on)
"$harness" --shapes "$tmp/base.yaml" --set model.output_gate=true --set model.sink=true > "$tmp/shapes_gs" 2>&1
rows=$(sed -n '/^parameters/,/^  total/p' "$tmp/shapes_gs" | grep -v "^parameters\|  total" | awk '{gsub(",", "", $NF); s += $NF} END {print s}')
total=$(grep "^  total  " "$tmp/shapes_gs" | awk '{gsub(",", "", $NF); print $NF}')
grep -q "sink logits" "$tmp/shapes_gs" && grep -q "W_gate" "$tmp/shapes_gs" && [ -n "$total" ] && [ "$rows" = "$total" ] \
    && ok "--shapes with gate and sink: sink and gate rows, rows add up to the total ($total)" \
    || bad "--shapes rows add to $rows, total says $total: $(cat "$tmp/shapes_gs" | sed -n '/^parameters/,/total/p')"

# ---- --keys: the key table, machine-readable
"$harness" --keys > "$tmp/keys" 2> "$tmp/err"
status=$?
[ $status -eq 0 ] && [ "$(head -1 "$tmp/keys")" = "$(printf 'key\ttype\tdefault\trange\tmeaning')" ] \
    && [ "$(awk -F'\t' 'NR > 1 && NF != 5' "$tmp/keys" | wc -l)" -eq 0 ] && grep -q "^model.n_kv_head	int	0	" "$tmp/keys" \
    && ok "--keys: a header and five tab-separated fields per key" || bad "--keys: exit $status, $(head -3 "$tmp/keys")"
"$harness" --keys --oops > /dev/null 2> "$tmp/err"
[ $? -eq 2 ] && [ "$(wc -l < "$tmp/err")" -eq 1 ] && ok "--keys with junk arguments: exit 2, $(cat "$tmp/err")" || bad "--keys junk: $(cat "$tmp/err")"

# ---- scripts/install-deps: the sets, and what it says where it does not install
deps=scripts/install-deps
$deps --list run > "$tmp/run_set" && grep -qx libyaml-dev "$tmp/run_set" && grep -qx libhdf5-dev "$tmp/run_set" \
    && ! grep -q python3 "$tmp/run_set" && ok "install-deps run: compiler, pkg-config, libyaml, HDF5 and no Python" \
    || bad "install-deps --list run: $(tr '\n' ' ' < "$tmp/run_set")"
$deps --list test | grep -qx python3-torch && $deps --list test | grep -qx libyaml-dev \
    && ok "install-deps test: adds the tests' packages to run's" || bad "install-deps --list test"
$deps nonsense > /dev/null 2> "$tmp/err"
[ $? -eq 2 ] && grep -q "usage: install-deps" "$tmp/err" && ok "install-deps with an unknown set: usage, exit 2" || bad "install-deps nonsense"
mkdir -p "$tmp/nodebian"
for c in sh sort tr id cat; do ln -sf "$(command -v $c)" "$tmp/nodebian/$c"; done
PATH="$tmp/nodebian" sh $deps run > "$tmp/out" 2> "$tmp/err"
status=$?
[ $status -eq 0 ] && grep -q "not Debian or Ubuntu; not installing" "$tmp/err" && grep -q "Fedora (dnf install): .*hdf5-devel" "$tmp/err" \
    && grep -q "Arch (pacman -S): .*libyaml" "$tmp/err" && grep -q "macOS (brew install): .*hdf5" "$tmp/err" \
    && grep -q "Debian/Ubuntu (apt-get install --no-install-recommends): .*libhdf5-dev" "$tmp/err" \
    && ok "install-deps off Debian: no apt-get, one message with the Debian, Fedora, Arch and Homebrew packages" \
    || bad "install-deps off Debian: exit $status: $(cat "$tmp/err")"
CC=${CC:-cc} $deps --check-build "-nostdinc" "" > /dev/null 2> "$tmp/err"
[ $? -eq 2 ] && grep -q "cannot find yaml.h" "$tmp/err" && grep -q "libyaml-dev" "$tmp/err" \
    && ok "the build names a header it cannot find and its package" || bad "install-deps --check-build: $(cat "$tmp/err")"

# ---- a short run end to end, checked against the contract
if "$harness" "$tmp/base.yaml" > "$tmp/out" 2> "$tmp/err"; then
    ok "short training run completes"
    "$harness" check "$tmp/run.h5" > "$tmp/check" 2>&1 \
        && ok "the results file passes harness check" || bad "harness check: $(cat "$tmp/check")"
    grep -q "heads are\|head is" "$tmp/out" && ok "end-of-run summary counts heads per class" || bad "no head summary"
    "$harness" inspect "$tmp/run.h5" --tokens 0,3,5,7,3,5 > "$tmp/inspect" 2>&1 && grep -q "layer 1 head 3" "$tmp/inspect" \
        && ok "inspect --tokens prints every head's rows" || bad "inspect: $(head -3 "$tmp/inspect")"
    "$harness" inspect "$tmp/run.h5" --prompt "hi" > /dev/null 2>&1
    [ $? -eq 2 ] && ok "inspect --prompt on a non-byte model is a user error" || bad "inspect --prompt on induction model"
    "$harness" inspect "$tmp/run.h5" --tokens 0,3,5,7,3,5 --layer 1 --head 2 --top 3 > "$tmp/inspect" 2>&1
    [ $? -eq 0 ] && grep -q "^layer 1 head 2:" "$tmp/inspect" && [ "$(grep -c "^layer" "$tmp/inspect")" -eq 1 ] \
        && grep -qE "^the 3 most likely next tokens after the last input: [0-9]+ \(0\.[0-9]+\) [0-9]+ \([0-9.]+\) [0-9]+ \([0-9.]+\)$" "$tmp/inspect" \
        && ok "inspect --layer 1 --head 2 --top 3: one head, three predictions" || bad "inspect --layer/--head/--top: $(cat "$tmp/inspect")"
    "$harness" inspect --help > "$tmp/out" 2>&1 && grep -q "usage: harness inspect" "$tmp/out" && grep -q -- "--top K" "$tmp/out" \
        && ok "inspect --help" || bad "inspect --help: $(head -2 "$tmp/out")"
    for args in "--tokens 1 --layer 2" "--tokens 1 --head 9" "--tokens 1 --top 0" "--tokens 1 --layer x" "--tokens 1 --layer" "--tokens 1 --bogus"; do
        "$harness" inspect "$tmp/run.h5" $args > /dev/null 2> "$tmp/err"
        [ $? -eq 2 ] && [ -s "$tmp/err" ] && ok "inspect $args: exit 2, $(head -1 "$tmp/err")" || bad "inspect $args: $(head -2 "$tmp/err")"
    done
    cp "$tmp/run.h5" "$tmp/keep.h5"
    "$harness" "$tmp/base.yaml" > /dev/null 2> "$tmp/err"
    [ $? -eq 2 ] && cmp -s "$tmp/run.h5" "$tmp/keep.h5" && ok "refuses to replace a complete result without --overwrite" \
        || bad "overwrote a complete result without --overwrite"
    grep -q -- "--overwrite" "$tmp/err" && ! grep -q -- "--force" "$tmp/err" \
        && ok "the refusal names the option, --overwrite" || bad "refusal message: $(cat "$tmp/err")"
    "$harness" "$tmp/base.yaml" --force > /dev/null 2>&1 && ok "--force replaces it" || bad "--force"
else
    bad "short training run failed: $(tail -3 "$tmp/err")"
fi

# ---- SIGKILL mid-run: the earlier result stays, nothing that looks complete appears
cp "$tmp/run.h5" "$tmp/keep.h5" 2>/dev/null
"$harness" "$tmp/base.yaml" --force --set train.steps=100000 > /dev/null 2> "$tmp/kill0.log" &
pid=$!
for i in $(seq 600); do grep -q "^step" "$tmp/kill0.log" 2>/dev/null && break; sleep 0.1; done
kill -KILL $pid 2>/dev/null
wait $pid 2>/dev/null
cmp -s "$tmp/run.h5" "$tmp/keep.h5" && ok "SIGKILL leaves the previous result untouched" || bad "SIGKILL damaged the previous result"

# ---- interrupt and resume: bitwise the uninterrupted run (same binary, config, seed, threads)
same_numbers() { # FILE_A FILE_B: every logged loss, every parameter, every map identical
    local d
    # values only: a scale's REFERENCE_LIST makes h5diff compare the datasets attached to it,
    # /train/elapsed_s (wall time) among them
    for d in /params /train/step /train/loss /train/lr /train/grad_norm /eval/step /eval/loss /attn/step /attn/maps; do
        h5diff -d 0 --exclude-attribute "$d" "$1" "$2" "$d" > /dev/null 2>&1 || { echo "$d"; return 1; }
    done
}
long="--set train.steps=2000 --set output.checkpoint_every=25"
"$harness" "$tmp/base.yaml" --force $long --set output.path=$tmp/full.h5 > /dev/null 2>&1
# wait_for FILE PATTERN: until FILE holds PATTERN (the run is training), at most 60 s
wait_for() {
    local i
    for i in $(seq 600); do
        grep -q "$2" "$1" 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}
"$harness" "$tmp/base.yaml" $long --set output.path=$tmp/int.h5 > /dev/null 2> "$tmp/int.log" &
pid=$!
wait_for "$tmp/int.log" "^step 1[0-9]/"
kill -INT $pid 2>/dev/null
wait $pid
status=$?
intstatus=$(/usr/bin/python3 -c "import h5py; print(h5py.File('$tmp/int.h5').attrs['status'])" 2>/dev/null)
[ $status -eq 130 ] && [ "$intstatus" = interrupted ] && ok "SIGINT stops cleanly: exit 130, status interrupted" \
    || bad "SIGINT: exit $status, status '$intstatus'"
"$harness" "$tmp/base.yaml" $long --set output.path=$tmp/int.h5 --resume > /dev/null 2> "$tmp/err"
diff=$(same_numbers "$tmp/full.h5" "$tmp/int.h5") && ok "SIGINT + --resume is bitwise the uninterrupted run" \
    || bad "SIGINT + --resume differs in $diff: $(tail -1 "$tmp/err")"
"$harness" "$tmp/base.yaml" $long --set output.path=$tmp/kill.h5 > /dev/null 2> "$tmp/kill.log" &
pid=$!
wait_for "$tmp/kill.log" "^step 6[0-9]/" # past the checkpoints at steps 25 and 50
kill -KILL $pid 2>/dev/null
wait $pid 2>/dev/null
[ -e "$tmp/kill.h5" ] && bad "SIGKILL left a file that looks complete" || ok "SIGKILL leaves no file at output.path"
if [ -e "$tmp/kill.h5.ckpt" ]; then
    "$harness" "$tmp/base.yaml" $long --set output.path=$tmp/kill.h5 --resume > /dev/null 2> "$tmp/err"
    diff=$(same_numbers "$tmp/full.h5" "$tmp/kill.h5") && ok "SIGKILL + --resume from the periodic checkpoint is bitwise the uninterrupted run" \
        || bad "SIGKILL + --resume differs in $diff: $(tail -1 "$tmp/err")"
else
    bad "no periodic checkpoint after step 60 (output.checkpoint_every=25)"
fi
"$harness" "$tmp/base.yaml" --set output.path=$tmp/none.h5 --resume > /dev/null 2> "$tmp/err"
[ $? -eq 2 ] && ok "--resume with nothing to resume is a user error" || bad "--resume with nothing to resume"

# ---- determinism: same config and seed give the same numbers, at 1 and at 2 threads
"$harness" "$tmp/base.yaml" --set output.path=$tmp/t1.h5 --set train.threads=1 > /dev/null 2>&1
"$harness" "$tmp/base.yaml" --set output.path=$tmp/t2.h5 --set train.threads=2 > /dev/null 2>&1
"$harness" "$tmp/base.yaml" --set output.path=$tmp/t2b.h5 --set train.threads=2 > /dev/null 2>&1
diff=$(same_numbers "$tmp/t2.h5" "$tmp/t2b.h5") && ok "two runs at 2 threads are bitwise identical" || bad "2-thread reruns differ in $diff"
diff=$(same_numbers "$tmp/t1.h5" "$tmp/t2.h5") && ok "1 thread and 2 threads are bitwise identical" || bad "1 vs 2 threads differ in $diff"
# without OMP_WAIT_POLICY (tests/run sets it) the harness runs itself once more with a bounded
# GOMP_SPINCOUNT (src/cli/wait_policy.c), and its steps follow the load (src/train/threads_adapt.c)
env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT "$harness" "$tmp/base.yaml" --set output.path=$tmp/t2s.h5 \
    --set train.threads=2 --set train.steps=80 > /dev/null 2>&1
"$harness" "$tmp/base.yaml" --set output.path=$tmp/t1l.h5 --set train.threads=1 --set train.steps=80 > /dev/null 2>&1
diff=$(same_numbers "$tmp/t1l.h5" "$tmp/t2s.h5") && ok "re-executed with a bounded spin, thread count probed: bitwise the 1-thread run" \
    || bad "the default wait policy's run differs in $diff"
if command -v strace > /dev/null; then
    # an ASan build refuses a preload ahead of its runtime unless told not to check the order, and
    # LeakSanitizer cannot run under ptrace
    traced_asan="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0:detect_leaks=0"
    env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT LD_PRELOAD=libm.so.6 ASAN_OPTIONS="$traced_asan" strace -f -v -s 200 -e trace=execve -o "$tmp/exec.log" \
        "$harness" --keys train.threads > /dev/null 2>&1
    execs=$(grep -c 'execve(' "$tmp/exec.log")
    again=$(grep 'execve("/proc/self/exe", \["'"$harness"'", "--keys", "train.threads"\]' "$tmp/exec.log")
    [ "$execs" = 2 ] && [[ $again == *LD_PRELOAD=libm.so.6* ]] && [[ $again == *GOMP_SPINCOUNT=* ]] \
        && ok "wait policy: one exec of /proc/self/exe, argv and LD_PRELOAD kept, under strace" \
        || bad "wait policy: $execs execs: $(tail -c 400 "$tmp/exec.log")"
    GOMP_SPINCOUNT=5 ASAN_OPTIONS="$traced_asan" strace -f -e trace=execve -o "$tmp/exec.log" "$harness" --keys train.threads > /dev/null 2>&1
    [ "$(grep -c 'execve(' "$tmp/exec.log")" = 1 ] && ok "wait policy: the user's GOMP_SPINCOUNT is kept, no exec" \
        || bad "wait policy: exec despite the user's GOMP_SPINCOUNT"
fi
env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT "$harness" "$tmp/base.yaml" --force $long --set output.path=$tmp/term.h5 \
    > /dev/null 2> "$tmp/term.log" &
pid=$!
wait_for "$tmp/term.log" "^step 1[0-9]/"
kill -TERM $pid 2>/dev/null
wait $pid
status=$?
[ $status -eq 130 ] && ok "re-executed run: SIGTERM stops it cleanly (exit 130)" || bad "re-executed run: SIGTERM gave exit $status"

# ---- divergence: a valid file up to the step, status diverged, exit 3
"$harness" "$tmp/base.yaml" --set output.path=$tmp/div.h5 --set train.lr=1e35 --set train.warmup_steps=0 > /dev/null 2> "$tmp/err"
status=$?
divstatus=$(/usr/bin/python3 -c "import h5py; print(h5py.File('$tmp/div.h5').attrs['status'])" 2>/dev/null)
[ $status -eq 3 ] && [ "$divstatus" = diverged ] && grep -q "diverged at step" "$tmp/err" \
    && ok "divergence: exit 3, status diverged, message names the step" || bad "divergence: exit $status, status '$divstatus'"

# ---- a disk that fills up during the run (file-size limit): exit 2, nothing left behind
(ulimit -f 40; "$harness" "$tmp/base.yaml" --set output.path=$tmp/full_disk.h5 --set output.attn_every=1 > /dev/null 2> "$tmp/err")
status=$?
[ $status -eq 2 ] && [ ! -e "$tmp/full_disk.h5" ] && [ ! -e "$tmp/full_disk.h5.tmp" ] \
    && ok "disk full during the run -> $(head -1 "$tmp/err")" || bad "disk full: exit $status, $(ls "$tmp" | grep full_disk)"

# ---- bad input, each a user error
cat > "$tmp/syntax.yaml" <<YAML
model:
  d_model: [1, 2
YAML
expect_user_error "YAML syntax error" "$tmp/syntax.yaml" "syntax.yaml:"
printf 'model:\n  n_heads: 4\n' > "$tmp/unknown.yaml"
expect_user_error "unknown key" "$tmp/unknown.yaml" "unknown.yaml:2:3"
printf 'model:\n  n_head: twelve\n' > "$tmp/type.yaml"
expect_user_error "wrong type" "$tmp/type.yaml" "type.yaml:2:11"
printf 'model:\n  n_head: -3\n' > "$tmp/range.yaml"
expect_user_error "out of range" "$tmp/range.yaml" "range.yaml:2:11"
printf 'model:\n  d_model: 100\n  n_head: 12\n' > "$tmp/divide.yaml"
expect_user_error "d_model not divisible by n_head" "$tmp/divide.yaml" "divide.yaml:3:"
expect_user_error "missing config file" "$tmp/nonexistent.yaml" "nonexistent.yaml:1:1"
expect_user_error "unknown --set key" "$tmp/base.yaml" "n_heads" --set model.n_heads=4
expect_user_error "missing data file" "$tmp/base.yaml" "data.path" --set data.task=tokens --set data.path=$tmp/none.bin --set model.vocab_size=300
head -c 101 /dev/urandom > "$tmp/odd.bin"
expect_user_error "odd-sized tokens file" "$tmp/base.yaml" "odd size" --set data.task=tokens --set data.path=$tmp/odd.bin
: > "$tmp/empty.bin"
expect_user_error "empty tokens file" "$tmp/base.yaml" "empty" --set data.task=tokens --set data.path=$tmp/empty.bin
/usr/bin/python3 -c "import numpy as np; np.arange(2000, dtype='<u2').tofile('$tmp/big_ids.bin')"
expect_user_error "token id >= vocab_size" "$tmp/base.yaml" "vocab_size" --set data.task=tokens --set data.path=$tmp/big_ids.bin
expect_user_error "output directory that cannot be made (a file is in its way)" "$tmp/base.yaml" "output.path" --set output.path=$tmp/odd.bin/sub/run.h5
expect_user_error "output.path that is a directory, refused before step 1" "$tmp/base.yaml" "is a directory" --set output.path=$tmp
if [ -f "$tmp/keep.h5" ]; then
    expect_user_error "init_from with the wrong shapes" "$tmp/base.yaml" "shape" --set train.init_from=$tmp/keep.h5 --set model.d_model=32
fi
expect_user_error "init_from missing" "$tmp/base.yaml" "init_from" --set train.init_from=$tmp/none.h5
printf 'model: {vocab_size: 64}\ndata: {task: text}\n' > "$tmp/textvocab.yaml"
expect_user_error "text task needs 256 tokens" "$tmp/textvocab.yaml" "vocab_size"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
