# bash completion for dcr (installed as share/bash-completion/completions/dcr).
# Commands and options come from the program itself ('dcr --help', 'dcr COMMAND
# --help') when completing, so they cannot drift from what it accepts.

# _dcr_help_options CMD: the options that 'dcr CMD --help' lists, one per line (long
# and short forms), each followed by a space and its value's name when it takes one
# ("--level N", "-o BUNDLE"). A value's name follows its option after one space and
# is in capitals; the description starts after two or more.
_dcr_help_options() {
  "$_dcr_prog" "$1" --help 2>/dev/null | awk '
    /^ +-/ {
      sub(/^ +/, "")
      short = ""
      if ($0 ~ /^-[A-Za-z0-9], /) { short = substr($0, 1, 2); $0 = substr($0, 5) }
      if (!match($0, /^--[a-z][a-z0-9-]*( [A-Z][A-Za-z=]*)?/)) next
      opt = substr($0, 1, RLENGTH)
      print opt
      if (short != "") { sub(/^--[a-z0-9-]*/, short, opt); print opt }
    }'
}

_dcr() {
  local cur prev cmd i line opts value
  COMPREPLY=()
  cur=${COMP_WORDS[COMP_CWORD]}
  prev=${COMP_WORDS[COMP_CWORD - 1]}
  _dcr_prog=${COMP_WORDS[0]}

  # The command: the first word after dcr that is not an option.
  cmd=
  for ((i = 1; i < COMP_CWORD; i++)); do
    case ${COMP_WORDS[i]} in
      -*) ;;
      *) cmd=${COMP_WORDS[i]}; break ;;
    esac
  done

  if [[ -z $cmd ]]; then
    if [[ $cur == -* ]]; then
      mapfile -t COMPREPLY < <(compgen -W '--help --version -h -V' -- "$cur")
    else
      mapfile -t COMPREPLY < <(compgen -W "$("$_dcr_prog" --help 2>/dev/null |
        sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z]*\) .*/\1/p')" -- "$cur")
    fi
    return 0
  fi

  if [[ $cmd == help ]]; then
    [[ $COMP_CWORD -eq $((i + 1)) ]] &&
      mapfile -t COMPREPLY < <(compgen -W "$("$_dcr_prog" --help 2>/dev/null |
        sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z]*\) .*/\1/p')" -- "$cur")
    return 0
  fi

  # The value of an option that takes one: "--opt VALUE" or "-o VALUE".
  value=
  if [[ $prev == -* ]]; then
    while IFS= read -r line; do
      [[ $line == *" "* && ${line%% *} == "$prev" ]] && { value=${line#* }; break; }
    done < <(_dcr_help_options "$cmd")
  fi
  case $value in
    "") ;;
    LEVEL) mapfile -t COMPREPLY < <(compgen -W 'full chunk none' -- "$cur"); return 0 ;;
    D) mapfile -t COMPREPLY < <(compgen -W 'BF16 F16 F32' -- "$cur"); return 0 ;;
    V) mapfile -t COMPREPLY < <(compgen -W '1.0 1.1 1.2 1.3' -- "$cur"); return 0 ;; # --format (encode, squash, bench)
    SCOPE) mapfile -t COMPREPLY < <(compgen -W 'checkpoints bundle' -- "$cur"); return 0 ;; # --sign-scope, --scope
    BUNDLE | OUT | BASE | TARGET | CKPT | FILE | LIST)
      # a file (bench's --threads LIST is a list of numbers)
      [[ $cmd == bench ]] && return 0
      compopt -o filenames 2>/dev/null
      mapfile -t COMPREPLY < <(compgen -f -- "$cur")
      return 0 ;;
    *) return 0 ;; # a number, a rate, a seed, KEY=VALUE: nothing to offer
  esac

  if [[ $cur == -* ]]; then
    opts=$(_dcr_help_options "$cmd" | sed -n 's/^\(--[^ ]*\).*/\1/p')
    mapfile -t COMPREPLY < <(compgen -W "$opts" -- "$cur")
    return 0
  fi
  compopt -o filenames 2>/dev/null
  mapfile -t COMPREPLY < <(compgen -f -- "$cur")
  return 0
}

complete -F _dcr dcr
