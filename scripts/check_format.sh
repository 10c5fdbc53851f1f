#!/usr/bin/env bash
# Checks the C++ and CUDA files changed since a base against .clang-format:
# lists the files clang-format would change and exits 1; exits 0 when there
# are none, or (saying so) when clang-format is not installed.
#
#   scripts/check_format.sh [BASE]
#
# BASE is a git ref; the files changed between it and the working tree are
# checked, and new files git does not ignore. Default: the merge base of HEAD
# with origin/main (else main), unless HEAD is on that branch already; then
# the last commit's files (HEAD~1); and nothing when HEAD has no parent (a root or shallow commit).
# CLANG_FORMAT names the binary (default clang-format). Fix a file with
# `clang-format -i FILE`.
set -euo pipefail
cd "$(dirname "$0")/.."

clang_format=${CLANG_FORMAT:-clang-format}
if ! command -v "$clang_format" >/dev/null 2>&1; then
  echo "check_format.sh: $clang_format is not installed; format check skipped"
  exit 0
fi
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "check_format.sh: not a git work tree; format check skipped"
  exit 0
fi

# The commit to compare with, or nothing.
default_base() {
  local head merge_base branch
  head=$(git rev-parse HEAD)
  for branch in origin/main main; do
    merge_base=$(git merge-base HEAD "$branch" 2>/dev/null) || continue
    if [ "$merge_base" != "$head" ]; then
      echo "$merge_base"
      return
    fi
    break  # HEAD is on the branch: the last commit's files
  done
  git rev-parse --verify --quiet 'HEAD~1^{commit}' || true
}

if [ $# -gt 1 ]; then
  echo "check_format.sh: one argument at most, the base ref (got $#)" >&2
  exit 2
elif [ $# -eq 1 ]; then
  base=$(git rev-parse --verify --quiet "$1^{commit}") || {
    echo "check_format.sh: base '$1' is not a commit" >&2
    exit 2
  }
else
  base=$(default_base)
fi
if [ -z "$base" ]; then
  echo "check_format.sh: no base to compare with (HEAD has no parent); nothing to check"
  exit 0
fi

unformatted=()
checked=0
while IFS= read -r -d '' file; do
  [ -f "$file" ] || continue
  checked=$((checked + 1))
  if ! "$clang_format" --style=file "$file" | cmp -s "$file" -; then
    unformatted+=("$file")
  fi
done < <(git diff -z --name-only --diff-filter=ACMR "$base" -- '*.cc' '*.h' '*.cu' '*.cuh'
         git ls-files -z --others --exclude-standard -- '*.cc' '*.h' '*.cu' '*.cuh')

label=$(git rev-parse --short "$base")
if [ ${#unformatted[@]} -gt 0 ]; then
  echo "check_format.sh: ${#unformatted[@]} of $checked files changed since $label are not formatted (clang-format -i FILE):"
  printf '  %s\n' "${unformatted[@]}"
  exit 1
fi
echo "check_format.sh: $checked files changed since $label, all formatted"
