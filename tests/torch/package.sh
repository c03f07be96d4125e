#!/usr/bin/env bash
# The public libraries as a user gets them: cmake --install, then the two
# examples under examples/ built with find_package(tsarchive):
# - stamp_on_save (tsarchive::hook): a host program that saves a module, and
#   the stamp it carries without any code at the save;
# - fleet_profiling (tsarchive::observer): a service whose threads run a
#   model under model ids while the operator observer aggregates and writes
#   JSON Lines; counts per model id, the sink and the API usage keys checked.
#   package.sh BUILD_DIR SOURCE_DIR TSARCHIVE
set -euo pipefail
build=$1 src=$2 tsarchive=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cmake --install "$build" --prefix "$work/prefix" >/dev/null
for example in stamp_on_save fleet_profiling; do
  cmake -S "$src/examples/$example" -B "$work/$example" -G Ninja \
        -DCMAKE_PREFIX_PATH="$work/prefix${TSARCHIVE_TORCH_ROOT:+;$TSARCHIVE_TORCH_ROOT}" \
        ${TSARCHIVE_TORCH_CMAKE_ARGS:-} \
        -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$work/$example" -j2 >/dev/null
done

SOURCE_DATE_EPOCH=1700000000 "$work/stamp_on_save/stamp_on_save" "$src/testdata/mlp_scripted.pt" "$work/out.pt"
stamp=$("$tsarchive" extra get "$work/out.pt" producer_info.json)
echo "stamp written by the hook: $stamp"
for want in '"_type":"https://tsarchive.dev/producer-info/v1"' '"name":"stamp_on_save"' '"method":"export-hook"' \
            '"moduleType":"__torch__.models.MLP"' '"team":"examples"' '"createdAt":"2023-11-14T22:13:20Z"'; do
  if [[ $stamp != *"$want"* ]]; then echo "FAIL: the stamp lacks $want" >&2; exit 1; fi
done
if [[ $stamp == *'"host"'* ]]; then echo "FAIL: host recorded although the example opted out" >&2; exit 1; fi

# Without digests verify passes and says how to add them; stamp --keep-bytes adds them.
"$tsarchive" verify "$work/out.pt" | grep -q "carries no digests"
"$tsarchive" stamp --keep-bytes --no-git "$work/out.pt" >/dev/null
"$tsarchive" verify "$work/out.pt" | grep -q "matches its stamp"
"$tsarchive" extra get "$work/out.pt" producer_info.json | grep -q '"previous":{'
echo "ok: the installed package links, the hook stamps, verify and stamp --keep-bytes complete it"

# The observer: every operator call observed (P = 1), then 1 in 10.
calls=200
"$work/fleet_profiling/fleet_profiling" "$src/testdata/mlp_scripted.pt" 1x8 1 "$work/events.jsonl" $calls >"$work/stats.txt"
"$work/fleet_profiling/fleet_profiling" "$src/testdata/mlp_scripted.pt" 1x8 0.1 "$work/events_sampled.jsonl" 2000 \
  >"$work/stats_sampled.txt"
/usr/bin/python3 - "$work" $calls <<'PY'
import json, math, sys
work, calls = sys.argv[1], int(sys.argv[2])

def stats(name):
    ops, api = {}, []
    for line in open(f"{work}/{name}"):
        kind, *rest = line.split()
        if kind == "op":
            model, scope, op, n, self_us = rest
            ops[(model, scope, op)] = int(n)
        else:
            api.append(rest[0])
    return ops, api

ops, api = stats("stats.txt")
# mlp_scripted.pt calls aten::addmm twice per forward (two Linear layers) and
# aten::native_batch_norm once; each thread ran `calls` forwards.
for model in ("model-a", "model-b", "-"):
    for op, per_forward in (("aten::addmm", 2), ("aten::native_batch_norm", 1), ("aten::relu", 1)):
        got = ops.get((model, "function", op), 0)
        if got != per_forward * calls:
            sys.exit(f"FAIL: {model} {op}: {got} calls, want {per_forward * calls}")
models = {m for (m, _, _) in ops}
if models != {"model-a", "model-b", "-"}:
    sys.exit(f"FAIL: model ids {sorted(models)}")
# torch::jit::load fires torch.script.load in libtorch 1.13, torch.jit.load in 2.x.
if "torch.script.load" not in api and "torch.jit.load" not in api:
    sys.exit(f"FAIL: API usage keys {api} lack torch.script.load (1.x) or torch.jit.load (2.x)")

# The JSON Lines sink saw exactly the aggregated calls, each with its model id.
events = [json.loads(line) for line in open(f"{work}/events.jsonl")]
if len(events) != sum(ops.values()):
    sys.exit(f"FAIL: {len(events)} events in the file, {sum(ops.values())} aggregated")
for e in events:
    if e["model_id"] not in ("model-a", "model-b", "") or e["self_ns"] > e["duration_ns"] or e["self_ns"] < 0:
        sys.exit(f"FAIL: bad event {e}")

# Sampled at 0.1: each thread ran 2000 forwards with 2 addmm calls each.
ops, _ = stats("stats_sampled.txt")
n, p = 3 * 2000 * 2, 0.1
seen = sum(v for (m, s, op), v in ops.items() if op == "aten::addmm")
bound = 6 * math.sqrt(n * p * (1 - p))  # six standard deviations of a binomial
if abs(seen - n * p) > bound:
    sys.exit(f"FAIL: {seen} addmm calls sampled of {n} at P={p}; expected {n * p:.0f} +- {bound:.0f}")
print(f"ok: observer counts per model id exact at P=1; sampled {seen} of {n} addmm calls at P=0.1 "
      f"(expected {n * p:.0f} +- {bound:.0f}); {len(events)} JSON Lines events")
PY
