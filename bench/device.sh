# Sourced by bench/run.sh and bench/serve.sh: check_device PYTHON TSARCHIVE
# DEVICE returns 0 for cpu, and for cuda / cuda:N only when both sides can
# run there: the Python's torch sees that CUDA device and the tsarchive build
# reports CUDA built in with a device visible (--version --verbose). Otherwise
# it prints why in one line and returns 1 (the benches then exit 2).
check_device() {
  local python=$1 tsarchive=$2 device=$3 index version
  case $device in
    cpu) return 0 ;;
    cuda) index=0 ;;
    cuda:[0-9]*) index=${device#cuda:} ;;
    *) echo "DEVICE=$device is not a device: use cpu, cuda or cuda:N" >&2; return 1 ;;
  esac
  if ! "$python" -c "import sys, torch; sys.exit(not (torch.cuda.is_available() and torch.cuda.device_count() > $index))" 2>/dev/null; then
    echo "DEVICE=$device: the torch of $python sees no such CUDA device (no GPU here, or a CPU-only torch); use DEVICE=cpu" >&2
    return 1
  fi
  if [ -x "$tsarchive" ]; then
    version=$("$tsarchive" --version --verbose 2>/dev/null || true)
    if [[ $version != *"cuda built in"* || $version == *" 0 device(s)"* ]]; then
      echo "DEVICE=$device: $tsarchive has no CUDA device to run on (its libtorch lacks CUDA or sees no GPU: see --version --verbose); use DEVICE=cpu" >&2
      return 1
    fi
  fi
}
