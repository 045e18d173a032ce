#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test: C++ unit and golden tests (ctest),
# then the Python end-to-end and reference tests (pytest). Exits non-zero if any test fails.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
ctest --test-dir build --output-on-failure -j"$(nproc)"
.venv/bin/python -m pytest -q tests
