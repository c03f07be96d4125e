#!/bin/bash
# The image checked from inside its own build (a RUN step of the Containerfile's
# check stage, as the image's non-root user), where `podman run` is not
# available: the entrypoint serves the model KServe's storage initializer
# would have placed in /mnt/models (read-only, owned by root), and curl asks it
# on loopback for liveness, readiness, the model's metadata, the Prometheus
# metrics and one infer, whose answer must equal PyTorch's (infer_golden.json,
# made by make_golden.py). Then SIGTERM must end it with exit 0 within --grace.
# With TSARCHIVE_VERIFY_KEY: a stamped archive signed by that key is served; the
# same archive changed after signing is refused before anything is served.
# Usage: smoke.sh CHECK_DIR   (infer_request.json, infer_golden.json, key.pub,
#                              signed/mlp.pt and its .sig, tampered/mlp.pt and its .sig)
set -euo pipefail
check=$1
port=8080
url=http://127.0.0.1:$port
fail() { echo "FAIL: $*" >&2; exit 1; }

[ "$(id -u)" -ne 0 ] || fail "the check runs as root; the image's user should not be"
[ ! -w /mnt/models ] || fail "/mnt/models is writable by $(id -un); KServe mounts it read-only"

pid=
stop() {
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null || true
  local status=0
  wait "$pid" || status=$?
  pid=
  return $status
}
trap 'stop || true' EXIT

# start ARGS...: the entrypoint in the background, until /v2/health/ready answers 200.
start() {
  tsarchive-entrypoint "$@" > /tmp/serve.out 2> /tmp/serve.err &
  pid=$!
  local i
  for i in $(seq 1 300); do
    if curl -sf -o /dev/null "$url/v2/health/ready"; then
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || { cat /tmp/serve.err >&2; fail "the server exited before it was ready"; }
    sleep 0.1
  done
  cat /tmp/serve.err >&2
  fail "not ready after 30 s"
}

# infer MODEL: one request; its output must equal PyTorch's within float32 rounding.
infer() {
  local answer
  answer=$(curl -sf -X POST "$url/v2/models/$1/infer" -H 'Content-Type: application/json' \
             --data-binary @"$check/infer_request.json") || fail "infer on $1 failed"
  echo "infer $1: $answer"
  jq -e --slurpfile golden "$check/infer_golden.json" '
      .outputs[0] as $out | $golden[0] as $want
      | $out.shape == $want.shape and $out.datatype == "FP32"
        and ([$out.data, $want.data] | transpose
             | all(((.[0] - .[1]) | fabs) <= 1e-5 * ([1, (.[1] | fabs)] | max)))' \
    <<<"$answer" >/dev/null || fail "infer on $1 answered $answer; PyTorch computes $(cat "$check/infer_golden.json")"
}

# The image's defaults, as KServe runs it: NAME=/mnt/models, 0.0.0.0:8080.
start mlp=/mnt/models --grace 5000
grep -q "^tsarchive serve: http://0.0.0.0:$port/v2 " /tmp/serve.out || fail "start line: $(cat /tmp/serve.out)"
curl -sf -o /dev/null "$url/v2/health/live" || fail "/v2/health/live"
meta=$(curl -sf "$url/v2/models/mlp") || fail "/v2/models/mlp"
echo "metadata: $meta"
jq -e '.name == "mlp" and .inputs[0].name == "x" and .inputs[0].datatype == "FP32"' <<<"$meta" >/dev/null ||
  fail "metadata: $meta"
infer mlp
metrics=$(curl -sf "$url/metrics") || fail "/metrics"
grep -q '^tsarchive_serve_requests_total{model="mlp",status="200"} 1$' <<<"$metrics" ||
  fail "/metrics does not count the infer: $(grep requests_total <<<"$metrics")"
stop || fail "serve exited $? after SIGTERM, wanted 0"
echo "served /mnt/models as mlp on 0.0.0.0:$port: live, ready, metadata, metrics, infer equal to PyTorch's; SIGTERM: exit 0"

# A stamped, signed archive under TSARCHIVE_VERIFY_KEY; then one changed after signing.
TSARCHIVE_VERIFY_KEY=$check/key.pub start signed="$check/signed"
infer signed
stop || fail "serve exited $? after SIGTERM, wanted 0"
status=0
TSARCHIVE_VERIFY_KEY=$check/key.pub tsarchive-entrypoint "$check/tampered" > /tmp/serve.out 2> /tmp/serve.err || status=$?
[ $status -eq 1 ] || fail "an archive changed after signing: exit $status, wanted 1 ($(cat /tmp/serve.err))"
grep -q '^tsarchive: error: the archive differs from what was signed' /tmp/serve.err || fail "refusal: $(cat /tmp/serve.err)"
! grep -q '^tsarchive serve:' /tmp/serve.out || fail "a refused model was served"
echo "TSARCHIVE_VERIFY_KEY: the signed archive served, the one changed after signing refused (exit 1)"
