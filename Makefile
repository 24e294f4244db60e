# Makefile: builds ./harness (sources in src/ and kernels/) and the C tests, under build/.
#   make            the harness          make test     every test (see tests/run)
#   make check      the C suites and a smoke run: the one-minute loop while iterating
#   make run        install what it needs (scripts/install-deps run), build, train configs/heads12.yaml
#   make SAN=1      AddressSanitizer + UBSan build    make OPENMP=0   single-threaded build
#   make bench      speed against the PyTorch reference
#   make test BUILD=build/avx2 CFLAGS_ARCH=-march=x86-64-v3   the AVX2 kernels, in their own dir
#   (-march=x86-64-v2: the portable C kernels; the default -march=native picks AVX-512 if present)
CC      ?= gcc
SAN     ?= 0
OPENMP  ?= 1
CFLAGS_ARCH ?= -march=native
VERSION := 0.1.0
GIT_REV := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)

PKGS    := yaml-0.1 hdf5
DEP_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null || echo -I/usr/include/hdf5/serial)
# KCFLAGS: the kernels' flags (no library headers: kernels/ builds alone); CFLAGS adds the program's
KCFLAGS := -std=c11 -O3 $(CFLAGS_ARCH) -fno-math-errno -g -Wall -Wextra -Wshadow -D_GNU_SOURCE -MMD -MP
CFLAGS  := $(KCFLAGS) -Isrc -I. -DHARNESS_VERSION='"$(VERSION)"' -DGIT_REV='"$(GIT_REV)"' $(DEP_CFLAGS)
# libhdf5_hl (the H5DS dimension-scale API) sits beside libhdf5, but hdf5.pc does not list it
# (Debian, Homebrew): put it right before -lhdf5, whatever pkg-config returned.
LDLIBS  := $(patsubst -lhdf5,-lhdf5_hl -lhdf5,$(shell pkg-config --libs $(PKGS) 2>/dev/null || echo -lyaml -L/usr/lib/x86_64-linux-gnu/hdf5/serial -lhdf5)) -lm
BUILD   := build
ifeq ($(OPENMP),1)
  CFLAGS += -fopenmp
  KCFLAGS += -fopenmp
  LDLIBS += -fopenmp
else
  CFLAGS += -fopenmp-simd -Wno-unknown-pragmas # "omp simd" still vectorises
  KCFLAGS += -fopenmp-simd -Wno-unknown-pragmas
  BUILD  := build/noomp
endif
ifeq ($(SAN),1)
  CFLAGS := $(filter-out -O3,$(CFLAGS)) -O1 -fno-omit-frame-pointer -fsanitize=address,undefined
  KCFLAGS := $(filter-out -O3,$(KCFLAGS)) -O1 -fno-omit-frame-pointer -fsanitize=address,undefined
  LDLIBS += -fsanitize=address,undefined
  BUILD  := $(BUILD)/san
endif

KERNELS := $(wildcard kernels/*.c)
KERNEL_OBJ := $(KERNELS:%.c=$(BUILD)/%.o)
LIB_SRC := $(filter-out src/cli/main.c,$(wildcard src/*/*.c)) $(KERNELS)
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
# every tests/test_*.c is a C suite (tests/run finds the same files: no list to keep)
TESTS   := $(patsubst tests/%.c,$(BUILD)/%,$(wildcard tests/test_*.c))

.PHONY: all run test check bench clean deps fuzz valgrind-check
all: harness $(BUILD)/libkernels.a

$(BUILD)/harness: $(LIB_OBJ) $(BUILD)/src/cli/main.o
	$(CC) -o $@ $^ $(LDLIBS)

# ./harness at the top is the build of the current variant
harness: $(BUILD)/harness
	ln -sf $< $@

$(BUILD)/%.o: %.c | $(BUILD)/build-deps.ok
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# GIT_REV goes into `harness --version` and every results file's git_rev: the two objects that
# print it are rebuilt whenever the checkout's commit changes (a stamp rewritten only then), so a
# binary never names a commit older than the one it was built from.
$(BUILD)/git-rev: FORCE | $(BUILD)/build-deps.ok
	@echo '$(GIT_REV)' | cmp -s - $@ || echo '$(GIT_REV)' > $@
$(BUILD)/src/cli/main.o $(BUILD)/src/results/results_file.o: $(BUILD)/git-rev
.PHONY: FORCE
FORCE:

# Before the first compile: a missing yaml.h, hdf5.h or library is named, with its package,
# instead of a compiler error (scripts/install-deps --check-build; nothing is installed).
$(BUILD)/build-deps.ok:
	@mkdir -p $(BUILD)
	@CC="$(CC)" scripts/install-deps --check-build "$(DEP_CFLAGS)" "$(LDLIBS)"
	@touch $@

# kernels/ is a library of its own: its files include only kernels/ headers (and the C library),
# and build without the program's flags or headers
$(BUILD)/kernels/%.o: kernels/%.c | $(BUILD)/build-deps.ok
	@mkdir -p $(dir $@)
	@if grep -n '^ *# *include *"[^"]*/' $<; then echo "$<: kernels/ may include only its own headers"; exit 1; fi
	$(CC) $(KCFLAGS) -c $< -o $@

$(BUILD)/libkernels.a: $(KERNEL_OBJ)
	$(AR) rcs $@ $^

$(BUILD)/test_%: tests/test_%.c $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(filter %.c %.o,$^) -o $@ $(LDLIBS)

# The LD_PRELOAD shim of the fault-injection and crash suites (tests/faultshim.c): plain flags,
# no sanitizers (it replaces malloc, which the sanitizers' runtimes own).
$(BUILD)/faultshim.so: tests/faultshim.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O2 -g -Wall -Wextra -Wshadow -fPIC -shared $< -o $@ -ldl

# The packages of each use (scripts/install-deps run | test | bench): installed by make run,
# make test and make bench when missing (root or sudo on Debian/Ubuntu); plain `make` never does.
deps:
	@scripts/install-deps run

run: deps
	$(MAKE) harness
	./harness configs/heads12.yaml --force

# deps first, then the build (a fresh machine has no headers before deps); only the default
# variant moves the ./harness link
test:
	@scripts/install-deps test
	$(MAKE) $(BUILD)/harness $(BUILD)/libkernels.a $(TESTS) $(BUILD)/gemm_peak $(BUILD)/faultshim.so $(if $(filter build,$(BUILD)),harness)
	tests/run $(BUILD)

# The one-minute loop while iterating (docs/tests.md): every C suite (the kernels' finite
# differences, the model, the analyses) and the smoke run (train, check, eval, inspect). It
# installs nothing; `make test` stays the whole.
check:
	$(MAKE) $(BUILD)/harness $(TESTS) $(if $(filter build,$(BUILD)),harness)
	tests/run $(BUILD) $(notdir $(TESTS)) test_smoke.sh

# BENCH_ARGS: e.g. --quick, --no-torch, --torch default; see scripts/bench --help.
# install-deps bench adds PyTorch and Debian's two OpenBLAS builds (the PyTorch side's variants).
# The AVX2 kernels on any x86-64-v3 CPU: make bench BUILD=build/avx2 CFLAGS_ARCH=-march=x86-64-v3
bench:
	@scripts/install-deps bench
	$(MAKE) $(BUILD)/harness $(BUILD)/gemm_peak $(BUILD)/bench_step $(BUILD)/bench_generate $(if $(filter build,$(BUILD)),harness)
	scripts/bench --harness $(BUILD)/harness --gemm-peak $(BUILD)/gemm_peak --bench-generate $(BUILD)/bench_generate $(BENCH_ARGS)

$(BUILD)/gemm_peak: scripts/gemm_peak.c $(BUILD)/kernels/gemm.o $(BUILD)/kernels/gemm_bf16.o
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

# One training step alone, for profiles (docs/performance.md): bench_step D H D_HEAD T B STEPS THREADS
$(BUILD)/bench_step: scripts/bench_step.c $(LIB_OBJ)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

# One generated token's cost by position, cached and recomputed: bench_generate D H D_HEAD T REPEATS
$(BUILD)/bench_generate: scripts/bench_generate.c $(LIB_OBJ)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

clean:
	rm -rf build harness

-include $(shell find build -name '*.d' 2>/dev/null)

# ==== fuzzing, sanitizers, valgrind (tests/fuzz_config.c, tests/fuzz/, scripts/fuzz, scripts/valgrind-check)
#   make fuzz [FUZZ_SECONDS=60]  build the config-loader fuzz target (clang, libFuzzer + ASan/UBSan)
#                                and run it; fails on any crash, leak or hang. Longer: scripts/fuzz 3600
#   make SAN=1 test              every test suite against build/san/ with the sanitizer options below
#   make valgrind-check          the harness and test_config under valgrind memcheck (build/valgrind/)
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_CFLAGS  := -std=c11 -g -O1 -fno-omit-frame-pointer -Wall -Wextra -Wshadow -D_GNU_SOURCE \
                -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
                $(shell pkg-config --cflags yaml-0.1 2>/dev/null)
FUZZ_LDLIBS  := $(shell pkg-config --libs yaml-0.1 2>/dev/null || echo -lyaml) -lm

CONFIG_SRC := $(wildcard src/config/*.c)
build/fuzz/fuzz_config: tests/fuzz_config.c $(CONFIG_SRC) $(wildcard src/config/*.h) src/base/error.c src/base/error.h src/base/safefile.c src/base/util.h
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -Isrc -I. tests/fuzz_config.c $(CONFIG_SRC) src/base/error.c src/base/safefile.c -o $@ $(FUZZ_LDLIBS)

fuzz:
	scripts/fuzz $(FUZZ_SECONDS)

valgrind-check:
	scripts/valgrind-check

# Runtime options of the SAN=1 build, inherited by tests/run and every process it starts (the
# Python suites run build/san/harness as a subprocess). LeakSanitizer is on; UBSan stops at the
# first report (gcc's UBSan otherwise prints and carries on, and the test would pass). Reports go
# to files under build/san/sanitizer-reports/ rather than to stderr, where a test that expects a
# failure could swallow them: tests/run counts each report file as a failure and prints it.
# tests/asan.supp and tests/lsan.supp name the HDF5 library's own defects (on damaged files and
# failed writes), which are not the harness's.
ifeq ($(SAN),1)
SANITIZER_REPORTS := $(abspath $(BUILD))/sanitizer-reports
export SANITIZER_REPORTS
export ASAN_OPTIONS ?= detect_leaks=1:detect_stack_use_after_return=1:strict_string_checks=1:log_path=$(SANITIZER_REPORTS)/asan:suppressions=$(abspath tests/asan.supp):print_suppressions=0
export LSAN_OPTIONS ?= suppressions=$(abspath tests/lsan.supp):print_suppressions=0
export UBSAN_OPTIONS ?= halt_on_error=1:print_stacktrace=1:log_path=$(SANITIZER_REPORTS)/ubsan
endif
# The whole suite runs under the sanitizers: ~6 min on a quiet 2-core machine, against ~1 min
# without; tests/test_mechanism.py is 4.5 min of it (heads12, 600 steps, 3 seeds: ~10x slower at
# -O1 with ASan, and far slower when other jobs compete for the cores, as OpenMP threads then
# spin). On a busy machine: make SAN=1 test SKIP_SUITES=test_mechanism.py (see tests/run).
# ==== end of fuzzing, sanitizers, valgrind
