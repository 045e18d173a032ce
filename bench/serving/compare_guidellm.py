"""Compares a guidellm run with a `deepinfer bench serve` run of the same workload shape on the
same server: TTFT, inter-token latency, E2E and throughput, per concurrency, as a Markdown table.
Exits non-zero when any compared figure differs by more than --tolerance (default 10 %).

Usage: python3 bench/serving/compare_guidellm.py GUIDELLM.json DEEPINFER.json [--tolerance 0.10]

Definitions matched: guidellm's "ITL" is per request (E2E - TTFT) / (output tokens - 1), which is
our TPOT; our ITL (the mean gap between output chunks) equals it when every chunk carries one
token. Throughput is output tokens (requests) over the run's duration in both.
"""
import argparse
import json
import sys


def guidellm_runs(path):
    runs = {}
    for b in json.load(open(path, encoding="utf-8"))["benchmarks"]:
        m = b["metrics"]
        streams = b["config"]["strategy"]["streams"]
        ok = lambda key: m[key]["successful"]  # noqa: E731
        runs[streams] = {
            "TTFT mean (ms)": ok("time_to_first_token_ms")["mean"],
            "TTFT median (ms)": ok("time_to_first_token_ms")["median"],
            "TTFT p90 (ms)": ok("time_to_first_token_ms")["percentiles"]["p90"],
            "ITL mean (ms)": ok("inter_token_latency_ms")["mean"],
            "TPOT mean (ms)": ok("inter_token_latency_ms")["mean"],
            "E2E mean (ms)": ok("request_latency")["mean"] * 1000,
            "output tok/s": ok("output_token_count")["total_sum"] / b["duration"],
            "requests/s": ok("request_latency")["count"] / b["duration"],
        }
    return runs


def deepinfer_runs(path):
    runs = {}
    for r in json.load(open(path, encoding="utf-8"))["runs"]:
        runs[r["load"]["concurrency"]] = {
            "TTFT mean (ms)": r["ttft_ms"]["mean"],
            "TTFT median (ms)": r["ttft_ms"]["median"],
            "TTFT p90 (ms)": r["ttft_ms"]["p90"],
            "ITL mean (ms)": r["itl_ms"]["mean"],
            "TPOT mean (ms)": r["tpot_ms"]["mean"],
            "E2E mean (ms)": r["e2e_ms"]["mean"],
            "output tok/s": r["throughput"]["output_tokens_per_s"],
            "requests/s": r["throughput"]["requests_per_s"],
        }
    return runs


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("guidellm")
    parser.add_argument("deepinfer")
    parser.add_argument("--tolerance", type=float, default=0.10)
    args = parser.parse_args()
    theirs, ours = guidellm_runs(args.guidellm), deepinfer_runs(args.deepinfer)
    worst = 0.0
    print("| concurrency | metric | guidellm | deepinfer bench | difference |")
    print("|---|---|---|---|---|")
    for c in sorted(set(theirs) & set(ours)):
        for metric, value in theirs[c].items():
            mine = ours[c][metric]
            diff = (mine - value) / value if value else 0.0
            worst = max(worst, abs(diff))
            print(f"| {c} | {metric} | {value:.2f} | {mine:.2f} | {diff * 100:+.1f} % |")
    print(f"\nlargest difference: {worst * 100:.1f} % (tolerance {args.tolerance * 100:.0f} %)")
    sys.exit(0 if worst <= args.tolerance else 1)


if __name__ == "__main__":
    main()
