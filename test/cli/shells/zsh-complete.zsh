# Prints, one per line, the matches zsh's completion system offers for a command line.
#
# usage: zsh -f zsh-complete.zsh <completion> <line>
#   <completion>  a completion script to source after compinit, or a directory holding it as
#                 `_cloudctl`, put on fpath before compinit (the two ways an operator installs it)
#   <line>        the command line typed before Tab, e.g. "cloudctl gr"
#
# Completion only runs inside the line editor, so an interactive `zsh -f` is started on a
# pseudo-terminal (zsh/zpty). There `compadd` is wrapped: each call that adds matches also prints
# them with a marker, and a post-completion hook prints an end marker. The markers are assembled
# from two strings so that the echo of the typed setup lines never contains them.
zmodload zsh/zpty || exit 3
integer deadline=$(( SECONDS + 15 ))

zpty cap zsh -f -i
zpty -w cap "PS1='' RPROMPT=''"
if [[ -d $1 ]]; then
  zpty -w cap "fpath=(${(q)1} \$fpath); autoload -Uz compinit && compinit -u -D"
else
  zpty -w cap "autoload -Uz compinit && compinit -u -D && source ${(q)1}"
fi
zpty -w cap 'compadd() { if (( ${@[(I)-[OAD]*]} )); then builtin compadd "$@"; return; fi; local -a m; builtin compadd -O m "$@"; print -rl -- "<ma""tch>"${^m} >&2; builtin compadd "$@"; }'
zpty -w cap 'capture-end() { print -r -- "<en""d>" >&2 }; comppostfuncs=(capture-end)'
zpty -w cap 'bindkey "^I" complete-word'
zpty -w -n cap "$2"$'\t'

local out line
while (( SECONDS < deadline )); do
  if zpty -r -t cap line; then out+=$line; else sleep 0.05; fi
  [[ $out == *'<end>'* ]] && break
done
zpty -d cap
[[ $out == *'<end>'* ]] || { print -u2 "no completion within the deadline; the terminal showed:"; print -u2 -r -- "$out"; exit 4 }
print -r -- "$out" | tr -d '\r' | grep -o '<match>[^<[:cntrl:]]*' | sed 's/^<match>//' | sort -u
