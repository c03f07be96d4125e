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
