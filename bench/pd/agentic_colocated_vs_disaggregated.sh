#!/usr/bin/env bash
# The agentic workload of `deepinfer bench serve` on the same 2 cores, colocated against
# disaggregated: (a) one `serve --role both` with 2 OpenMP threads on cores 0-1; (b) `deepinfer
# router` in front of a prefill worker (core 0) and a decode worker (core 1), 1 thread each, the KV
# moved over UCX. TTFT/ITL come from the client; transfers per request (count, blocks, bytes,
# seconds of the whole remote prefill and of the UCX read alone) from the decode worker's /metrics,
# before and after the run. The machine's load average is logged around each run.
# Usage: bench/pd/agentic_colocated_vs_disaggregated.sh BUILD_DIR MODEL_DIR OUT_DIR
set -euo pipefail
bin=$1/deepinfer
model=$2
out=$3
mkdir -p "$out"
common=(--model "$model" --served-model-name bench --kv-cache-memory 2000000000 --block-size 16)
client=(bench serve --model bench --workload agentic --num-requests 8 --system-len 1024 --input-len 100
        --turns uniform:2:4 --tool-result-len uniform:50:200 --output-len uniform:16:48
        --think-time exponential:1 --concurrency 4 --ignore-eos --seed 1 --quiet)
pids=()
stop_all() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
trap stop_all EXIT
wait_health() {
  for _ in $(seq 1200); do
    curl -sf "$1/health" >/dev/null && return 0
    sleep 0.5
  done
  echo "$1 did not become healthy" >&2
  return 1
}
# The sum of a metric's samples labelled role="decode" (or unlabelled) on a /metrics page.
metric() { awk -v n="$1" '$1 == n || $1 == n "{role=\"decode\"}" { s += $2 } END { printf "%.6f\n", s }' "$2"; }

OMP_NUM_THREADS=2 taskset -c 0,1 "$bin" serve "${common[@]}" --port 8721 2>"$out/colocated-serve.log" &
pids+=($!)
wait_health http://127.0.0.1:8721
{ date -u; uptime; } >"$out/colocated-load.txt"
"$bin" "${client[@]}" --base-url http://127.0.0.1:8721 --output-json "$out/colocated.json" >"$out/colocated.txt"
uptime >>"$out/colocated-load.txt"
stop_all

OMP_NUM_THREADS=1 taskset -c 0 "$bin" serve "${common[@]}" --role prefill --port 8722 2>"$out/prefill.log" &
pids+=($!)
OMP_NUM_THREADS=1 taskset -c 1 "$bin" serve "${common[@]}" --role decode --port 8723 --pd-min-prefill-tokens 64 \
  2>"$out/decode.log" &
pids+=($!)
wait_health http://127.0.0.1:8722
wait_health http://127.0.0.1:8723
taskset -c 0,1 "$bin" router --prefill http://127.0.0.1:8722 --decode http://127.0.0.1:8723 --port 8720 \
  2>"$out/router.log" &
pids+=($!)
wait_health http://127.0.0.1:8720
curl -s http://127.0.0.1:8723/metrics >"$out/decode-metrics-before.txt"
{ date -u; uptime; } >"$out/disaggregated-load.txt"
"$bin" "${client[@]}" --base-url http://127.0.0.1:8720 --no-metrics --output-json "$out/disaggregated.json" \
  >"$out/disaggregated.txt"
uptime >>"$out/disaggregated-load.txt"
curl -s http://127.0.0.1:8723/metrics >"$out/decode-metrics-after.txt"
curl -s http://127.0.0.1:8722/metrics >"$out/prefill-metrics-after.txt"
curl -s http://127.0.0.1:8720/metrics >"$out/router-metrics-after.txt"
stop_all

{
  for name in deepinfer_pd_transfers_total deepinfer_pd_transfer_failures_total deepinfer_pd_local_prefills_total \
    deepinfer_pd_blocks_moved_total deepinfer_pd_bytes_moved_total deepinfer_pd_transfer_seconds_total \
    deepinfer_pd_read_seconds_total deepinfer_pd_local_hit_blocks_total deepinfer_pd_blocks_held; do
    b=$(metric $name "$out/decode-metrics-before.txt")
    a=$(metric $name "$out/decode-metrics-after.txt")
    echo "$name $(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.6f", a - b }')"
  done
} >"$out/transfers.txt"
cat "$out/colocated.txt" "$out/disaggregated.txt" "$out/transfers.txt"
