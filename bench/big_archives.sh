# Sourced by bench scripts: big_archives SIZES_MB... fills ARCHIVES with
# bench/out/big-<MB>mb.pt, making the missing ones with make_big_archive.py.
# Needs PY, OUT and a die() of the caller.
big_archives() {
  ARCHIVES=()
  mkdir -p "$OUT"
  local mb a
  for mb in "$@"; do
    a=$OUT/big-${mb}mb.pt
    if [[ ! -f $a ]]; then
      echo "making $a (~$mb MB) ..." >&2
      "$PY" bench/make_big_archive.py big --out "$a" --mb "$mb" >&2 || die "making $a failed"
    fi
    ARCHIVES+=("$a")
  done
}

# one_record_archive MB: sets ONE_ARCHIVE to bench/out/one-<MB>mb.pt, a single
# Linear(w, w) whose weight is one record of about MB megabytes (made when missing).
one_record_archive() {
  ONE_ARCHIVE=$OUT/one-${1}mb.pt
  mkdir -p "$OUT"
  if [[ ! -f $ONE_ARCHIVE ]]; then
    echo "making $ONE_ARCHIVE (one record of ~$1 MB) ..." >&2
    "$PY" bench/make_big_archive.py big --layers 1 --out "$ONE_ARCHIVE" --mb "$1" >&2 || die "making $ONE_ARCHIVE failed"
  fi
}
