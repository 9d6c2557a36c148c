# dcr - the DCR delta bundle library and CLI.   `make help` lists the targets;
# V=1 shows full commands.

# The package version, MAJOR.MINOR.PATCH from include/dcr.h (POSIX sed and paste).
VERSION := $(shell sed -n 's/^\#define DCR_VERSION_[A-Z]* \([0-9][0-9]*\)[[:space:]]*$$/\1/p' include/dcr.h | paste -s -d. -)
# The soname follows the ABI (DCR_ABI_VERSION in include/dcr.h), not the package
# version: libdcr.so.$(SOVERSION) -> libdcr.so.$(VERSION), the real file.
SOVERSION := $(shell sed -n 's/^\#define DCR_ABI_VERSION \([0-9]*\).*/\1/p' include/dcr.h)
# Install locations (make install PREFIX=/usr DESTDIR=/tmp/stage ...). Debian
# multiarch: LIBDIR=$(PREFIX)/lib/x86_64-linux-gnu (dpkg-architecture -qDEB_HOST_MULTIARCH).
PREFIX ?= /usr/local
DESTDIR ?=
BINDIR ?= $(PREFIX)/bin
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
MANDIR ?= $(PREFIX)/share/man
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR ?= $(PREFIX)/share/zsh/site-functions
BUILD ?= build
CC ?= cc
CFLAGS ?= -O2 -g
SANITIZE ?=
V ?= 0
Q := $(if $(filter 1,$(V)),,@)

WARN := -Wall -Wextra -Werror -Wshadow -Wconversion -Wstrict-prototypes \
        -Wmissing-prototypes -Wvla -Wformat=2 -Wundef -Wpointer-arith
PKGS := libzstd libxxhash jansson libarchive libsodium libcrypto libcurl
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS))
PKG_LIBS = $(shell pkg-config --libs $(PKGS))
ALL_CFLAGS = -std=c11 -D_GNU_SOURCE -fPIC -fvisibility=hidden -Iinclude $(WARN) \
             $(CFLAGS) $(SANITIZE) $(PKG_CFLAGS) -MMD -MP
LDLIBS = $(PKG_LIBS) -lpthread -lm

LIB_SRC := $(wildcard format/*.c codec/*.c refit/*.c history/*.c squash/*.c sign/*.c net/*.c)
CLI_SRC := $(wildcard cli/*.c)
TEST_SRC := $(wildcard tests/test_*.c)
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/%.o)
TESTS := $(TEST_SRC:tests/%.c=$(BUILD)/%)

# Keep test objects: they are not intermediates to throw away.
.SECONDARY:

.PHONY: all lib cli deps test check unit asan demo install uninstall clean help \
        vectors vectors-check conformance check-large python-test \
        fuzz-build fuzz-replay fuzz fuzz-bins fuzz-seeds crash-test

# The fuzzing switch (format/common.h) makes checksums always match: it must never
# reach the production build directories.
ifneq ($(findstring FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION,$(CC) $(CFLAGS) $(SANITIZE)),)
ifeq ($(filter build-fuzz%,$(BUILD)),)
$(error FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION is only for build-fuzz* directories, not $(BUILD))
endif
endif

all: lib cli ## Build the library (static and shared) and the dcr program

lib: $(BUILD)/libdcr.a $(BUILD)/libdcr.so ## Build libdcr only

cli: $(BUILD)/dcr ## Build the dcr program

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/libdcr.a: $(LIB_OBJ)
	@echo "  AR      $@"
	$(Q)$(AR) rcs $@ $^

$(BUILD)/libdcr.so: $(LIB_OBJ)
	@echo "  LD      $@"
	$(Q)$(CC) -shared -Wl,-soname,libdcr.so.$(SOVERSION) $(CFLAGS) $(SANITIZE) -o $@.$(VERSION) $^ $(LDLIBS)
	$(Q)ln -sf libdcr.so.$(VERSION) $@.$(SOVERSION)
	$(Q)ln -sf libdcr.so.$(VERSION) $@

$(BUILD)/dcr: $(CLI_OBJ) $(BUILD)/libdcr.a
	@echo "  LD      $@"
	$(Q)$(CC) $(CFLAGS) $(SANITIZE) -o $@ $^ $(LDLIBS)

$(BUILD)/test_%: $(BUILD)/tests/test_%.o $(filter-out $(BUILD)/cli/main.o,$(CLI_OBJ)) $(BUILD)/libdcr.a
	@echo "  LD      $@"
	$(Q)$(CC) $(CFLAGS) $(SANITIZE) -o $@ $^ $(LDLIBS) $(shell pkg-config --libs cmocka)

# The test vector generator (tools/mkvectors.c): an independent writer of the
# format that needs only zstd, xxhash and jansson, not libdcr.
$(BUILD)/mkvectors: $(BUILD)/tools/mkvectors.o
	@echo "  LD      $@"
	$(Q)$(CC) $(CFLAGS) $(SANITIZE) -o $@ $^ $(LDLIBS)

# The 1.1 vector generator (tools/mkvectors11.c, testvectors/v1.1/): the same
# independent bundle builder (tools/bundlegen.h), for sets, RSIZ and the 1.1 dtypes.
$(BUILD)/mkvectors11: $(BUILD)/tools/mkvectors11.o
	@echo "  LD      $@"
	$(Q)$(CC) $(CFLAGS) $(SANITIZE) -o $@ $^ $(LDLIBS)

# The 1.2 vector generator (tools/mkvectors12.c, testvectors/v1.2/): DELTA_CLASSED,
# with the range encoder and class tables of tools/bundlegen.h, not libdcr's.
$(BUILD)/mkvectors12: $(BUILD)/tools/mkvectors12.o
	@echo "  LD      $@"
	$(Q)$(CC) $(CFLAGS) $(SANITIZE) -o $@ $^ $(LDLIBS)

# The 1.3 vector generator (tools/mkvectors13.c, testvectors/v1.3/): DELTA_BANDED,
# with the band tables, prefix codes and Golomb streams of tools/bundlegen.h,
# written from SPEC.md §9.5 alone, not libdcr's (codec/banded.c, codec/golomb.c).
$(BUILD)/mkvectors13: $(BUILD)/tools/mkvectors13.o
	@echo "  LD      $@"
	$(Q)$(CC) $(CFLAGS) $(SANITIZE) -o $@ $^ $(LDLIBS)

# The apply journal vector generator (tools/mkjournals.c, SPEC.md §18): written from
# the spec alone, with zstd, xxhash and jansson, not libdcr.
$(BUILD)/mkjournals: $(BUILD)/tools/mkjournals.o
	@echo "  LD      $@"
	$(Q)$(CC) $(CFLAGS) $(SANITIZE) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/%.o: tests/%.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	$(Q)$(CC) $(ALL_CFLAGS) -Iformat -Icodec -Icli $(shell pkg-config --cflags cmocka) -c $< -o $@

deps: ## Install missing build dependencies (Debian packages; needs root)
	@sh tools/deps.sh

# Each unit test program is a target of its own too (unit-test_NAME), for check.
UNIT_RUNS := $(TESTS:$(BUILD)/%=unit-%)

unit: $(UNIT_RUNS) ## Build and run the cmocka unit tests

$(UNIT_RUNS): unit-%: $(BUILD)/%
	@echo "== $<"; $<

# The quick suite. Each test is a target of its own, check-NAME, so that make runs
# them side by side: `make check` runs CHECK_JOBS at once (default: the CPUs + 1,
# as many wait on processes they kill, on nginx or on fsync rather than compute),
# each one's output printed whole when it ends. `make check CHECK_JOBS=1` runs them
# one after another; `make check-NAME` runs one.
CHECK_JOBS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) + 1 )))
CHECK_TESTS := cli crash crash-dir id refit ops apply-output set squash sign hostile resource valgrind conformance history history-v1 history-v1.1 history-containers append-vectors crash-history spec-lint sign-vectors range-vectors walk-vectors http history-http spec-example abi readme install

check: ## Unit tests, CLI round trips and bad-input tests, test vectors (CHECK_JOBS at once)
	@$(MAKE) --no-print-directory -j$(CHECK_JOBS) --output-sync=target check-all

# CHECK_SKIP: tests a pass leaves out (asan: those that run no code of the build).
CHECK_SKIP ?=
check-all: $(UNIT_RUNS) vectors-check $(addprefix check-,$(filter-out $(CHECK_SKIP),$(CHECK_TESTS)))
.PHONY: check-all $(CHECK_TESTS:%=check-%) $(UNIT_RUNS)

$(CHECK_TESTS:%=check-%): $(BUILD)/dcr $(BUILD)/libdcr.so
check-install: all

check-cli:
	bash tests/cli_test.sh $(BUILD)/dcr
check-crash:
	bash tests/crash_test.sh $(BUILD)/dcr 24
check-crash-dir:
	bash tests/crash_dir_test.sh $(BUILD)/dcr 16
check-id:
	bash tests/cli_id_test.sh $(BUILD)/dcr
check-refit:
	bash tests/cli_refit_test.sh $(BUILD)/dcr
check-ops:
	bash tests/cli_ops_test.sh $(BUILD)/dcr
check-apply-output:
	bash tests/cli_apply_output_test.sh $(BUILD)/dcr
check-set:
	bash tests/cli_set_test.sh $(BUILD)/dcr
check-squash:
	bash tests/cli_squash_test.sh $(BUILD)/dcr
check-sign:
	bash tests/cli_sign_test.sh $(BUILD)/dcr
check-hostile:
	SANITIZE="$(SANITIZE)" bash tests/hostile_test.sh $(BUILD)/dcr
check-resource:
	SANITIZE="$(SANITIZE)" python3 tests/resource_vectors.py $(BUILD)/dcr testvectors/resource-v1
check-valgrind:
	SANITIZE="$(SANITIZE)" bash tests/valgrind_test.sh $(BUILD)/dcr
check-conformance:
	bash tests/conformance.sh $(BUILD)/dcr testvectors
check-history:
	bash tests/cli_history_test.sh $(BUILD)/dcr
check-history-v1:
	bash tests/history_vectors.sh $(BUILD)/dcr testvectors/history-v1
check-history-v1.1:
	bash tests/history_vectors.sh $(BUILD)/dcr testvectors/history-v1.1
check-history-containers:
	bash tests/history_vectors.sh $(BUILD)/dcr testvectors/history-containers-v1
check-append-vectors:
	bash tests/append_vectors.sh $(BUILD)/dcr testvectors/history-append-v1
check-crash-history:
	bash tests/crash_history_test.sh $(BUILD)/dcr 8
check-spec-lint:
	python3 tests/spec_lint.py SPEC.md testvectors/index.json testvectors/v1.1/index.json testvectors/v1.2/index.json testvectors/v1.3/index.json testvectors/journal-v1/index.json testvectors/journal-v1.1/index.json testvectors/journal-v1.2/index.json testvectors/history-v1/index.json testvectors/history-v1.1/index.json testvectors/sign-v1/index.json testvectors/sign-v2/index.json testvectors/range-v1/index.json testvectors/resource-v1/index.json testvectors/walk-v1/index.json testvectors/history-containers-v1/index.json testvectors/history-append-v1/index.json
check-sign-vectors:
	bash tests/sign_vectors.sh $(BUILD)/dcr testvectors/sign-v1
	bash tests/sign_vectors.sh $(BUILD)/dcr testvectors/sign-v2
check-range-vectors:
	python3 tests/range_vectors.py $(BUILD)/dcr testvectors/range-v1
check-walk-vectors:
	python3 tests/walk_vectors.py $(BUILD)/dcr testvectors/walk-v1
check-http:
	bash tests/http_test.sh $(BUILD)/dcr
check-history-http:
	bash tests/history_http_test.sh $(BUILD)/dcr
check-spec-example:
	bash tests/spec_example.sh SPEC.md $(BUILD)/dcr
check-abi:
	bash tests/abi_test.sh $(BUILD)
check-readme:
	bash tests/readme_test.sh $(BUILD)/dcr
check-install:
	bash tests/install_test.sh $(BUILD)

crash-test: $(BUILD)/dcr ## The long campaign: kill -9 in-place applies and appends at random moments, rerun, compare (CRASH_COUNT=300, ~15 min)
	bash tests/crash_test.sh $(BUILD)/dcr $${CRASH_COUNT:-300}
	bash tests/crash_dir_test.sh $(BUILD)/dcr $${CRASH_COUNT:-300}
	bash tests/crash_history_test.sh $(BUILD)/dcr $${CRASH_COUNT:-300}

# The Python package (python/, issue #14) against this build's shared library and
# CLI, with Debian's python3-numpy and python3-pytest. Not part of check: check
# also runs under ASan, whose library Python cannot load.
python-test: $(BUILD)/libdcr.so $(BUILD)/dcr ## Test the Python package (python/) with pytest
	DCR_LIBRARY=$(BUILD)/libdcr.so.$(SOVERSION) DCR_CLI=$(BUILD)/dcr /usr/bin/python3 -m pytest -q python/tests

check-large: $(BUILD)/dcr ## The largest chunk (2^30) end to end: encode, validate, apply (~1 min, ~12 GiB of memory)
	bash tests/large_chunk.sh $(BUILD)/dcr

vectors: $(BUILD)/mkvectors $(BUILD)/mkvectors11 $(BUILD)/mkvectors12 $(BUILD)/mkvectors13 $(BUILD)/mkjournals ## Rewrite testvectors/ (index.json, v1/, v1.1/, v1.2/, v1.3/, journal-v1/, journal-v1.1/, journal-v1.2/, sign-v1/, sign-v2/, range-v1/, resource-v1/, walk-v1/, history-containers-v1/, history-append-v1/) from tools/mkvectors.c, tools/mkvectors11.c, tools/mkvectors12.c, tools/mkvectors13.c, tools/mkjournals.c and tools/mk*vectors.py
	rm -rf testvectors/v1
	$(BUILD)/mkvectors testvectors
	rm -rf testvectors/v1.1
	$(BUILD)/mkvectors11 testvectors
	rm -rf testvectors/v1.2
	$(BUILD)/mkvectors12 testvectors
	rm -rf testvectors/v1.3
	$(BUILD)/mkvectors13 testvectors
	rm -rf testvectors/journal-v1 testvectors/journal-v1.1 testvectors/journal-v1.2
	$(BUILD)/mkjournals testvectors
	rm -rf testvectors/sign-v1 testvectors/sign-v2
	python3 tools/mksignvectors.py testvectors
	rm -rf testvectors/range-v1
	python3 tools/mkrangevectors.py testvectors
	rm -rf testvectors/resource-v1
	python3 tools/mkresourcevectors.py testvectors
	rm -rf testvectors/walk-v1
	python3 tools/mkwalkvectors.py testvectors
	rm -rf testvectors/history-containers-v1
	python3 tools/mkcontainervectors.py testvectors
	rm -rf testvectors/history-append-v1
	python3 tools/mkappendvectors.py testvectors

# $(call python_vectors_check,GENERATOR,FOLDER,WHAT): testvectors/FOLDER must be
# exactly what tools/GENERATOR.py writes.
define python_vectors_check
	t=$$(mktemp -d "$${TMPDIR:-/tmp}/dcr-$(2).XXXXXX") && \
	python3 tools/$(1).py "$$t" >/dev/null && \
	if diff -r "$$t/$(2)" testvectors/$(2); then \
	  rm -rf "$$t"; echo "vectors-check: testvectors/$(2) is exactly what tools/$(1).py writes"; \
	else \
	  echo "$(3) are published with the format: fix the code, not the vectors; a new version" \
	       "adds its own folder (testvectors/README.md)."; \
	  rm -rf "$$t"; exit 1; \
	fi
endef

# $(call minor_vectors_check,GENERATOR,VERSION): a minor version's vectors, written
# again by tools/GENERATOR.c into a temporary folder, must be testvectors/vVERSION
# byte for byte, and each repaired invalid vector must be valid.
define minor_vectors_check
t=$$(mktemp -d "$${TMPDIR:-/tmp}/dcr-$(1).XXXXXX") && \
	$(BUILD)/$(1) "$$t" --repaired "$$t/repaired" && \
	if diff -r "$$t/v$(2)" testvectors/v$(2); then \
	  echo "vectors-check: testvectors/v$(2) is exactly what tools/$(1).c writes"; \
	else \
	  echo "vectors-check: testvectors/v$(2) differs from what tools/$(1).c writes (committed with" \
	       "$$(grep -o '"zstd_version": "[^"]*"' testvectors/v$(2)/index.json), here $$(grep -o '"zstd_version": "[^"]*"' "$$t/v$(2)/index.json"))."; \
	  echo "testvectors/v$(2) is frozen since $(2) final (SPEC.md §12, R-VER-2): fix the code, not the" \
	       "vectors; add new vectors only after the existing ones (tools/$(1).c), or in a new minor version's folder."; \
	  rm -rf "$$t"; exit 1; \
	fi; \
	if $(BUILD)/test_vectors "$$t/repaired" >"$$t/repaired.log" 2>&1; then \
	  rm -rf "$$t"; echo "vectors-check: every repaired $(2) invalid vector is valid"; \
	else \
	  grep -E '^ERROR|FAILED' "$$t/repaired.log"; \
	  echo "vectors-check: a repaired $(2) invalid vector is not valid: the vector breaks a second rule"; \
	  rm -rf "$$t"; exit 1; \
	fi
endef

vectors-check: $(BUILD)/mkvectors $(BUILD)/mkvectors11 $(BUILD)/mkvectors12 $(BUILD)/mkvectors13 $(BUILD)/mkjournals $(BUILD)/test_vectors ## Regenerate the vectors in a temporary folder; fail if a byte differs or a repaired vector is not valid
	@t=$$(mktemp -d "$${TMPDIR:-/tmp}/dcr-vectors.XXXXXX") && \
	$(BUILD)/mkvectors "$$t" --repaired "$$t/repaired" && \
	if diff -r "$$t/v1" testvectors/v1 && cmp "$$t/index.json" testvectors/index.json; then \
	  echo "vectors-check: testvectors/ is exactly what tools/mkvectors.c writes"; \
	else \
	  echo "vectors-check: testvectors/ differs from what tools/mkvectors.c writes (committed with" \
	       "$$(grep -o '"zstd_version": "[^"]*"' testvectors/index.json), here $$(grep -o '"zstd_version": "[^"]*"' "$$t/index.json"))."; \
	  echo "testvectors/v1 is frozen since 1.0 final (SPEC.md §12, R-VER-3): fix the code, not the" \
	       "vectors; a new minor version adds its own vectors (testvectors/README.md)."; \
	  rm -rf "$$t"; exit 1; \
	fi; \
	if $(BUILD)/test_vectors "$$t/repaired" >"$$t/repaired.log" 2>&1; then \
	  rm -rf "$$t"; echo "vectors-check: every repaired invalid vector is valid"; \
	else \
	  grep -E '^ERROR|FAILED' "$$t/repaired.log"; \
	  echo "vectors-check: a repaired invalid vector is not valid: the vector breaks a second rule"; \
	  rm -rf "$$t"; exit 1; \
	fi
	@$(call minor_vectors_check,mkvectors11,1.1)
	@$(call minor_vectors_check,mkvectors12,1.2)
	@$(call minor_vectors_check,mkvectors13,1.3)
	@$(call python_vectors_check,mksignvectors,sign-v1,The signature 1.0 vectors (SPEC.md §20))
	@$(call python_vectors_check,mksignvectors,sign-v2,The signature 2.0 vectors (SPEC.md §20.6))
	@$(call python_vectors_check,mkrangevectors,range-v1,The range reader vectors (SPEC.md §21))
	@$(call python_vectors_check,mkresourcevectors,resource-v1,The resource vectors (SPEC.md §11, §14))
	@$(call python_vectors_check,mkwalkvectors,walk-v1,The set walk vectors (SPEC.md §2.3))
	@$(call python_vectors_check,mkcontainervectors,history-containers-v1,The history container vectors (SPEC.md §19.1))
	@$(call python_vectors_check,mkappendvectors,history-append-v1,The append journal vectors (SPEC.md §19.6))
	@t=$$(mktemp -d "$${TMPDIR:-/tmp}/dcr-journals.XXXXXX") && \
	$(BUILD)/mkjournals "$$t" && \
	if diff -r "$$t/journal-v1" testvectors/journal-v1 && diff -r "$$t/journal-v1.1" testvectors/journal-v1.1 && \
	   diff -r "$$t/journal-v1.2" testvectors/journal-v1.2; then \
	  rm -rf "$$t"; echo "vectors-check: testvectors/journal-v1, journal-v1.1 and journal-v1.2 are exactly what tools/mkjournals.c writes"; \
	else \
	  echo "vectors-check: testvectors/journal-v1 differs from what tools/mkjournals.c writes (committed with" \
	       "$$(grep -o '"zstd_version": "[^"]*"' testvectors/journal-v1/index.json), here $$(grep -o '"zstd_version": "[^"]*"' "$$t/journal-v1/index.json"))."; \
	  echo "The apply journal 1.0 vectors (SPEC.md §18) are published with the format: fix the code," \
	       "not the vectors; a new journal version adds its own folder (testvectors/README.md)."; \
	  rm -rf "$$t"; exit 1; \
	fi

conformance: $(BUILD)/test_vectors $(BUILD)/dcr ## Play every test vector through the library and the dcr CLI
	$(BUILD)/test_vectors
	bash tests/conformance.sh $(BUILD)/dcr testvectors

asan: ## Run every test under AddressSanitizer and UndefinedBehaviorSanitizer (but the SPEC lint, ABI and install checks)
	$(MAKE) BUILD=build-asan CFLAGS="-O1 -g -fno-omit-frame-pointer" \
	  SANITIZE="-fsanitize=address,undefined -fno-sanitize-recover=all" \
	  CHECK_SKIP="spec-lint abi install" check

test: deps ## Install dependencies, build with -Werror, run all tests plain and sanitized, replay fuzz corpora
	$(MAKE) all
	$(MAKE) check
	$(MAKE) python-test
	$(MAKE) check-large
	$(MAKE) asan
	$(MAKE) fuzz-replay

include fuzz/fuzz.mk

demo: deps ## Make a sample BF16 pair, encode, validate, apply, and report sizes
	$(MAKE) all
	sh tools/demo.sh $(BUILD)/dcr

install: all ## Install dcr, libdcr, dcr.h, libdcr.pc, man page, completions (PREFIX DESTDIR LIBDIR MANDIR ...)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(PKGCONFIGDIR) \
	  $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR)
	install -m 755 $(BUILD)/dcr $(DESTDIR)$(BINDIR)/
	install -m 644 include/dcr.h $(DESTDIR)$(INCLUDEDIR)/
	install -m 644 $(BUILD)/libdcr.a $(DESTDIR)$(LIBDIR)/
	install -m 755 $(BUILD)/libdcr.so.$(VERSION) $(DESTDIR)$(LIBDIR)/
	ln -sf libdcr.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libdcr.so.$(SOVERSION)
	ln -sf libdcr.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/libdcr.so
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' \
	  -e 's|@VERSION@|$(VERSION)|' libdcr.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/libdcr.pc
	chmod 644 $(DESTDIR)$(PKGCONFIGDIR)/libdcr.pc
	install -m 644 doc/dcr.1 $(DESTDIR)$(MANDIR)/man1/
	install -m 644 completions/dcr.bash $(DESTDIR)$(BASHCOMPDIR)/dcr
	install -m 644 completions/_dcr $(DESTDIR)$(ZSHCOMPDIR)/

uninstall: ## Remove what install put in place (the same variables)
	rm -f $(DESTDIR)$(BINDIR)/dcr $(DESTDIR)$(INCLUDEDIR)/dcr.h \
	  $(DESTDIR)$(LIBDIR)/libdcr.a $(DESTDIR)$(LIBDIR)/libdcr.so $(DESTDIR)$(LIBDIR)/libdcr.so.* \
	  $(DESTDIR)$(PKGCONFIGDIR)/libdcr.pc $(DESTDIR)$(MANDIR)/man1/dcr.1 \
	  $(DESTDIR)$(BASHCOMPDIR)/dcr $(DESTDIR)$(ZSHCOMPDIR)/_dcr

clean: ## Remove build outputs
	rm -rf build build-asan build-fuzz-*

help: ## List the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 12

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(BUILD)/tools/mkvectors.d $(BUILD)/tools/mkvectors11.d \
         $(BUILD)/tools/mkvectors12.d $(BUILD)/tools/mkvectors13.d $(BUILD)/tools/mkjournals.d $(FUZZ_OBJ:.o=.d) \
         $(wildcard $(BUILD)/tests/*.d)
