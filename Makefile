# Makefile: builds ./harness (sources in src/ and kernels/) and the C tests, under build/.
#   make            the harness          make test     every test (see tests/run)
#   make run        install deps, build, train configs/heads12.yaml
#   make SAN=1      AddressSanitizer + UBSan build    make OPENMP=0   single-threaded build
#   make bench      speed against the PyTorch reference
CC      ?= gcc
SAN     ?= 0
OPENMP  ?= 1
VERSION := 0.1.0
GIT_REV := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)

PKGS    := yaml-0.1 hdf5
CFLAGS  := -std=c11 -O3 -march=native -g -Wall -Wextra -Wshadow -D_GNU_SOURCE -MMD -MP \
           -DHARNESS_VERSION='"$(VERSION)"' -DGIT_REV='"$(GIT_REV)"' \
           $(shell pkg-config --cflags $(PKGS) 2>/dev/null || echo -I/usr/include/hdf5/serial)
LDLIBS  := $(shell pkg-config --libs $(PKGS) 2>/dev/null || echo -lyaml -L/usr/lib/x86_64-linux-gnu/hdf5/serial -lhdf5) -lm
BUILD   := build
ifeq ($(OPENMP),1)
  CFLAGS += -fopenmp
  LDLIBS += -fopenmp
else
  CFLAGS += -Wno-unknown-pragmas
  BUILD  := build/noomp
endif
ifeq ($(SAN),1)
  CFLAGS := $(filter-out -O3,$(CFLAGS)) -O1 -fno-omit-frame-pointer -fsanitize=address,undefined
  LDLIBS += -fsanitize=address,undefined
  BUILD  := $(BUILD)/san
endif

KERNELS := $(wildcard kernels/*.c)
LIB_SRC := $(filter-out src/main.c,$(wildcard src/*.c)) $(KERNELS)
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
TESTS   := $(BUILD)/test_kernels $(BUILD)/test_config $(BUILD)/test_analysis

.PHONY: all run test test-c bench clean deps
all: harness

$(BUILD)/harness: $(LIB_OBJ) $(BUILD)/src/main.o
	$(CC) -o $@ $^ $(LDLIBS)

# ./harness at the top is the build of the current variant
harness: $(BUILD)/harness
	ln -sf $< $@

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/test_%: tests/test_%.c $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Isrc -Ikernels $^ -o $@ $(LDLIBS)

deps:
	@scripts/install-deps

run: deps
	$(MAKE) harness
	./harness configs/heads12.yaml --force

test: harness $(TESTS)
	tests/run $(BUILD)

bench: harness
	scripts/bench

clean:
	rm -rf build harness

-include $(shell find build -name '*.d' 2>/dev/null)
