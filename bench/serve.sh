#!/usr/bin/env bash
# bench/serve.sh: `tsarchive serve` with and without dynamic batching next to
# a Python batching server (bench/serve_python.py: aiohttp,
# torch.jit.load, a bounded queue, the same --max-batch/--max-wait/--max-queue
# and intra-op threads), in one run on this machine.
#
# Load: wrk (Debian's wrk) posting one KServe v2 JSON infer request (one row)
# over C keep-alive connections for DURATION seconds (CNN_DURATION for the
# cnn), C = 1, 8, 64; it prints throughput (requests/s), p50 and p99 latency
# and any non-2xx count (wrk's timeout is 60 s, so slow answers still count).
# Models: tiny = testdata/mlp_scripted.pt (input 1x8); cnn = torchvision's
# resnet18 scripted by bench/make_run_models.py into bench/out/resnet18.pt
# (input 1x3x64x64, ~0.15 GFLOP a row: smaller than 224x224 so that a run
# fits in minutes on a small machine; the JSON body is ~90 KB).
# Rows: ts-batch (tsarchive serve --max-batch B --max-wait W), ts-nobatch
# (tsarchive serve), py-batch (the Python server, same B and W), and
# ts-sample (ts-batch with --sample 0.01: the operator metrics' cost); and,
# at C=64, each server given every core its own way: ts-cores (ts-batch with
# --instances CORES --threads 1: one worker process per core) and py-cores
# (the Python server with CORES intra-op threads: one process, whose request
# handling the GIL keeps on one core).
# Ratios at the end. Targets: at C=64 ts-batch >= 2x py-batch's
# throughput with a p99 no worse; on the cnn ts-batch >= 1.3x ts-nobatch;
# ts-sample within 3% of ts-batch. No assertions: read the verdicts.
#
# DEVICE=cuda (or cuda:N): every server runs its model there (tsarchive serve
# --device, the Python server's module and batches moved to the device and
# its outputs back), and only the rows the targets compare are measured
# (ts-batch, ts-nobatch, py-batch at 1, 8 and 64 connections): one GPU is not
# shared between CORES worker processes. Without such a device (or with a
# CPU-only torch or build) it says so in one line and exits 2. Default cpu.
#
# Environment: TSARCHIVE (default build/tsarchive), PYTHON (default
# /usr/bin/python3, with python3-torch, python3-torchvision, python3-aiohttp),
# DURATION (seconds per cell, default 5), CNN_DURATION (default 15), THREADS (intra-op threads of every
# server, default 1), MAX_BATCH (16), MAX_WAIT (ms, 5), MODELS ("tiny cnn"), CORES (nproc).
set -euo pipefail
cd "$(dirname "$0")/.."
TSARCHIVE=${TSARCHIVE:-build/tsarchive}
PYTHON=${PYTHON:-/usr/bin/python3}
DURATION=${DURATION:-5}
CNN_DURATION=${CNN_DURATION:-15}
THREADS=${THREADS:-1}
MAX_BATCH=${MAX_BATCH:-16}
MAX_WAIT=${MAX_WAIT:-5}
MODELS=${MODELS:-tiny cnn}
CORES=${CORES:-$(nproc)}
DEVICE=${DEVICE:-cpu}
PORT=18571
command -v wrk >/dev/null || { echo "bench/serve.sh: needs wrk (apt-get install wrk)" >&2; exit 2; }
"$PYTHON" -c 'import aiohttp, torch' 2>/dev/null ||
  { echo "bench/serve.sh: $PYTHON needs torch and aiohttp (apt-get install python3-torch python3-aiohttp)" >&2; exit 2; }
source bench/device.sh
check_device "$PYTHON" "$TSARCHIVE" "$DEVICE" || exit 2
mkdir -p bench/out
tmp=$(mktemp -d)
server=
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

model_path() {
  case $1 in
    tiny) echo testdata/mlp_scripted.pt ;;
    cnn)
      [ -f bench/out/resnet18.pt ] || "$PYTHON" bench/make_run_models.py bench/out/resnet18.pt >&2
      echo bench/out/resnet18.pt ;;
  esac
}

# The request body: one row of random values.
write_body() {
  local shape=$1
  "$PYTHON" - "$shape" >"$tmp/body.json" <<'EOF'
import json, sys, torch
shape = [int(d) for d in sys.argv[1].split("x")]
torch.manual_seed(0)
print(json.dumps({"inputs": [{"name": "x", "shape": shape, "datatype": "FP32",
                              "data": torch.randn(*shape).flatten().tolist()}]}))
EOF
  cat >"$tmp/post.lua" <<EOF
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = io.open("$tmp/body.json", "rb")
wrk.body = f:read("*a")
f:close()
EOF
}

start_server() {  # kind model_path name
  local kind=$1 path=$2 name=$3
  case $kind in
    ts-batch) "$TSARCHIVE" serve "$name=$path" --device "$DEVICE" --port $PORT --threads "$THREADS" --max-batch "$MAX_BATCH" \
                --max-wait "$MAX_WAIT" --max-queue 1024 >"$tmp/server.log" 2>&1 & ;;
    ts-sample) "$TSARCHIVE" serve "$name=$path" --device "$DEVICE" --port $PORT --threads "$THREADS" --max-batch "$MAX_BATCH" \
                 --max-wait "$MAX_WAIT" --max-queue 1024 --sample 0.01 >"$tmp/server.log" 2>&1 & ;;
    ts-nobatch) "$TSARCHIVE" serve "$name=$path" --device "$DEVICE" --port $PORT --threads "$THREADS" --max-queue 1024 \
                  >"$tmp/server.log" 2>&1 & ;;
    ts-cores) "$TSARCHIVE" serve "$name=$path" --device "$DEVICE" --port $PORT --threads 1 --instances "$CORES" --max-batch "$MAX_BATCH" \
                --max-wait "$MAX_WAIT" --max-queue 1024 >"$tmp/server.log" 2>&1 & ;;
    py-cores) "$PYTHON" bench/serve_python.py "$path" $PORT "$MAX_BATCH" "$MAX_WAIT" 1024 "$CORES" "$DEVICE" \
                >"$tmp/server.log" 2>&1 & ;;
    py-batch) "$PYTHON" bench/serve_python.py "$path" $PORT "$MAX_BATCH" "$MAX_WAIT" 1024 "$THREADS" "$DEVICE" \
                >"$tmp/server.log" 2>&1 & ;;
  esac
  server=$!
  for _ in $(seq 600); do
    curl -sf -o /dev/null "http://127.0.0.1:$PORT/v2/health/ready" && break
    sleep 0.1
  done
  # Warm-up: the first calls of a TorchScript module optimize its graph.
  wrk -t1 -c4 -d1s -s "$tmp/post.lua" "http://127.0.0.1:$PORT/v2/models/$name/infer" >/dev/null
}

stop_server() {
  kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  server=
}

# wrk's latency in ms from "50%   1.23ms" style text.
to_ms() {
  awk -v v="$1" 'BEGIN { n = v + 0; if (v ~ /us$/) n /= 1000; else if (v ~ /ms$/) n += 0; else if (v ~ /s$/) n *= 1000; printf "%.2f", n }'
}

results=$tmp/results
: >"$results"
echo "bench/serve.sh: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); ${DURATION}s per cell (cnn ${CNN_DURATION}s)," \
     "threads $THREADS, max-batch $MAX_BATCH, max-wait ${MAX_WAIT}ms, device $DEVICE"
printf '%-5s %-10s %4s %10s %9s %9s %7s\n' model server conc req/s p50_ms p99_ms non2xx
for m in $MODELS; do
  path=$(model_path "$m")
  case $m in tiny) write_body 1x8; seconds=$DURATION ;; cnn) write_body 1x3x64x64; seconds=$CNN_DURATION ;; esac
  kinds="ts-batch ts-nobatch py-batch ts-sample ts-cores py-cores"
  [ "$DEVICE" = cpu ] || kinds="ts-batch ts-nobatch py-batch"
  for kind in $kinds; do
    start_server "$kind" "$path" "$m"
    for c in 1 8 64; do
      case $kind in ts-sample | ts-cores | py-cores) [ "$c" = 64 ] || continue ;; esac
      threads=$(( c < 2 ? 1 : 2 ))
      out=$(wrk -t"$threads" -c"$c" -d"${seconds}s" --timeout 60s --latency -s "$tmp/post.lua" \
              "http://127.0.0.1:$PORT/v2/models/$m/infer" 2>&1)
      rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
      p50=$(to_ms "$(awk '$1 == "50%" {print $2}' <<<"$out")")
      p99=$(to_ms "$(awk '$1 == "99%" {print $2}' <<<"$out")")
      bad=$(awk '/Non-2xx/ {print $NF}' <<<"$out")
      printf '%-5s %-10s %4s %10s %9s %9s %7s\n' "$m" "$kind" "$c" "$rps" "$p50" "$p99" "${bad:-0}"
      echo "$m $kind $c $rps $p50 $p99" >>"$results"
    done
    stop_server
  done
done

echo
echo "ratios (throughput a/b; p99 a/b, below 1 is better for a):"
ratio() {  # model a b conc
  awk -v m="$1" -v a="$2" -v b="$3" -v c="$4" '
    $1 == m && $2 == a && $3 == c { ra = $4; pa = $6 }
    $1 == m && $2 == b && $3 == c { rb = $4; pb = $6 }
    END { if (ra > 0 && rb > 0 && pb > 0) printf "  %-5s c=%-3s %-10s / %-10s throughput %5.2fx  p99 %5.2fx\n", m, c, a, b, ra / rb, pa / pb }
  ' "$results"
}
for m in $MODELS; do
  for c in 1 8 64; do ratio "$m" ts-batch py-batch "$c"; done
  ratio "$m" ts-batch ts-nobatch 64
  ratio "$m" ts-sample ts-batch 64
  ratio "$m" ts-cores py-cores 64
done
echo "targets: c=64 ts-batch/py-batch >= 2x at p99 <= 1x; cnn ts-batch/ts-nobatch >= 1.3x; ts-sample/ts-batch >= 0.97x"
