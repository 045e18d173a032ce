#!/usr/bin/env bash
# KV transfer throughput of kv_transfer_bench against ucx_perftest's ucp_get on the same machine,
# the same UCX transports and error handling (-e: UCP_ERR_HANDLING_MODE_PEER, as the workers use),
# alternating runs so that both see the same load. Usage: bench/pd/compare_ucx_perftest.sh BUILD_DIR [ROUNDS]
set -euo pipefail
build=${1:?build directory}
rounds=${2:-3}
port=13360
for ((r = 0; r < rounds; r++)); do
  for blocks in 64 8; do
    bytes=$((blocks * 8 * 73728))
    ucx_perftest -p $port -e >/dev/null 2>&1 &
    server=$!
    sleep 1
    perf=$(ucx_perftest 127.0.0.1 -p $port -e -t ucp_get -s $bytes -n 30 -w 3 2>&1 | awk '/Final/ {print $7}')
    wait $server || true
    ours=$("$build/bench/pd/kv_transfer_bench" --blocks $blocks --slabs 8 --iters 30)
    echo "round $r, $bytes B per transfer: ucx_perftest -e ucp_get ${perf} MB/s | kv_transfer_bench: ${ours#*: }"
    port=$((port + 1))
  done
done
