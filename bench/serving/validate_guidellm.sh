#!/usr/bin/env bash
# Runs guidellm and `deepinfer bench serve` on the same server and workload shape (completions,
# 512 prompt tokens, 128 output tokens, concurrency 8/32/64, 128 requests each) and compares them
# (compare_guidellm.py; fails above 10 %). Results go to bench/out/guidellm/ (ignored by git).
#
# Server: the stub (default), or any OpenAI-compatible server given as TARGET=http://HOST:PORT
# with MODEL=NAME; on a machine whose cores the server needs, run the server and this script on
# separate cores (taskset) so guidellm's Python client does not slow the server it measures, and
# start the server with --no-prefix-caching (both tools' prompts are seeded and repeat across runs).
# guidellm is heavy (torch, transformers); it is not in requirements.txt:
#   python3 -m venv /tmp/glvenv && /tmp/glvenv/bin/pip install guidellm==0.8.1
#   GUIDELLM=/tmp/glvenv/bin/guidellm bash bench/serving/validate_guidellm.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
GUIDELLM=${GUIDELLM:-guidellm}
BIN=${DEEPINFER_BIN:-build/deepinfer}
TOKENIZER=${TOKENIZER:-$PWD/tests/data/tokenizers/deepseek-v3}
CONCURRENCY=${CONCURRENCY:-8,32,64}
REQUESTS=${REQUESTS:-128}
OUT=bench/out/guidellm
mkdir -p "$OUT"

if [[ -z "${TARGET:-}" ]]; then
  # TTFT 60 ms + 0.05 ms per prompt token, then a token every 15 ms.
  "$BIN" bench stub-server --port 0 --ttft-ms 60 --prefill-ms-per-token 0.05 --itl-ms 15 --kv-slots 256 \
    --lifetime 1800 > "$OUT/stub.log" &
  stub_pid=$!
  trap 'kill $stub_pid 2>/dev/null || true' EXIT
  for _ in $(seq 50); do grep -q listening "$OUT/stub.log" && break; sleep 0.1; done
  TARGET=$(awk '/listening/ {print $3}' "$OUT/stub.log")
  MODEL=stub
fi
MODEL=${MODEL:?set MODEL with TARGET}

benchmarks=$(python3 -c "import json,sys; print(json.dumps([{'profile.streams': int(c)} for c in sys.argv[1].split(',')]))" "$CONCURRENCY")
cat > "$OUT/scenario.json" <<JSON
{"spec": {"backend": {"kind": "openai_http", "target": "$TARGET", "model": "$MODEL", "request_format": "/v1/completions"},
          "profile": {"kind": "concurrent", "streams": 1},
          "data": [{"kind": "synthetic_text", "prompt_tokens": 512, "output_tokens": 128}],
          "tokenizer": {"kind": "hf_auto", "model": "$TOKENIZER"},
          "constraints": [{"kind": "max_requests", "count": $REQUESTS}]},
 "benchmarks": $benchmarks}
JSON
"$GUIDELLM" run --scenario "$OUT/scenario.json" --output "kind=json,path=$OUT/guidellm.json" --disable-progress \
  > "$OUT/guidellm.log" 2>&1
"$BIN" bench serve --base-url "$TARGET" --model "$MODEL" --api completions --input-len 512 --output-len 128 \
  --concurrency "$CONCURRENCY" --num-requests "$REQUESTS" --output-json "$OUT/deepinfer.json" --quiet > "$OUT/deepinfer.log"
python3 bench/serving/compare_guidellm.py "$OUT/guidellm.json" "$OUT/deepinfer.json" | tee "$OUT/comparison.md"
