#!/usr/bin/env bash
# One golden CLI case: runs the binary with the arguments in CASE.cmd (from the
# repository root) and compares exit code, stdout and stderr with CASE.golden.
# TSARCHIVE_UPDATE_GOLDEN=1 rewrites CASE.golden instead of comparing.
# CASE.stdin, where it exists, names a file (from the repository root) piped
# to the command's standard input; otherwise stdin is /dev/null.
# TSARCHIVE_GOLDEN_LIBTORCH (the linked libtorch's version, set by CTest):
# "libtorch <it>" in the output reads "libtorch {libtorch}", and a libtorch 2.x
# build compares with CASE.torch2.golden where that exists.
# TSARCHIVE_GOLDEN_TORCH_LAYER=OFF (set by CTest for a build without the torch
# layer): a case whose output differs because the torch layer is missing is
# skipped (exit 77) with the reason.
set -u
binary=$1
case_file=$2
golden=${case_file%.cmd}.golden
libtorch=${TSARCHIVE_GOLDEN_LIBTORCH:-}
if [[ $libtorch == 2.* && -f ${case_file%.cmd}.torch2.golden ]]; then golden=${case_file%.cmd}.torch2.golden; fi
# A CUDA libtorch (TSARCHIVE_GOLDEN_CUDA=ON): NAME.cuda.golden says what it does
# without a GPU; with one, such a case depends on the machine and is skipped.
if [[ ${TSARCHIVE_GOLDEN_CUDA:-OFF} == ON && -f ${case_file%.cmd}.cuda.golden ]]; then
  if nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then echo "SKIP: a GPU is visible"; exit 77; fi
  golden=${case_file%.cmd}.cuda.golden
fi
read -r -a args < "$case_file"
# A case that names an output (-o PATH) and fails must leave nothing there:
# the path is cleared first and checked after.
written=
for ((i = 0; i + 1 < ${#args[@]}; i++)); do
  if [ "${args[$i]}" = -o ]; then written=${args[$((i + 1))]}; fi
done
[ -n "$written" ] && rm -f "$written"

out=$(mktemp) err=$(mktemp) actual=$(mktemp)
trap 'rm -f "$out" "$err" "$actual"' EXIT
stdin_file=/dev/null
[ -f "${case_file%.cmd}.stdin" ] && read -r stdin_file < "${case_file%.cmd}.stdin"
cat "$stdin_file" | "$binary" "${args[@]}" >"$out" 2>"$err"
status=$?
if [ -n "$written" ] && [ "$status" -ne 0 ] && [ -e "$written" ]; then
  echo "tsarchive ${args[*]} exited $status but wrote $written" >&2
  rm -f "$written"
  exit 1
fi
[ -n "$written" ] && rm -f "$written"
{
  echo "exit: $status"
  echo "--- stdout"
  cat "$out"
  echo "--- stderr"
  cat "$err"
} >"$actual"
if [ -n "$libtorch" ]; then
  sed -i "s/libtorch ${libtorch//./\\.}\b/libtorch {libtorch}/g" "$actual"
fi
# libtorch's own notes (deprecations, warnings) differ between its releases,
# and a case is about what tsarchive says: they are left out of every golden.
sed -i '/^tsarchive: note: libtorch: /d' "$actual"

if [ "${TSARCHIVE_UPDATE_GOLDEN:-0}" = 1 ]; then
  cp "$actual" "$golden"
  echo "updated $golden"
  exit 0
fi
if [ ! -f "$golden" ]; then
  echo "missing $golden: run with TSARCHIVE_UPDATE_GOLDEN=1 to create it" >&2
  exit 1
fi
if ! diff -u "$golden" "$actual" >"$out"; then
  # A build without the torch layer (TSARCHIVE_WITH_TORCH=OFF, as the asan
  # preset) cannot run a case that needs libtorch: it skips, naming why.
  if [ "${TSARCHIVE_GOLDEN_TORCH_LAYER:-ON}" = OFF ] && grep -q "the libtorch layer" "$err"; then
    echo "SKIP: needs the torch layer (libtsarchive_torch.so), which this build leaves out (TSARCHIVE_WITH_TORCH=OFF)"
    exit 77
  fi
  cat "$out"
  echo "golden mismatch for: tsarchive ${args[*]}" >&2
  exit 1
fi
