# fuzz/fuzz.mk - the fuzz harnesses (fuzz/README.md); included by the Makefile.
#
# Harness builds live in their own directories, never in build/ or build-asan/:
#   build-fuzz-replay     fuzzing mode, ASan+UBSan, fuzz/replay.c driver (make test);
#                         built with clang where installed, else $(CC)
#   build-fuzz-prod       production mode (real checksums), ASan+UBSan, replay driver
#   build-fuzz-afl        afl-clang-fast, ASan+UBSan, AFL++'s LLVMFuzzerTestOneInput driver
#   build-fuzz-cmplog     the same without sanitizers, AFL_LLVM_CMPLOG=1, for afl-fuzz -c
#   build-fuzz-libfuzzer  clang -fsanitize=fuzzer,address,undefined

FUZZ_NAMES := manifest index chunk banded validate apply roundtrip journal set history append sign http place
FUZZ_DEFINE := -DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_SECONDS ?= 60
FUZZ_ENGINE ?= replay
FUZZ_OBJ := $(FUZZ_NAMES:%=$(BUILD)/fuzz/fuzz_%.o) $(BUILD)/fuzz/replay.o $(BUILD)/fuzz/mkseeds.o
FUZZ_BINS := $(FUZZ_NAMES:%=$(BUILD)/bin/fuzz_%)
ifeq ($(FUZZ_ENGINE),replay)
FUZZ_DRIVER := $(BUILD)/fuzz/replay.o
FUZZ_LINK :=
else
FUZZ_DRIVER :=
FUZZ_LINK := -fsanitize=fuzzer
endif

$(BUILD)/bin/fuzz_%: $(BUILD)/fuzz/fuzz_%.o $(FUZZ_DRIVER) $(BUILD)/libdcr.a
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(CFLAGS) $(SANITIZE) $(FUZZ_LINK) -o $@ $^ $(LDLIBS)

$(BUILD)/bin/mkseeds: $(BUILD)/fuzz/mkseeds.o $(BUILD)/libdcr.a
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	$(Q)$(CC) $(CFLAGS) $(SANITIZE) -o $@ $^ $(LDLIBS)

fuzz-bins: $(FUZZ_BINS)

# clang's UBSan checks more (e.g. arithmetic on null pointers) than gcc's.
FUZZ_REPLAY_CC ?= $(shell command -v clang >/dev/null 2>&1 && echo clang || echo $(CC))
FUZZ_REPLAY_FLAGS = CC=$(FUZZ_REPLAY_CC) CFLAGS="-O1 -g -fno-omit-frame-pointer $(1)" SANITIZE="$(FUZZ_SAN)" FUZZ_ENGINE=replay

fuzz-build: ## Build the fuzz harnesses: replay driver, AFL++ and libFuzzer where installed
	$(MAKE) BUILD=build-fuzz-replay $(call FUZZ_REPLAY_FLAGS,$(FUZZ_DEFINE)) fuzz-bins
	$(MAKE) BUILD=build-fuzz-prod $(call FUZZ_REPLAY_FLAGS,) fuzz-bins
	@if command -v afl-clang-fast >/dev/null 2>&1; then \
	  AFL_QUIET=1 $(MAKE) BUILD=build-fuzz-afl FUZZ_ENGINE=afl CC=afl-clang-fast \
	    CFLAGS="-O1 -g -fno-omit-frame-pointer $(FUZZ_DEFINE)" SANITIZE="$(FUZZ_SAN)" fuzz-bins && \
	  AFL_QUIET=1 AFL_LLVM_CMPLOG=1 $(MAKE) BUILD=build-fuzz-cmplog FUZZ_ENGINE=afl CC=afl-clang-fast \
	    CFLAGS="-O1 -g $(FUZZ_DEFINE)" SANITIZE= fuzz-bins; \
	else echo "fuzz-build: afl-clang-fast not found: no AFL++ build (sh tools/deps.sh fuzz)"; fi
	@if sh fuzz/fuzz.sh has-libfuzzer; then \
	  $(MAKE) BUILD=build-fuzz-libfuzzer FUZZ_ENGINE=libfuzzer CC=clang \
	    CFLAGS="-O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link $(FUZZ_DEFINE)" \
	    SANITIZE="$(FUZZ_SAN)" fuzz-bins; \
	else echo "fuzz-build: clang with libFuzzer not found: no libFuzzer build"; fi

fuzz-replay: ## Replay every corpus, regression input and test vector under ASan+UBSan
	$(MAKE) BUILD=build-fuzz-replay $(call FUZZ_REPLAY_FLAGS,$(FUZZ_DEFINE)) fuzz-bins
	$(MAKE) BUILD=build-fuzz-prod $(call FUZZ_REPLAY_FLAGS,) fuzz-bins
	sh fuzz/fuzz.sh replay build-fuzz-replay/bin
	sh fuzz/fuzz.sh replay build-fuzz-prod/bin

fuzz: fuzz-build ## Run every harness under AFL++ for FUZZ_SECONDS each; fail on any crash or hang
	sh fuzz/fuzz.sh afl $(FUZZ_SECONDS) $(FUZZ_NAMES)

fuzz-seeds: ## Regenerate the seed corpora in fuzz/corpus/ from the fixed bases
	$(MAKE) BUILD=build-fuzz-replay $(call FUZZ_REPLAY_FLAGS,$(FUZZ_DEFINE)) build-fuzz-replay/bin/mkseeds
	rm -rf fuzz/corpus
	build-fuzz-replay/bin/mkseeds fuzz/corpus
