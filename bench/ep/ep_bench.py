"""Expert parallelism on one machine: `deepinfer generate` alone and under `mpirun -np N
--expert-parallel N`, the same prompts (all of one length, so their first tokens come in one
step) and tokens, outputs checked equal. Decode figures come from each rank's "decode:" line
(tokens after each prompt's first, and the seconds from the last first token to the end; ranks
step in lockstep, so their windows coincide): tok/s = all ranks' tokens / the slowest rank's
seconds; ms per token = those seconds / (tokens per sequence - 1), one decode step per token.
Exchange time and bytes per MoE layer and decode step are the difference of a short and a long
run's totals ("rank r/N: VmRSS ... (peak ...)" lines), as is peak resident memory per rank.

  .venv/bin/python bench/ep/ep_bench.py --model DIR [--configs 1x1,1x2,2x1,4x1] [--batch 1,8]

A configuration RxT runs R ranks of T OpenMP threads each (oversubscribed when R x T exceeds the
cores). Prints a markdown table."""
import argparse
import json
import os
import pathlib
import re
import shutil
import subprocess
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
SUMMARY = re.compile(r"rank (\d+)/(\d+): VmRSS \d+ kB \(peak (\d+) kB\); (\d+) expert exchanges \(\+(\d+) count "
                     r"exchanges\), ([\d.]+) MB sent to other ranks, ([\d.]+) MB kept, ([\d.]+) s in exchanges")


def run(binary, model, prompts, n_tokens, ranks, threads, extra):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    cmd = [binary, "generate", "--model", model, "--prompts-file", prompts, "--max-tokens", str(n_tokens),
           "--temperature", "0", "--ignore-eos", "--json", "--kv-cache-memory", str(256 << 20), *extra]
    if ranks > 1:
        cmd = [shutil.which("mpirun"), "--allow-run-as-root", "--oversubscribe", "-np", str(ranks)] + cmd + [
            "--expert-parallel", str(ranks)]
    else:
        cmd = ["/usr/bin/time", "-f", "peak %M kB"] + cmd
    start = time.monotonic()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, env=env)
    seconds = time.monotonic() - start
    if out.returncode != 0:
        raise RuntimeError(out.stderr)
    stats = [m.groups() for m in SUMMARY.finditer(out.stderr)]
    peaks = [int(s[2]) for s in stats] or [int(m) for m in re.findall(r"peak (\d+) kB", out.stderr)]
    decode = [(int(n), float(t)) for n, t in re.findall(r"decode: (\d+) tokens after each prompt's first, ([\d.]+) s",
                                                        out.stderr)]
    return {"seconds": seconds, "stdout": out.stdout, "peaks_kb": peaks,
            "decode_tokens": sum(n for n, _ in decode), "decode_s": max(t for _, t in decode),
            "counts": sum(int(s[4]) for s in stats) / max(1, len(stats)),
            "mb_sent": sum(float(s[5]) for s in stats), "mb_kept": sum(float(s[6]) for s in stats),
            "exchange_s": max([float(s[7]) for s in stats] or [0.0])}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--binary", default=str(ROOT / "build" / "deepinfer"))
    ap.add_argument("--configs", default="1x1,1x2,2x1,4x1", help="ranks x threads per rank")
    ap.add_argument("--batch", default="1,8")
    ap.add_argument("--short", type=int, default=4)
    ap.add_argument("--long", type=int, default=36)
    ap.add_argument("--prompt-len", type=int, default=16)
    ap.add_argument("--extra", default="", help="more generate flags, space-separated")
    ap.add_argument("--repeat", type=int, default=1, help="runs per configuration, interleaved; the fastest counts")
    a = ap.parse_args()
    n_moe = json.loads((pathlib.Path(a.model) / "config.json").read_text())
    n_moe = n_moe["num_hidden_layers"] - n_moe.get("first_k_dense_replace", 0)
    print("| ranks x threads | batch | decode tok/s | ms per token | exchange ms per MoE layer and step "
          "(slowest rank) | KB per MoE layer and step (to other ranks / kept) | peak RSS per rank, GB |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for batch in map(int, a.batch.split(",")):
            prompts = pathlib.Path(tmp) / f"prompts{batch}.jsonl"
            prompts.write_text("".join(json.dumps({"prompt_ids": [(17 * i + 31 * j) % 1000 + 10
                                                                   for j in range(a.prompt_len)]}) + "\n"
                                       for i in range(batch)))
            reference = None
            best = {}
            configs = [tuple(map(int, c.split("x"))) for c in a.configs.split(",")]
            for _ in range(a.repeat):  # interleaved, so that a busy spell hits every configuration alike
                for ranks, threads in configs:
                    short = run(a.binary, a.model, str(prompts), a.short, ranks, threads, a.extra.split())
                    long = run(a.binary, a.model, str(prompts), a.long, ranks, threads, a.extra.split())
                    if reference is None:
                        reference = long["stdout"]
                    assert long["stdout"] == reference, f"{ranks} ranks: outputs differ from one process"
                    if (ranks, threads) not in best or long["decode_s"] < best[(ranks, threads)][1]["decode_s"]:
                        best[(ranks, threads)] = (short, long)
            for (ranks, threads), (short, long) in best.items():
                extra_tokens = a.long - a.short
                row = [f"{ranks} x {threads}", str(batch), f"{long['decode_tokens'] / long['decode_s']:.1f}",
                       f"{1000 * long['decode_s'] / (a.long - 1):.1f}"]
                if ranks > 1:
                    steps = extra_tokens * n_moe
                    row.append(f"{1000 * (long['exchange_s'] - short['exchange_s']) / steps:.2f}")
                    row.append(f"{1000 * (long['mb_sent'] - short['mb_sent']) / steps / ranks:.1f} / "
                               f"{1000 * (long['mb_kept'] - short['mb_kept']) / steps / ranks:.1f}")
                else:
                    row += ["-", "-"]
                row.append(", ".join(f"{p / 1e6:.2f}" for p in long["peaks_kb"]))
                print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
