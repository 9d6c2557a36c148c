#!/bin/sh
# fuzz.sh - runs the fuzz harnesses (fuzz/README.md); called by the Makefile.
#   fuzz.sh has-libfuzzer          exit 0 if clang can link -fsanitize=fuzzer
#   fuzz.sh replay BINDIR          replay corpora, regressions and test vectors
#   fuzz.sh afl SECONDS NAME...    afl-fuzz each harness for SECONDS; exit 1 if any
#                                  crash or hang was saved (afl-fuzz 4.04c exits 0)
# Environment for afl: FUZZ_OUT (default build-fuzz-afl/out), FUZZ_RESUME=1 keeps
# and resumes earlier output, FUZZ_TIMEOUT_MS (default 2000) per input,
# FUZZ_SEEDS="DIR..." adds DIR/NAME (e.g. an earlier run's queue) to the seeds.
set -u
cd "$(dirname "$0")/.."

corpora() { # the directories and files a harness replays
  for d in fuzz/corpus/"$1" fuzz/regressions/"$1"; do [ -d "$d" ] && printf '%s\n' "$d"; done
  case "$1" in
    validate | apply)
      for d in fuzz/corpus/validate fuzz/corpus/apply fuzz/regressions/validate fuzz/regressions/apply; do
        [ -d "$d" ] && printf '%s\n' "$d"
      done
      if [ -d testvectors/v1 ]; then
        find testvectors/v1 -name '*.dcr' -type f | sort
      fi ;;
  esac
}

# afl-fuzz 4.04c can leave a stopped persistent-mode child of the CmpLog fork
# server behind (in a session of its own, reparented to init): end the orphans
# that run this checkout's harness binaries.
orphans() {
  for b in "$@"; do
    [ -x "$b" ] || continue
    exe=$(readlink -f "$b")
    for p in /proc/[0-9]*; do
      [ "$(readlink "$p/exe" 2>/dev/null)" = "$exe" ] || continue
      ppid=$(sed 's/^.*) [A-Za-z] \([0-9]*\) .*$/\1/' "$p/stat" 2>/dev/null)
      [ "$ppid" = 1 ] && kill -KILL "${p#/proc/}" 2>/dev/null
    done
  done
  return 0
}

case "${1:-}" in
has-libfuzzer)
  command -v clang >/dev/null 2>&1 || exit 1
  tmp=$(mktemp -d) || exit 1
  printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' >"$tmp/t.c"
  clang -fsanitize=fuzzer,address "$tmp/t.c" -o "$tmp/t" >/dev/null 2>&1
  rc=$?
  rm -rf "$tmp"
  exit $rc ;;
replay)
  bindir=$2
  status=0
  for bin in "$bindir"/fuzz_*; do
    name=${bin##*/fuzz_}
    # shellcheck disable=SC2046
    # the same memory limits as a fuzzing run (above): a replayed input that asked
    # for much would fail here too
    if ! ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}:max_allocation_size_mb=${FUZZ_MALLOC_MB:-2048}:hard_rss_limit_mb=${FUZZ_RSS_MB:-1024} \
       UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 "$bin" $(corpora "$name" | sort -u); then
      echo "fuzz-replay: $bin failed" >&2
      status=1
    fi
  done
  exit $status ;;
afl)
  seconds=$2
  shift 2
  out=${FUZZ_OUT:-build-fuzz-afl/out}
  command -v afl-fuzz >/dev/null 2>&1 || { echo "fuzz: afl-fuzz not found (sh tools/deps.sh fuzz)" >&2; exit 1; }
  mkdir -p "$out"
  status=0
  for name in "$@"; do
    bin=build-fuzz-afl/bin/fuzz_$name
    cmplog=build-fuzz-cmplog/bin/fuzz_$name
    seeds=$out/$name.seeds
    rm -rf "$seeds"
    mkdir -p "$seeds"
    # the replay inputs (corpus, regressions, test vectors) are the seeds
    { corpora "$name"; for d in ${FUZZ_SEEDS:-}; do [ -d "$d/$name" ] && echo "$d/$name"; done; } |
      sort -u | while read -r f; do
      if [ -d "$f" ]; then find "$f" -maxdepth 1 -type f; else printf '%s\n' "$f"; fi
    done | {
      i=0
      while read -r src; do i=$((i + 1)) && cp "$src" "$seeds/$i-${src##*/}"; done
    }
    [ -n "$(ls "$seeds")" ] || printf 'x' >"$seeds/empty"
    if [ "${FUZZ_RESUME:-0}" != 1 ]; then rm -rf "${out:?}/$name"; fi
    cl=""
    [ -x "$cmplog" ] && cl="-c $cmplog"
    echo "== afl-fuzz $name for ${seconds}s"
    # the harnesses' temporary files: afl-fuzz kills them without atexit cleanup
    tmp=$out/$name.tmp
    rm -rf "$tmp" && mkdir -p "$tmp" && tmp=$(cd "$tmp" && pwd)
    # In its own process group, so that it can be ended with its children.
    # shellcheck disable=SC2086
    # Memory limits that a tiny input asking for much trips as a crash (issue 18):
    # the harnesses' budget is 64 MiB (fuzz_common.h). afl-fuzz's own -m cannot be
    # used (ASan reserves terabytes of address space), so ASan enforces them: no
    # resident set over FUZZ_RSS_MB (1024 MiB), no single allocation over
    # FUZZ_MALLOC_MB (2048 MiB: a declared 1 GiB chunk's buffers are legitimate).
    ASAN_OPTIONS=abort_on_error=1:symbolize=0:detect_leaks=0:allocator_may_return_null=0:max_allocation_size_mb=${FUZZ_MALLOC_MB:-2048}:hard_rss_limit_mb=${FUZZ_RSS_MB:-1024} \
    TMPDIR=$tmp AFL_NO_UI=1 AFL_AUTORESUME=1 AFL_SKIP_CPUFREQ=1 AFL_NO_AFFINITY=1 \
    AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_SUPPRESS_BANNER=1 \
      setsid -w afl-fuzz -V "$seconds" -t "${FUZZ_TIMEOUT_MS:-2000}" -m none -x fuzz/dcr.dict \
        -i "$seeds" -o "$out/$name" \
        $cl -- "$bin" >"$out/$name.log" 2>&1 &
    pid=$!
    trap 'kill -TERM "-$pid" 2>/dev/null; exit 130' INT TERM
    wait "$pid"
    rc=$?
    trap - INT TERM
    kill -KILL "-$pid" 2>/dev/null
    orphans "$bin" "$cmplog"
    rm -rf "$tmp"
    stats=$out/$name/default/fuzzer_stats
    if [ ! -f "$stats" ]; then
      echo "fuzz: afl-fuzz $name did not start (exit $rc); see $out/$name.log:" >&2
      tail -n 20 "$out/$name.log" >&2
      status=1
      continue
    fi
    crashes=$(find "$out/$name/default/crashes" -name 'id:*' -type f | wc -l)
    hangs=$(find "$out/$name/default/hangs" -name 'id:*' -type f | wc -l)
    get() { sed -n "s/^$1 *: *//p" "$stats"; }
    echo "   $name: execs $(get execs_done), $(get execs_per_sec)/s, corpus $(get corpus_count), edges $(get edges_found) ($(get bitmap_cvg)), crashes $crashes, hangs $hangs, run_time $(get run_time)s"
    if [ "$crashes" -gt 0 ] || [ "$hangs" -gt 0 ]; then
      echo "fuzz: $name: crashes or hangs saved in $out/$name/default/{crashes,hangs}" >&2
      status=1
    fi
  done
  exit $status ;;
*)
  sed -n '2,9p' "$0" >&2
  exit 2 ;;
esac
