"""Draws `deepinfer bench serve --output-json` reports as one PNG: throughput per GPU against
per-user speed across the runs of a sweep (the Pareto curve), and TTFT and ITL percentiles.

Usage: python3 bench/serving/plot.py OUT.png REPORT.json[=LABEL] [REPORT.json[=LABEL] ...]
Each report is one series (e.g. DeepInfer and llama.cpp on the same sweep); LABEL defaults to the
report's base URL. Needs matplotlib (requirements.txt).
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402


def load(arg):
    path, _, label = arg.partition("=")
    with open(path, encoding="utf-8") as f:
        report = json.load(f)
    return label or report["config"]["base_url"], report


def x_of(run, i):
    """A run's position on the latency panels: its concurrency or rate, else its index."""
    load = run["load"]
    return load.get("concurrency") or load.get("request_rate") or i + 1


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out, series = sys.argv[1], [load(a) for a in sys.argv[2:]]
    fig, (pareto, ttft, itl) = plt.subplots(1, 3, figsize=(18, 5.5))
    max_speed = 0.0
    for color, (label, report) in zip(plt.rcParams["axes.prop_cycle"].by_key()["color"], series):
        runs = report["runs"]
        speed = [r["user_output_tokens_per_s"]["p50"] for r in runs]
        tput = [r["throughput"]["output_tokens_per_s_per_gpu"] for r in runs]
        pareto.plot(speed, tput, "o-", color=color, label=label)
        max_speed = max([max_speed, *speed])
        for r, x, y in zip(runs, speed, tput):
            pareto.annotate(r["label"], (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
        xs = [x_of(r, i) for i, r in enumerate(runs)]
        for axis, key in [(ttft, "ttft_ms"), (itl, "itl_ms")]:
            for stat, style in [("median", "o-"), ("p90", "s--"), ("p99", "^:")]:
                axis.plot(xs, [r[key][stat] for r in runs], style, color=color, label=f"{label} {stat}")
    pareto.set_xlabel("per-user output tokens/s (P50 over requests)")
    pareto.set_ylabel("output tokens/s per GPU")
    pareto.set_title("Throughput against per-user speed")
    pareto.set_xlim(0, max_speed * 1.15 or 1)
    pareto.set_ylim(bottom=0)
    mode = series[0][1]["runs"][0]["load"]["mode"]
    for axis, name in [(ttft, "TTFT"), (itl, "ITL")]:
        axis.set_xlabel({"concurrency": "concurrency", "rate": "request rate (1/s)"}.get(mode, "run"))
        if mode == "concurrency":
            axis.set_xscale("log", base=2)
        axis.set_yscale("log")
        axis.yaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
        axis.yaxis.set_minor_formatter(matplotlib.ticker.ScalarFormatter())
        axis.set_ylabel(f"{name} (ms)")
        axis.set_title(f"{name} percentiles")
    for axis in (pareto, ttft, itl):
        axis.grid(True, which="both", alpha=0.3)
        axis.legend(fontsize=7)
    first = series[0][1]
    fig.suptitle(f"deepinfer bench serve: {first['config']['workload']} workload, model {first['config']['model']}, "
                 f"{first['date']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
