#!/usr/bin/env bash
# Installs what is missing, builds, makes the default model if it is not there yet, and starts
# the OpenAI-compatible server on it (127.0.0.1:8000 unless PORT is set).
#   bash scripts/run.sh          a small random DeepSeek-V4 with the real DeepSeek-V4 tokenizer
#   bash scripts/run.sh --v3     a small random DeepSeek-V3 with the real DeepSeek-V3 tokenizer
set -euo pipefail
cd "$(dirname "$0")/.."
family=v4
case "${1:-}" in
  "") ;;
  --v3) family=v3 ;;
  *) echo "usage: bash scripts/run.sh [--v3]" >&2; exit 2 ;;
esac
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target deepinfer

if [[ $family == v4 ]]; then
  model=models/default-v4
  if [[ ! -f $model/config.json ]]; then
    echo "run: generating the default model in $model (a small random DeepSeek-V4 with the real tokenizer)"
    .venv/bin/python tools/make_v4_checkpoint.py "$model" --layers 2 --set vocab_size=129280 \
      --tokenizer tests/data/tokenizers/deepseek-v4 >/dev/null
  fi
else
  model=models/default
  if [[ ! -f $model/config.json ]]; then
    echo "run: generating the default model in $model (a small random DeepSeek-V3 with the real tokenizer)"
    .venv/bin/python tools/make_checkpoint.py "$model" --preset tiny-v3 --tokenizer tests/data/tokenizers/deepseek-v3 >/dev/null
  fi
fi
port=${PORT:-8000}
cat <<MSG
run: starting deepinfer serve on http://127.0.0.1:$port (Ctrl-C to stop). Try:
  curl http://127.0.0.1:$port/v1/chat/completions -H 'Content-Type: application/json' \\
    -d '{"model": "default", "messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 16}'
MSG
exec build/deepinfer serve --model "$model" --served-model-name default --port "$port"
