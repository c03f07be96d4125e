#!/usr/bin/env bash
# The completion scripts `tsarchive __complete` generates complete commands,
# subcommands and options, in each shell: bash always, zsh and fish where
# installed (tests/package/deb.sh installs both and runs this on the package's
# files). The expected words come from the command table, so a command or an
# option renamed without its completion cannot pass.
# Usage: completions.sh BASH_FILE ZSH_FILE FISH_FILE
set -euo pipefail
bash_file=$1 zsh_file=$2 fish_file=$3
fail() { echo "FAIL: $*" >&2; exit 1; }

got=$(bash -c ". '$bash_file'
  COMP_WORDS=(tsarchive ins); COMP_CWORD=1; _tsarchive; echo \"\${COMPREPLY[*]}\"
  COMP_WORDS=(tsarchive extra l); COMP_CWORD=2; _tsarchive; echo \"\${COMPREPLY[*]}\"
  COMP_WORDS=(tsarchive verify --require); COMP_CWORD=2; _tsarchive; echo \"\${COMPREPLY[*]}\"
  COMP_WORDS=(tsarchive diff --ignore-); COMP_CWORD=2; _tsarchive; echo \"\${COMPREPLY[*]}\"
  COMP_WORDS=(tsarchive h); COMP_CWORD=1; _tsarchive; echo \"\${COMPREPLY[*]}\"")
[ "$got" = $'inspect\nlist\n--require-stamp --require-signature\n--ignore-stamp --ignore-extra\nhelp' ] || fail "bash completion gave: $got"
echo "bash: ok"

if command -v fish >/dev/null; then
  got=$(fish -c "source '$fish_file'
    complete -C 'tsarchive ins' | cut -f1; complete -C 'tsarchive extra l' | cut -f1
    complete -C 'tsarchive diff --ignore-s' | cut -f1")
  [ "$got" = $'inspect\nlist\n--ignore-stamp' ] || fail "fish completion gave: $got"
  echo "fish: ok"
else
  echo "fish: not installed, skipped"
fi

if command -v zsh >/dev/null; then
  zsh -n "$zsh_file" || fail "the zsh completion does not parse"
  # Completion proper needs a terminal (zpty); check the table it completes from.
  grep -q "'inspect:Show what a model file holds" "$zsh_file" || fail "zsh: no inspect"
  grep -q "'--require-stamp:" "$zsh_file" || fail "zsh: no --require-stamp"
  echo "zsh: parses, lists commands and options"
else
  echo "zsh: not installed, skipped"
fi
