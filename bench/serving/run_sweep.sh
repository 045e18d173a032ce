#!/usr/bin/env bash
# The serving results of bench/RESULTS.md for one server: the decode batch sweep (random prompts,
# concurrency 8..256) and the agentic workload, as JSON, text and one PNG per workload.
#
# Usage: bench/serving/run_sweep.sh NAME BASE_URL MODEL
#   e.g. bench/serving/run_sweep.sh deepinfer http://127.0.0.1:8000 bench-v2-lite
# Environment (defaults): INPUT_LEN (1024) OUTPUT_LEN (128) CONCURRENCY (8,16,32,64,128,256)
#   REQUESTS_PER_USER (4) SESSIONS (32) AGENT_CONCURRENCY (8,16,32) GPUS (1) WARMUP (8)
#   DEEPINFER_BIN (build/deepinfer) PYTHON (.venv/bin/python)
# Output: bench/out/serving/NAME-{decode,agentic}.{json,txt,png}
set -euo pipefail
cd "$(dirname "$0")/../.."
name=${1:?NAME}; url=${2:?BASE_URL}; model=${3:?MODEL}
BIN=${DEEPINFER_BIN:-build/deepinfer}
PYTHON=${PYTHON:-.venv/bin/python}
out=bench/out/serving
mkdir -p "$out"
common=(--base-url "$url" --model "$model" --gpus "${GPUS:-1}" --warmup "${WARMUP:-8}")

"$BIN" bench serve "${common[@]}" --workload random --input-len "${INPUT_LEN:-1024}" --output-len "${OUTPUT_LEN:-128}" \
  --concurrency "${CONCURRENCY:-8,16,32,64,128,256}" --requests-per-user "${REQUESTS_PER_USER:-4}" \
  --output-json "$out/$name-decode.json" | tee "$out/$name-decode.txt"
"$PYTHON" bench/serving/plot.py "$out/$name-decode.png" "$out/$name-decode.json=$name"

# Agentic: a 4096-token system prompt with tools shared by all sessions, 8 turns per session on
# average, tool results of 200-1200 tokens, answers of 50-300 tokens, ~1 s of tool time.
"$BIN" bench serve "${common[@]}" --workload agentic --num-requests "${SESSIONS:-32}" --system-len 4096 \
  --input-len 300 --turns uniform:4:12 --tool-result-len uniform:200:1200 --output-len uniform:50:300 \
  --think-time exponential:1 --concurrency "${AGENT_CONCURRENCY:-8,16,32}" \
  --output-json "$out/$name-agentic.json" | tee "$out/$name-agentic.txt"
"$PYTHON" bench/serving/plot.py "$out/$name-agentic.png" "$out/$name-agentic.json=$name"
