# Sourced by scripts/dev.sh, scripts/fuzz.sh and scripts/cuda_check.sh: install_packages PKG... installs
# the Debian packages of the list that are missing (as root, or with sudo).
# The package lists are refreshed at most once an hour, so one CI run (the
# test, sanitize and fuzz steps) runs `apt-get update` once.
install_packages() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return
  echo "==> installing: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  local stamp=${TMPDIR:-/tmp}/tsarchive-apt-updated
  if [ -z "$(find "$stamp" -mmin -60 2>/dev/null)" ]; then
    $sudo apt-get update -qq
    touch "$stamp"
  fi
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# timed NAME COMMAND...: runs it and adds "NAME  M min SS s" to step_times,
# which print_step_times WHAT prints at the end.
step_times=()
print_step_times() {
  printf '%s step times:\n' "$1"
  printf '  %s\n' "${step_times[@]}"
}
timed() {
  local name=$1 start=$SECONDS
  shift
  "$@"
  step_times+=("$(printf '%-28s %3d min %02d s' "$name" $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60)))")
}

# The tests that load libtorch or compare with Python's PyTorch (the unit tests
# drive commands that do, in-process): what a second libtorch must pass (the
# rest never load it).
TORCH_TESTS='^(unit\.|libtorch\.|pytorch\.|golden\.|cli\.worker_isolation$|cli\.hostile_all$|cli\.crash_safe$)'
