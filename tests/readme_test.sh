#!/usr/bin/env bash
# readme_test.sh DCR - the documentation against the program it describes:
#   README.md  the fenced sh blocks after a <!-- readme-test --> line run, in an empty
#              directory with DCR first on PATH as dcr, and must succeed; every
#              'dcr COMMAND ...' line of every sh block names a command and options
#              that exist; the command table after <!-- readme-commands --> lists
#              exactly the commands of 'dcr --help', and 'dcr help CMD' works for each;
#              the keys of the --json tables are those of each command's output.
#   doc/dcr.1  renders without warnings (groff -ww); every option that
#              'dcr CMD --help' lists is described (a .TP item) in the page's
#              "dcr CMD" subsection or under COMMON OPTIONS, and every option
#              described there exists; .TH names the version 'dcr --version' prints.
#   completions/dcr.bash and completions/_dcr  offer the commands and, for each, the
#              long options of its --help.
# Output is TAP-like: "ok - ..." / "not ok - ...", then a count; exit 1 on a failure.
set -u
DCR=${1:?usage: readme_test.sh DCR}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
README=$ROOT/README.md
MAN=$ROOT/doc/dcr.1
case $DCR in /*) ;; *) DCR=$PWD/$DCR ;; esac
[ -x "$DCR" ] || { echo "not ok - setup: $DCR is not an executable file"; exit 1; }
export LC_ALL=C

W=$(mktemp -d "${TMPDIR:-/tmp}/dcr-readme.XXXXXX") || exit 3
trap 'rm -rf "$W"' EXIT
trap 'exit 130' INT TERM
mkdir "$W/bin" && ln -s "$DCR" "$W/bin/dcr"

PASS=0 FAIL=0
ok() { PASS=$((PASS + 1)); echo "ok - $*"; }
notok() { FAIL=$((FAIL + 1)); echo "not ok - $*"; }

# The commands 'dcr --help' lists (help included).
mapfile -t COMMANDS < <("$DCR" --help | sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z]*\) .*/\1/p')
[ "${#COMMANDS[@]}" -ge 7 ] || { notok "dcr --help lists ${#COMMANDS[@]} commands"; exit 1; }

# help_options CMD: the options 'dcr CMD --help' lists, one per line: the long form,
# and the short one where there is one ("  -o, --output BUNDLE  ..." gives --output, -o).
help_options() {
  "$DCR" "$1" --help | awk '/^ +-/ {
      sub(/^ +/, "")
      if ($0 ~ /^-[A-Za-z0-9], /) { print substr($0, 1, 2); $0 = substr($0, 5) }
      if (match($0, /^--[a-z][a-z0-9-]*/)) print substr($0, 1, RLENGTH)
    }' | sort -u
}
in_list() { local x=$1; shift; local y; for y; do [ "$x" = "$y" ] && return 0; done; return 1; }

# ---- README.md ----------------------------------------------------------------------

# sh_blocks MARKER: the fenced ```sh blocks (after MARKER on the line before, if given),
# separated by a line holding only \x1e.
sh_blocks() {
  awk -v marker="${1:-}" '
    /^```/ && inblock { inblock = 0; printf "\036\n"; next }
    inblock { print; next }
    /^```sh[ \t]*$/ { if (marker == "" || armed) inblock = 1; armed = 0; next }
    marker != "" && index($0, marker) == 1 { armed = 1; next }
    NF { armed = 0 }
  ' "$README"
}

# 1. Every 'dcr ...' line of an sh block: a known command, its options in its --help.
bad=
n=0
while IFS= read -r line; do
  line=${line%%#*}                        # no comment
  line=${line%%>*}                        # no redirection
  read -r -a w <<<"$line"
  [ "${w[0]:-}" = dcr ] || continue
  n=$((n + 1))
  cmd=${w[1]:-}
  if ! in_list "$cmd" "${COMMANDS[@]}"; then bad+=" [$line: no command '$cmd']"; continue; fi
  [ "$cmd" = help ] && continue
  mapfile -t have < <(help_options "$cmd")
  while IFS= read -r opt; do
    in_list "$opt" "${have[@]}" || bad+=" [$line: 'dcr $cmd --help' has no $opt]"
  done < <(grep -oE -- '(^|[][ |])--?[A-Za-z][A-Za-z0-9-]*' <<<"$line" | sed 's/^[][ |]//')
done < <(sh_blocks | tr -d '\036')
if [ -z "$bad" ]; then ok "README: the $n dcr command lines in sh blocks use existing commands and options"
else notok "README: dcr command lines that do not match the program:$bad"; fi

# 2. The marked blocks run.
nblocks=0
while IFS= read -r -d $'\036' block; do
  block=${block#$'\n'}
  [ -n "${block//[[:space:]]/}" ] || continue
  nblocks=$((nblocks + 1))
  d=$W/run$nblocks
  mkdir "$d"
  if (cd "$d" && PATH="$W/bin:$PATH" bash -e -o pipefail -c "$block") >"$d.out" 2>&1; then
    ok "README: readme-test block $nblocks runs ($(grep -c . <<<"$block") lines)"
  else
    notok "README: readme-test block $nblocks failed (exit $?):"
    printf '%s\n' "$block" | sed 's/^/    | /'
    tail -n 15 "$d.out" | sed 's/^/    > /'
  fi
  rm -rf "$d"
done < <(sh_blocks '<!-- readme-test -->')
[ "$nblocks" -ge 1 ] || notok "README: no sh block after a <!-- readme-test --> line"

# 3. The command table against 'dcr --help' and 'dcr help CMD'.
# shellcheck disable=SC2016
mapfile -t TABLE < <(awk '
    index($0, "<!-- readme-commands -->") == 1 { on = 1; next }
    on && /^\|/ { print; seen = 1; next }
    on && seen { exit }
  ' "$README" | sed -n 's/^| [`]dcr \([a-z][a-z]*\)[`] |.*/\1/p')
if [ "${#TABLE[@]}" -eq 0 ]; then
  notok "README: no command table after <!-- readme-commands -->"
else
  bad=
  for c in "${TABLE[@]}"; do
    in_list "$c" "${COMMANDS[@]}" || bad+=" '$c' is in the table but not in 'dcr --help';"
    "$DCR" help "$c" >"$W/help.out" 2>&1 && [ -s "$W/help.out" ] || bad+=" 'dcr help $c' failed;"
  done
  for c in "${COMMANDS[@]}"; do
    in_list "$c" "${TABLE[@]}" || bad+=" '$c' (dcr --help) is missing from the table;"
  done
  if [ -z "$bad" ]; then ok "README: the command table is the ${#TABLE[@]} commands of 'dcr --help'"
  else notok "README: command table:$bad"; fi
fi

# 3b. The keys of 'dcr validate --json' against the README's key table (the rows
# after "dcr validate --json" prints), its checks row and its stage table: a run
# that reports an error (a signature required of an unsigned bundle) and one that
# passes every stage (--base, --target, a signed bundle).
if (cd "$W" && "$DCR" synth a.st b.st --size 256K -q && "$DCR" encode a.st b.st -o s.dcr -q &&
    cp s.dcr u.dcr && "$DCR" keygen k >/dev/null 2>&1 && "$DCR" sign s.dcr --key k.key --base a.st --target b.st -q &&
    { "$DCR" validate u.dcr --json --require-signature k.pub >v1.json; [ $? = 1 ]; } &&
    "$DCR" validate s.dcr --json --require-signature k.pub --base a.st --target b.st >v2.json); then
  out=$(python3 - "$README" "$W/v1.json" "$W/v2.json" <<'PY'
import json, re, sys
text = open(sys.argv[1], encoding="utf-8").read()
def table_after(marker, start=0):  # the markdown table at marker, up to its blank line
    at = text.index(marker, start)
    return text[at:].split("\n\n", 1)[0]
table = dict(re.findall(r"^\| `([a-z_\[\].]+)` \| [a-z ]+ \| (.*) \|$",
                        table_after("| key | type | meaning |", text.index("`dcr validate --json` prints")), re.M))
stages = set(re.findall(r"^\| `([a-z]+)` \| ", table_after("| stage | what |"), re.M))
runs = [json.load(open(p)) for p in sys.argv[2:]]
have = {k for r in runs for k in r} | {"errors[]." + k for r in runs for e in r["errors"] for k in e}
bad = ["%s: in --json, not in the table" % k for k in sorted(have - set(table))]
bad += ["%s: in the table, not in --json" % k for k in sorted(set(table) - have)]
for r in runs:
    for k in r["checks"]:
        if "`%s`" % k not in table.get("checks", ""):
            bad.append("checks.%s: not in the checks row" % k)
        if k not in stages:
            bad.append("stage %s: not in the stage table" % k)
    for e in r["errors"]:
        if "`%s`" % e["stage"] not in table.get("errors[].stage", ""):
            bad.append("stage %s: not in the errors[].stage row" % e["stage"])
print("; ".join(bad))
PY
)
  if [ -z "$out" ]; then ok "README: the keys and stages of 'dcr validate --json' are its table's"
  else notok "README: dcr validate --json: $out"; fi
else
  notok "README: could not make the bundles for the 'dcr validate --json' check"
fi

# 3c. The other commands' --json keys against the README's table after
# <!-- readme-json -->: each row's command run on small real files (failing runs
# too, where their documents have other keys), the top-level keys of its output
# (of each object, for dcr id's array) exactly the row's; and every command whose
# --help offers --json has a row (validate: its own table, 3b).
J=$W/json
if mkdir "$J" && (cd "$J" && "$DCR" synth a.st b.st --size 256K -q && "$DCR" encode a.st b.st -o s.dcr -q &&
    cp s.dcr u.dcr && cp a.st ip.st && "$DCR" keygen k >/dev/null 2>&1 &&
    "$DCR" sign s.dcr --key k.key --base a.st --target b.st -q &&
    "$DCR" history create r.tar --keyframe a.st s.dcr -q && echo junk >junk); then
  json_commands=()
  for c in "${COMMANDS[@]}"; do
    [ "$c" != help ] && help_options "$c" | grep -qx -- --json && json_commands+=("$c")
  done
  out=$(cd "$J" && python3 - "$README" "$DCR" "${json_commands[@]}" <<'PY'
import json, re, subprocess, sys
readme, dcr, json_commands = sys.argv[1], sys.argv[2], sys.argv[3:]
text = open(readme, encoding="utf-8").read()
table = text[text.index("<!-- readme-json -->"):].split("\n\n", 1)[0]
rows = {}
for line in table.splitlines()[3:]:
    cells = [c.strip() for c in line.strip("|").split(" | ")]
    rows[cells[0]] = set(re.findall(r"`([a-z_0-9]+)`", cells[1]))
# What each row documents, run: each argument list gives one document.
RUNS = {
    "`dcr encode --json`, `dcr squash --json`": [["encode", "a.st", "b.st", "-o", "e.dcr", "--json"],
                                                 ["squash", "s.dcr", "-o", "q.dcr", "--json"]],
    "`dcr apply --json`": [["apply", "a.st", "s.dcr", "-o", "o.st", "--json"]],
    "`dcr apply --in-place --json`": [["apply", "ip.st", "s.dcr", "--in-place", "--json"]],
    "`dcr inspect --json`, a bundle": [["inspect", "s.dcr", "--json"]],
    "`dcr inspect --json`, a checkpoint": [["inspect", "a.st", "--json"]],
    "`dcr inspect --json`, neither": [["inspect", "junk", "--json"]],
    "`dcr id --json`, each object of the array": [["id", "a.st", "nosuch", "--json"]],
    "`dcr verify --json`": [["verify", "s.dcr", "--pubkey", "k.pub", "--json"],
                            ["verify", "u.dcr", "--pubkey", "k.pub", "--json"]],
    "`dcr keygen --json`": [["keygen", "k2", "--json"]],
    "`dcr history list --json`": [["history", "list", "r.tar", "--json"]],
    "`dcr history verify --json`": [["history", "verify", "r.tar", "--json"],
                                    ["history", "verify", "nosuch.tar", "--json"]],
    "`dcr bench --json`": [["bench", "--size", "256K", "--runs", "1", "--threads", "1", "--json", "-q"]],
}
bad = ["row %s: the test does not run it" % r for r in sorted(set(rows) - set(RUNS))]
bad += ["no row %s" % r for r in sorted(set(RUNS) - set(rows))]
for c in json_commands:
    if c != "validate" and not any(r.startswith("`dcr %s " % c) or ", `dcr %s " % c in r for r in rows):
        bad.append("dcr %s --help offers --json, no row documents it" % c)
for label, runs in RUNS.items():
    have = set()
    for args in runs:
        p = subprocess.run([dcr, *args], capture_output=True, text=True)
        try:
            doc = json.loads(p.stdout)
        except ValueError:
            bad.append("dcr %s: not JSON (exit %d): %s" % (" ".join(args), p.returncode, p.stderr.strip()))
            continue
        for o in doc if isinstance(doc, list) else [doc]:
            have |= set(o)
    documented = rows.get(label, have)
    bad += ["%s: %s in the output, not in the row" % (label, k) for k in sorted(have - documented)]
    bad += ["%s: %s in the row, not in the output" % (label, k) for k in sorted(documented - have)]
print("; ".join(bad))
PY
)
  if [ -z "$out" ]; then ok "README: the keys of every other command's --json output are its table's"
  else notok "README: --json keys: $out"; fi
else
  notok "README: could not make the files for the --json keys check"
fi

# 4. 'dcr help': a command's help, and an unknown command is a usage error.
"$DCR" help encode >"$W/a" 2>&1; rc1=$?
"$DCR" encode --help >"$W/b" 2>&1
"$DCR" help nosuch >"$W/c" 2>"$W/d"; rc2=$?
if [ "$rc1" = 0 ] && cmp -s "$W/a" "$W/b" && [ "$rc2" = 2 ] && [ ! -s "$W/c" ] &&
   [ "$(sed -n 1p "$W/d")" = "dcr: unknown command 'nosuch'" ] &&
   [ "$(sed -n 2p "$W/d")" = "Try 'dcr --help'." ] && [ "$(wc -l <"$W/d")" = 2 ]; then
  ok "dcr help COMMAND is dcr COMMAND --help; dcr help nosuch is a usage error (2)"
else
  notok "dcr help: exit $rc1 / $rc2; stderr of 'dcr help nosuch': $(tr '\n' '|' <"$W/d")"
fi
if "$DCR" --help | grep -q -- '--version' && "$DCR" --help | grep -q 'dcr help'; then
  ok "dcr --help lists --version and dcr help"
else
  notok "dcr --help does not list --version and dcr help"
fi

# ---- doc/dcr.1 ------------------------------------------------------------------------

if command -v groff >/dev/null 2>&1; then
  if groff -ww -man -Tutf8 "$MAN" >/dev/null 2>"$W/groff.err" && [ ! -s "$W/groff.err" ]; then
    ok "doc/dcr.1 renders without warnings (groff -ww -man)"
  else
    notok "doc/dcr.1: groff -ww -man warns: $(head -n 5 "$W/groff.err" | tr '\n' '|')"
  fi
else
  notok "groff not found (apt-get install groff-base, or sh tools/deps.sh)"
fi

# man_options SECTION: the options that the .TP items of a subsection (.SS "dcr CMD")
# or section (.SH COMMON OPTIONS) describe, one per line.
man_options() {
  awk -v want="$1" '
    /^\.S[SH] / { t = $0; sub(/^\.S[SH] +/, "", t); gsub(/"/, "", t); on = (t == want); next }
    on && /^\.TP/ { item = 1; next }
    on && item { print; item = 0 }
  ' "$MAN" | sed 's/\\-/-/g' | grep -oE -- '(^|[ "])--?[A-Za-z][A-Za-z0-9-]*' | sed 's/^[ "]//' | sort -u
}
mapfile -t COMMON < <(man_options "COMMON OPTIONS")
for c in "${COMMANDS[@]}"; do
  [ "$c" = help ] && continue
  mapfile -t described < <(man_options "dcr $c")
  if [ "${#described[@]}" -eq 0 ]; then notok "doc/dcr.1: no options under .SS \"dcr $c\""; continue; fi
  mapfile -t have < <(help_options "$c")
  missing='' extra=''
  for o in "${have[@]}"; do
    in_list "$o" "${described[@]}" "${COMMON[@]}" || missing+=" $o"
  done
  for o in "${described[@]}"; do
    in_list "$o" "${have[@]}" || extra+=" $o"
  done
  if [ -z "$missing$extra" ]; then ok "doc/dcr.1 describes the ${#have[@]} options of 'dcr $c --help'"
  else
    # shellcheck disable=SC2016
    notok "doc/dcr.1, dcr $c:${missing:+ not described:$missing (add a .TP item under .SS \"dcr $c\")}${extra:+; described but not in 'dcr $c --help':$extra}"
  fi
done
version=$("$DCR" --version | sed -n 's/^dcr \([^ ]*\).*/\1/p')
if grep -q "^\.TH DCR 1 .*\"dcr $version\"" "$MAN"; then ok "doc/dcr.1 is for dcr $version"
else notok "doc/dcr.1: .TH does not name \"dcr $version\" ('dcr --version')"; fi

# ---- completions ----------------------------------------------------------------------

# bash_complete WORDS...: what completions/dcr.bash offers for the last word.
bash_complete() {
  bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _dcr; printf "%s\n" "${COMPREPLY[@]}"' \
    _ "$ROOT/completions/dcr.bash" "$@" | sort -u
}
got=$(bash_complete "$DCR" "" | tr '\n' ' ')
want=$(printf '%s\n' "${COMMANDS[@]}" | sort -u | tr '\n' ' ')
if [ "$got" = "$want" ]; then ok "bash completion offers the commands"
else notok "bash completion offers '$got' for commands, expected '$want'"; fi
bad=
for c in "${COMMANDS[@]}"; do
  [ "$c" = help ] && continue
  got=$(bash_complete "$DCR" "$c" -- | tr '\n' ' ')
  want=$(help_options "$c" | grep -- '^--' | tr '\n' ' ')
  [ "$got" = "$want" ] || bad+=" [$c: offers '$got', --help has '$want']"
done
if [ -z "$bad" ]; then ok "bash completion offers each command's long options"
else notok "bash completion:$bad"; fi

if command -v zsh >/dev/null 2>&1; then
  # _dcr with zsh's completion builtins stubbed: what it would offer.
  zsh_complete() {
    # shellcheck disable=SC2016
    zsh -f -c '
      compadd() { [[ $1 == -- ]] && shift; print -rl -- "$@"; }
      _describe() { print -rl -- ${${(P)4}%%:*}; }
      _files() { print -r -- "(files)"; }
      _call_program() { shift; "$@"; }
      source "$1" >/dev/null 2>&1 </dev/null
      shift
      words=("$@"); CURRENT=$#; PREFIX=${words[CURRENT]}
      _dcr' _ "$ROOT/completions/_dcr" "$@" | sort -u
  }
  got=$(zsh_complete "$DCR" "" | tr '\n' ' ')
  want=$(printf '%s\n' "${COMMANDS[@]}" | sort -u | tr '\n' ' ')
  bad=
  [ "$got" = "$want" ] || bad+=" [commands: offers '$got', expected '$want']"
  for c in "${COMMANDS[@]}"; do
    [ "$c" = help ] && continue
    got=$(zsh_complete "$DCR" "$c" -- | tr '\n' ' ')
    want=$(help_options "$c" | grep -- '^--' | tr '\n' ' ')
    [ "$got" = "$want" ] || bad+=" [$c: offers '$got', --help has '$want']"
  done
  if [ -z "$bad" ]; then ok "zsh completion offers the commands and each command's long options"
  else notok "zsh completion:$bad"; fi
else
  echo "ok - zsh completion # SKIP zsh not installed"
fi

echo "$PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]
