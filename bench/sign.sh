#!/usr/bin/env bash
# sign.sh - what signing costs an encode (issue #33; README "Signed bundles"):
# unsigned and signed encodes of the same pair, side by side in one run, through
# the CLI and through Python.
#
#   bash bench/sign.sh [DCR] [--size 256M] [--rates 0.01,0.03] [--threads 1,0]
#                      [--runs 5] [--dir DIR]
#
# For each rate: a BF16 pair from `dcr synth` and a key from `dcr keygen`. Each
# run times, one after the other for each thread count (0: the default count):
#   cli         dcr encode
#   cli+sign    dcr encode --sign (signed in the encode's pass)
#   cli 2-pass  dcr encode, then dcr sign (what encode --sign did before #33)
#   cli+bsign   dcr encode --sign --sign-scope bundle (a bundle signature, no
#               checkpoint hashed: SPEC.md §20.6)
#   py          dcr.encode(...) in Python (the call alone, not the import)
#   py+sign     dcr.encode(..., sign_key=...)
#   py+bsign    dcr.encode(..., sign_key=..., sign_scope="bundle")
# and prints, per rate and thread count, the median wall time of each and the
# signed ones' overhead over the unsigned one of their kind, then the same for CPU
# time (user + system, all threads), which a machine that others load disturbs less. The bundles are
# checked equal byte for byte (cli+sign, 2-pass and py+sign; cli+bsign and
# py+bsign). Needs `make`
# (DCR, default build/dcr, and libdcr.so.1 beside it) and python3.
set -eu
DCR=build/dcr
SIZE=256M RATES=0.01,0.03 THREADS=1,0 RUNS=5 DIR=
case ${1:-} in -*|'') ;; *) DCR=$1; shift ;; esac
while [ $# -gt 0 ]; do
  case $1 in
    --size) SIZE=$2; shift 2 ;;
    --rates) RATES=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --dir) DIR=$2; shift 2 ;;
    *) echo "sign.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
ROOT=$(cd "$(dirname "$0")/.." && pwd)
case $DCR in /*) ;; *) DCR=$PWD/$DCR ;; esac
export PYTHONPATH=$ROOT/python${PYTHONPATH:+:$PYTHONPATH} DCR_LIBRARY
DCR_LIBRARY=$(dirname "$DCR")/libdcr.so.1
PYTHON=${PYTHON:-/usr/bin/python3}
if [ -z "$DIR" ]; then DIR=$(mktemp -d "${TMPDIR:-/tmp}/dcr-sign-bench.XXXXXX"); trap 'rm -rf "$DIR"' EXIT; fi
cd "$DIR"
[ -e k.key ] || "$DCR" keygen k >/dev/null

# timed CMD...: CMD's wall and CPU seconds, on one line
timed() {
  /usr/bin/time -f "%e %U %S" -o time.out "$@" >/dev/null
  awk '{ print $1, $2 + $3 }' time.out
}
# py OUT THREADS [KEY [SCOPE]]: dcr.encode's own wall and CPU seconds (not the import's)
py() {
  "$PYTHON" - "$1" "$2" "${3:-}" "${4:-checkpoints}" <<'PY'
import sys, time, dcr
out, threads, key, scope = sys.argv[1], int(sys.argv[2]), sys.argv[3] or None, sys.argv[4]
t0, c0 = time.perf_counter(), time.process_time()
dcr.encode("base.st", "target.st", out, threads=threads, sign_key=key, sign_scope=scope)
print(time.perf_counter() - t0, time.process_time() - c0)
PY
}

echo "dcr encode, unsigned and signed: $SIZE BF16 pairs (dcr synth), medians of $RUNS runs, seconds"
echo "machine: $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-5s %-7s %-4s | %7s %9s %11s %9s | %7s %8s %8s | %9s %11s %9s %8s %8s\n' rate threads time cli \
  cli+sign "cli 2-pass" cli+bsign py py+sign py+bsign "cli sign" "cli 2-pass" "cli bsign" "py sign" "py bsign"
for rate in ${RATES//,/ }; do
  "$DCR" synth base.st target.st --size "$SIZE" --rate "$rate" -q -f
  for t in ${THREADS//,/ }; do
    rm -f ./*.times
    for _ in $(seq "$RUNS"); do
      timed "$DCR" encode base.st target.st -o u.dcr -f -q --threads "$t" >>cli.times
      timed "$DCR" encode base.st target.st -o s.dcr -f -q --threads "$t" --sign k.key >>sign.times
      { timed "$DCR" encode base.st target.st -o p.dcr -f -q --threads "$t"
        timed "$DCR" sign p.dcr --key k.key --base base.st --target target.st --threads "$t" -q
      } | awk '{ w += $1; c += $2 } END { print w, c }' >>pass2.times
      timed "$DCR" encode base.st target.st -o b.dcr -f -q --threads "$t" --sign k.key --sign-scope bundle >>bsign.times
      py pu.dcr "$t" >>py.times
      py ps.dcr "$t" k.key >>pysign.times
      py pb.dcr "$t" k.key bundle >>pybsign.times
    done
    cmp -s s.dcr p.dcr && cmp -s s.dcr ps.dcr && cmp -s b.dcr pb.dcr ||
      { echo "sign.sh: the signed bundles differ" >&2; exit 1; }
    "$PYTHON" - "$rate" "$t" <<'PY'
import statistics, sys
for col, kind in ((0, "wall"), (1, "cpu")):
    m = {n: statistics.median(float(x.split()[col]) for x in open(n + ".times"))
         for n in ("cli", "sign", "pass2", "bsign", "py", "pysign", "pybsign")}
    pct = lambda a, b: f"{100 * (m[a] / m[b] - 1):+.0f}%"
    print(f"{sys.argv[1]:<5} {sys.argv[2]:<7} {kind:<4} | {m['cli']:7.3f} {m['sign']:9.3f} {m['pass2']:11.3f} "
          f"{m['bsign']:9.3f} | {m['py']:7.3f} {m['pysign']:8.3f} {m['pybsign']:8.3f} | "
          f"{pct('sign', 'cli'):>9} {pct('pass2', 'cli'):>11} {pct('bsign', 'cli'):>9} "
          f"{pct('pysign', 'py'):>8} {pct('pybsign', 'py'):>8}")
PY
  done
done
echo "threads 0: the default count (the CPUs this process may use)"
