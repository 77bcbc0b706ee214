#!/usr/bin/env bash
# The house style check run by `make test`: every tracked C++ file must be as clang-format
# (.clang-format) writes it, except the files in scripts/format-pending.txt, which were formatted
# by hand before the check existed. That list only shrinks: a file on it is formatted when next
# changed (then taken off), and a listed file that is already clean fails the check too, so the
# list never hides a file the check could cover. `scripts/check-format.sh --fix FILE...` formats
# files and takes them off the list.
set -euo pipefail
cd "$(dirname "$0")/.."
pending=scripts/format-pending.txt
command -v clang-format >/dev/null || { echo "check-format: clang-format missing (make deps)" >&2; exit 1; }

if [[ ${1:-} == --fix ]]; then
  shift
  clang-format -i "$@"
  for f in "$@"; do grep -vxF "$f" "$pending" > "$pending.tmp" || true; mv "$pending.tmp" "$pending"; done
  exit 0
fi

clean() { clang-format --dry-run -Werror "$1" >/dev/null 2>&1; }
unformatted=() stale=()
while IFS= read -r f; do
  if grep -qxF "$f" "$pending"; then
    clean "$f" && stale+=("$f")
  else
    clean "$f" || unformatted+=("$f")
  fi
done < <(git ls-files '*.cc' '*.h' '*.cu' '*.cuh')

for f in "${unformatted[@]}"; do echo "check-format: $f is not formatted (scripts/check-format.sh --fix $f)"; done
for f in "${stale[@]}"; do echo "check-format: $f is formatted: take it off $pending"; done
if (( ${#unformatted[@]} + ${#stale[@]} )); then exit 1; fi
echo "check-format: $(git ls-files '*.cc' '*.h' '*.cu' '*.cuh' | wc -l) files, $(wc -l < "$pending") still pending"
