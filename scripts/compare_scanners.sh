#!/bin/sh
# What picklescan, modelscan and fickling flag on testdata/loadsafety, next to
# tsarchive verify, as a markdown table (docs/load-safety.md holds its output).
#
#   scripts/compare_scanners.sh [build/tsarchive]
#
# The scanners are pip-installed into .venv-scanners (git-ignored) on first use.
# A cell says "flag" when the tool reports the file as unsafe, "ok" when it
# passes it, "error" when the tool fails on it (a scanner error is a miss: the
# hub upload goes through).
set -eu
cd "$(dirname "$0")/.."
TSARCHIVE=${1:-build/tsarchive}
VENV=.venv-scanners
if [ ! -x "$VENV/bin/picklescan" ] || [ ! -x "$VENV/bin/modelscan" ] || [ ! -x "$VENV/bin/fickling" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet picklescan modelscan fickling typing_extensions
fi

# Each prints flag / ok / error for one file.
tsarchive_verdict() {
  set +e; "$TSARCHIVE" verify "$1" >/dev/null 2>&1; rc=$?; set -e
  case $rc in 0) echo ok ;; 8) echo flag ;; *) echo "error ($rc)" ;; esac
}
picklescan_verdict() {
  set +e; out=$("$VENV/bin/picklescan" -p "$1" 2>&1); rc=$?; set -e
  # 0 clean, 1 dangerous globals found, 2 scan error
  case $rc in 0) echo ok ;; 1) echo flag ;; *) echo error ;; esac
}
modelscan_verdict() {
  set +e; out=$("$VENV/bin/modelscan" -p "$1" 2>&1); rc=$?; set -e
  # 0 no issues, 1 issues found, 2 scan error, 3 unsupported/no supported files, 4 usage
  case $rc in 0) echo ok ;; 1) echo flag ;; 3) echo "skipped" ;; *) echo error ;; esac
}
fickling_verdict() {
  # --check-safety: exit 0 likely safe, nonzero otherwise (fickling needs typing_extensions, which
  # its package does not declare). A torch.save ZIP is
  # given to fickling as its data.pkl (fickling reads pickles, not ZIPs).
  f=$1
  if head -c 2 "$f" | grep -q PK; then
    tmp=$(mktemp)
    python3 - "$f" "$tmp" <<'PY'
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
names = [n for n in z.namelist() if n.endswith("/data.pkl")]
open(sys.argv[2], "wb").write(z.read(names[0]) if names else b"")
PY
    f=$tmp
  fi
  set +e; out=$("$VENV/bin/fickling" --check-safety "$f" 2>&1); rc=$?; set -e
  rm -f safety_results.json  # what fickling leaves in the working folder
  [ "${tmp:-}" ] && rm -f "$tmp" && tmp=
  if echo "$out" | grep -qi "traceback\|error:"; then echo error; return; fi
  case $rc in 0) echo ok ;; *) echo flag ;; esac
}

echo "| file | expected | tsarchive | picklescan | modelscan | fickling |"
echo "|---|---|---|---|---|---|"
find testdata/loadsafety -type f | LC_ALL=C sort | while read -r f; do
  rel=${f#testdata/loadsafety/}
  case $rel in benign/*) expected=ok ;; *) expected=flag ;; esac
  echo "| $rel | $expected | $(tsarchive_verdict "$f") | $(picklescan_verdict "$f") | $(modelscan_verdict "$f") | $(fickling_verdict "$f") |"
done
