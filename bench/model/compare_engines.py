#!/usr/bin/env python3
"""DeepInfer against llama.cpp and ik_llama.cpp on the same weights, back to back, interleaved.

Runs each engine's own benchmark tools (llama-bench, llama-batched-bench; our model_bench) on one
checkpoint in up to three formats, one format at a time (its files read into the page cache
first), in rounds that alternate the engines (round r runs them in one order, round r + 1 in
reverse). Before every run it waits until the machine is idle (CPU busy below --idle-busy over
3 s and the 1-minute load average below --idle-load, or --idle-wait seconds have passed) and
records both. It prints one JSON line per measurement, then a Markdown table per format.
Other engines are built elsewhere; this script only runs binaries it is given.

Formats (each needs the files named for the engines that run it; a missing file skips the engine):
  bf16: --di-bf16 DIR (safetensors), --ik-bf16 GGUF, --mainline-bf16 GGUF (gguf_for_mainline.py's layout)
  fp8:  --di-fp8 DIR (e4m3, 128x128 block scales), --ik-fp8 / --mainline-fp8 GGUF (Q8_0 by each engine's llama-quantize)
  fp4:  --di-fp4 DIR (FP4 experts, make_fp4_checkpoint.py), --ik-fp4 / --mainline-fp4 GGUF (the same codes)

DeepInfer runs at the instruction-set level the CPU selects, or at each level given by --di-isa
(DEEPINFER_CPU_ISA, e.g. `amx avx512bf16-fma`: the same machine with and without AMX tiles), and
with each lm_head of --di-lm-head (stored, or int8 or fp8: requantized at load, as llama-quantize
quantizes the GGUF's output tensor; int8, a scale per row and 128 columns, is the one about as
precise as its Q8_0).

Measurements (tokens per second): prefill 512 and 2048; decode at batch 1 with 128 and 4096 cached
tokens; batched decode at --batches with 128-token prompts, and --long-batches with 4096-token
prompts (llama-batched-bench -pps: one shared prompt, each sequence decodes --gen tokens).

Usage: compare_engines.py --model-bench build/bench/model/model_bench --ik /path/ik/bin
       --mainline /path/llama.cpp/bin --di-bf16 DIR --ik-bf16 F ... [--rounds 2] [--out results.jsonl]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time


def cpu_busy(seconds=3.0):
    def snap():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v), v[3] + v[4]
    t0, i0 = snap()
    time.sleep(seconds)
    t1, i1 = snap()
    return 1.0 - (i1 - i0) / max(1, t1 - t0)


def wait_idle(args):
    start = time.time()
    while True:
        busy = cpu_busy()
        load = os.getloadavg()[0]
        if (busy < args.idle_busy and load < args.idle_load) or time.time() - start > args.idle_wait:
            return {"cpu_busy_before": round(busy, 3), "load_before": round(load, 2), "waited_s": round(time.time() - start, 1)}


def run(cmd, env=None, timeout=3600):
    # In the temporary directory: ik_llama.cpp's tools write a llama.log into their working directory.
    p = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=timeout, cwd=tempfile.gettempdir(),
                       env={**os.environ, **(env or {})})
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr[-2000:]}")
    return p.stdout + p.stderr


def table_rows(text, *header_start):
    """Rows (lists of cells) of every Markdown table whose header begins with the cells header_start."""
    rows, inside = [], False
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("|"):
            inside = False
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if tuple(cells[:len(header_start)]) == header_start:
            inside = True
        elif inside and not set(cells[0]) <= set("-: "):
            rows.append(cells)
    return rows


def number(cell):
    return float(cell.split("±")[0].strip())


def llama_bench(binary, model, extra):
    """llama-bench's Markdown: test names (pp512, tg16, tg16@pp4096, tg16 @ d4096) -> tok/s."""
    out = run([binary, "-m", model, "-t", "2", "-r", "1", "-o", "md"] + extra)
    res = {}
    for cells in table_rows(out, "model"):
        test, ts = cells[-2], cells[-1]
        m = re.match(r"pp(\d+)$", test)
        if m:
            res[f"prefill {m.group(1)}"] = number(ts)
        m = re.match(r"tg\d+\s*(?:@\s*(?:pp|d)\s*(\d+))?$", test)
        if m:
            res[f"decode b1 ctx {m.group(1) or 0}"] = number(ts)
    return res


def batched_bench(binary, model, npp, gen, batches, ctx):
    out = run([binary, "-m", model, "-t", "2", "-c", str(ctx), "-b", "2048", "-ub", "512", "-pps",
               "-npp", str(npp), "-ntg", str(gen), "-npl", ",".join(map(str, batches))])
    res = {}
    for cells in table_rows(out, "PP"):
        res[f"decode b{int(cells[2])} ctx {npp}"] = number(cells[7])  # S_TG t/s
    return res


def model_bench(binary, model, act, batches, ctx, prompts, steps, isa=None, repeats=1, lm_head="stored"):
    """Decode tok/s per batch; prefill tok/s of the last of `repeats` runs per prompt length."""
    cmd = [binary, "--model", model, "--kv", "bf16", "--activations", act, "--lm-head", lm_head, "--batches", *map(str, batches),
           "--contexts", str(ctx), "--prompts", *map(str, prompts or [0]), "--steps", str(steps),
           "--prefill-formulations", "expanded", "--prefill-repeats", str(repeats)]
    out = run(cmd, env={"OMP_NUM_THREADS": "2", **({"DEEPINFER_CPU_ISA": isa} if isa else {})})
    res = {}
    for cells in table_rows(out, "context", "batch", "step ms"):
        res[f"decode b{int(cells[1])} ctx {ctx}"] = float(cells[3])
    for cells in table_rows(out, "prompt tokens"):
        res[f"prefill {int(cells[0])}"] = float(cells[3])
    return res


def preload(args, fmt):
    """Reads the format's files once, so that no engine's first run pays for the disk."""
    for who in ("di", "ik", "mainline"):
        path = getattr(args, f"{who}_{fmt}")
        if not path:
            continue
        files = [os.path.join(path, f) for f in os.listdir(path) if f.endswith(".safetensors")] if os.path.isdir(path) else [path]
        for f in files:
            with open(f, "rb") as h:
                while h.read(1 << 24):
                    pass


def jobs_for(args, fmt):
    """(engine name, [(when, callable returning {test: tok/s})]) for one format. when: "first"
    (the first round only), "later" (every round but the first: prefill and decode at batch 1-32
    with 128-token contexts, which the first round's parts cover too) or "all"."""
    jobs = []
    di = getattr(args, f"di_{fmt}")
    short = [b for b in args.batches if b <= 32]
    runs = [(isa, act, head) for isa in (args.di_isa or [None]) for act in args.activations for head in args.di_lm_head]
    for isa, act, head in runs if di and args.model_bench else []:
        bench = lambda batches, ctx, prompts, repeats=1, act=act, isa=isa, head=head: model_bench(
            args.model_bench, di, act, batches, ctx, prompts, args.steps, isa, repeats, head)
        parts = [("first", lambda bench=bench: bench([1] + args.batches, 128, [512, 2048], args.prefill_repeats)),
                 ("first", lambda bench=bench: bench([1] + args.long_batches, 4096, []))]
        if act == args.activations[0]:  # the configuration repeated in later rounds
            parts.append(("later", lambda bench=bench: bench([1] + short, 128, [512, 2048], args.prefill_repeats)))
        jobs.append((f"DeepInfer {act} act." + ("" if head == "stored" else f", {head} lm_head") + (f" ({isa})" if isa else ""),
                     parts))
    for name, prefix, depth_flag in (("llama.cpp", "mainline", "d"), ("ik_llama.cpp", "ik", "gp")):
        gguf = getattr(args, f"{prefix}_{fmt}")
        bindir = getattr(args, prefix)
        if not gguf or not bindir:
            continue
        lb, bb = os.path.join(bindir, "llama-bench"), os.path.join(bindir, "llama-batched-bench")
        long_gen = ["-p", "0", "-n", "16", "-d", "4096"] if depth_flag == "d" else ["-p", "0", "-n", "0", "-gp", "4096,16"]
        jobs.append((name, [
            ("all", lambda lb=lb, g=gguf: llama_bench(lb, g, ["-p", "512,2048", "-n", "16"])),
            ("first", lambda lb=lb, g=gguf, x=long_gen: llama_bench(lb, g, x)),
            ("first", lambda bb=bb, g=gguf: batched_bench(bb, g, 128, args.gen, args.batches, 136 * max(args.batches) + 256)),
            ("later", lambda bb=bb, g=gguf: batched_bench(bb, g, 128, args.gen, short, 136 * max(short) + 256)),
            ("first", lambda bb=bb, g=gguf: batched_bench(bb, g, 4096, args.gen, args.long_batches,
                                                        4104 * max(args.long_batches) + 256))]))
        if prefix == "ik" and args.ik_repack:
            jobs.append(("ik_llama.cpp -rtr 1", [("all", lambda lb=lb, g=gguf: llama_bench(lb, g, ["-p", "512,2048", "-n", "16", "-rtr", "1"]))]))
    return jobs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model-bench")
    ap.add_argument("--ik")
    ap.add_argument("--mainline")
    for fmt in ("bf16", "fp8", "fp4"):
        for who in ("di", "ik", "mainline"):
            ap.add_argument(f"--{who}-{fmt}")
    ap.add_argument("--formats", nargs="+", default=["bf16", "fp8", "fp4"])
    ap.add_argument("--activations", nargs="+", default=["bf16", "f32"])
    ap.add_argument("--di-isa", nargs="+", help="DeepInfer's instruction-set levels to run (DEEPINFER_CPU_ISA)")
    ap.add_argument("--di-lm-head", nargs="+", default=["stored"], choices=["stored", "int8", "fp8"],
                    help="DeepInfer's lm_head: as stored, and/or requantized to int8 or fp8 at load (model_bench --lm-head)")
    ap.add_argument("--batches", type=int, nargs="+", default=[8, 32, 64, 128, 256])
    ap.add_argument("--long-batches", type=int, nargs="+", default=[8, 32])
    ap.add_argument("--gen", type=int, default=8, help="decode steps per batched configuration")
    ap.add_argument("--steps", type=int, default=8, help="model_bench decode steps")
    ap.add_argument("--prefill-repeats", type=int, default=1,
                    help="model_bench prefill runs per length; the last is reported (llama-bench warms up once)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--ik-repack", action="store_true", help="also ik_llama.cpp's prefill with -rtr 1")
    ap.add_argument("--idle-busy", type=float, default=0.05)
    ap.add_argument("--idle-load", type=float, default=0.5)
    ap.add_argument("--idle-wait", type=float, default=15)
    ap.add_argument("--out", default="-")
    args = ap.parse_args()
    for key, value in vars(args).items():  # the tools run in another directory
        if isinstance(value, str) and (key in ("model_bench", "ik", "mainline") or key.split("_")[0] in ("di", "ik", "mainline")):
            setattr(args, key, os.path.abspath(value))
    out = sys.stdout if args.out == "-" else open(args.out, "a")
    results = {}  # (fmt, engine) -> {test: [tok/s per round]}
    for fmt in args.formats:
        preload(args, fmt)
        jobs = jobs_for(args, fmt)
        for rnd in range(args.rounds):
            for engine, parts in (jobs if rnd % 2 == 0 else jobs[::-1]):
                for when, part in parts:
                    if when != "all" and when != ("first" if rnd == 0 else "later"):
                        continue
                    idle = wait_idle(args)
                    t0 = time.time()
                    try:
                        got = part()
                    except (RuntimeError, subprocess.TimeoutExpired) as e:
                        print(json.dumps({"format": fmt, "engine": engine, "round": rnd, "error": str(e)[:500]}), file=out, flush=True)
                        continue
                    for test, v in got.items():
                        results.setdefault((fmt, engine), {}).setdefault(test, []).append(v)
                        print(json.dumps({"format": fmt, "engine": engine, "round": rnd, "test": test, "tok_s": v,
                                          "utc": time.strftime("%H:%M:%S", time.gmtime(t0)), **idle}), file=out, flush=True)
    for fmt in args.formats:
        engines = [e for (f, e) in results if f == fmt]
        tests = sorted({t for (f, e), r in results.items() if f == fmt for t in r},
                       key=lambda t: (t.split()[0], [int(x) for x in re.findall(r"\d+", t)]))
        print(f"\n### {fmt}\n\n| test (tok/s) | " + " | ".join(engines) + " |\n|---|" + "---|" * len(engines))
        for t in tests:
            cells = [" / ".join(f"{v:.1f}" for v in results[(fmt, e)].get(t, [])) for e in engines]
            print(f"| {t} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
