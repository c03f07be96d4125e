#!/usr/bin/env bash
# Several tsarchive processes edit one archive at once: every edit lands (they
# take turns on the lock), no temp file is left, and PyTorch-valid bytes result.
# A process that cannot get the lock in time fails with exit 4 and changes
# nothing; Ctrl-C while waiting leaves the file as it was.
#   extra_concurrent.sh TSARCHIVE TESTDATA_DIR
set -uo pipefail
tsarchive=$1 testdata=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

m=$work/model.pt
cp "$testdata/mlp_scripted.pt" "$m"
pids=()
for i in $(seq 1 12); do
  if (( i % 3 == 0 )); then in_place=--in-place; else in_place=; fi
  "$tsarchive" extra set $in_place "$m" "k$i.txt=value $i" >/dev/null 2>"$work/err$i" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "an editor failed: $(cat "$work"/err*)"; done
names=$("$tsarchive" extra list --json "$m" | grep -c '"name": "k')
[ "$names" = 12 ] || fail "expected 12 new extra files, found $names"
for i in $(seq 1 12); do
  [ "$("$tsarchive" extra get "$m" "k$i.txt")" = "value $i" ] || fail "k$i.txt lost"
done
leftovers=$(find "$work" -name '.*tsarchive*' | wc -l)
[ "$leftovers" = 0 ] || fail "temp files left: $(find "$work" -name '.*tsarchive*')"

# Held lock: a short timeout fails clearly with exit 4, the file unchanged.
before=$(sha256sum < "$m")
flock "$m" sleep 3 &
holder=$!
sleep 0.3
"$tsarchive" extra set --lock-timeout 0.2 "$m" late=1 2>"$work/err" && fail "edited a locked file"
status=$?
[ "$status" = 4 ] || fail "exit $status for a locked file, want 4"
grep -q "another process is editing this file" "$work/err" || fail "unclear message: $(cat "$work/err")"
# Interrupted while waiting for the lock: nothing changes.
"$tsarchive" extra set "$m" late=1 >/dev/null 2>&1 &
waiter=$!
sleep 0.3
kill -TERM "$waiter"  # background jobs of a script ignore SIGINT
wait "$waiter" && fail "an interrupted edit succeeded"
wait "$holder"
[ "$(sha256sum < "$m")" = "$before" ] || fail "the file changed"
leftovers=$(find "$work" -name '.*tsarchive*' | wc -l)
[ "$leftovers" = 0 ] || fail "temp files left after the interrupted edit"
echo "ok: 12 concurrent editors, lock timeout, interrupt while waiting"
