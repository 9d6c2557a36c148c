#!/usr/bin/env bash
# spec_example.sh - checks that the worked example in SPEC.md (Appendix A) is what
# the encoder writes today: the lines between the markers
#   <!-- spec-example:begin -->  and  <!-- spec-example:end -->
# must be byte for byte the output of tools/spec_example.py for DCR_BINARY.
#
# usage: tests/spec_example.sh SPEC_PATH DCR_BINARY
#
# Prints a unified diff on a mismatch, then a last line "spec example: N passed,
# M failed"; exits 0 when it matches, 1 otherwise (2 on a usage error). Needs
# python3, xxhsum/xxh128sum and zstd (sh tools/deps.sh installs them).
set -u

if [ $# -ne 2 ]; then
  echo "usage: tests/spec_example.sh SPEC_PATH DCR_BINARY" >&2
  exit 2
fi
SPEC=$1
DCR=$2
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BEGIN='<!-- spec-example:begin -->'
END='<!-- spec-example:end -->'

W=$(mktemp -d "${TMPDIR:-/tmp}/dcr-spec-example.XXXXXX") || exit 1
trap 'rm -rf "$W"' EXIT

result() {
  if [ "$1" = pass ]; then
    echo "spec example: 1 passed, 0 failed"
    exit 0
  fi
  echo "spec example: 0 passed, 1 failed"
  exit 1
}

if ! python3 "$HERE/../tools/spec_example.py" "$DCR" >"$W/expected.md"; then
  echo "tools/spec_example.py could not make the example (above)"
  result fail
fi

# The markers must stand alone on their lines, once each, in order; the fragment
# is everything strictly between them.
if ! awk -v b="$BEGIN" -v e="$END" '
    $0 == b { begins++; inside = !ends; next }
    $0 == e { ends++; if (!begins) early = 1; inside = 0; next }
    inside { print }
    END { exit !(begins == 1 && ends == 1 && !early) }' "$SPEC" >"$W/actual.md"; then
  echo "$SPEC: needs the lines '$BEGIN' and '$END', once each, in that order"
  result fail
fi

if diff -u --label "$SPEC (between the markers)" --label "tools/spec_example.py $DCR" \
     "$W/actual.md" "$W/expected.md"; then
  result pass
fi
cat <<EOF

The worked example in $SPEC differs from what $DCR writes (above). If the change
is intended (a format or encoder change; zstd frames also depend on the libzstd
version, see Appendix A), refresh it:
  python3 tools/spec_example.py $DCR >/tmp/spec-example.md &&
  sed -i -e '/^$BEGIN\$/,/^$END\$/{//!d}' -e '/^$BEGIN\$/r /tmp/spec-example.md' $SPEC
EOF
result fail
