"""Our grammar engine and xgrammar side by side, in one run, on the same JSON Schemas, the same
vocabulary (DeepSeek-V3's tokenizer, tests/data/tokenizers/deepseek-v3) and the same token
sequences (bench/RESULTS.md, "Grammar engine: against xgrammar").

Run by hand, from the project root, with a Python that has xgrammar (not a project dependency: it
imports torch), e.g.:
    python3 -m venv /tmp/xg-venv && /tmp/xg-venv/bin/pip install xgrammar
    cmake --build build --target grammar_bench
    /tmp/xg-venv/bin/python bench/grammar/xgrammar_compare.py --bench build/grammar_bench

1. `grammar_bench --dump-outputs` compiles every schema of the corpus with our engine (median of
   --compile-repeats compiles), walks random valid outputs through our matcher, re-encodes them
   with the tokenizer, times our per-token mask fill over those token sequences, and writes the
   sequences out.
2. Here, xgrammar compiles the same schemas (GrammarCompiler with its cache off, one thread,
   any_whitespace True, since our JSON may put one space after ',' and ':' and xgrammar's compact
   mode fixes its separators; strict_mode True, as our compiler treats undeclared properties;
   median of --compile-repeats) and replays the same token sequences through a fresh
   GrammarMatcher per output, timing fill_next_token_bitmask per token (a Python call: its few
   microseconds of call overhead are included).
Both report compile median/p99 over the schemas each supports and mask median/p99 over all
tokens measured. Sequences that xgrammar's grammar rejects part-way (its JSON differs in details
from ours) are timed up to the rejection and counted.
"""
import argparse
import importlib.metadata
import json
import statistics
import subprocess
import sys
import tempfile
import time

CORPORA = ["tests/grammar/corpus/json_schema_test_suite.jsonl", "tests/grammar/corpus/jsonschemabench_sample.jsonl",
           "tests/grammar/corpus/tool_schemas.jsonl"]


def percentile(values, p):
    if not values:
        return 0.0
    v = sorted(values)
    return v[min(len(v) - 1, int(p * (len(v) - 1) + 0.5))]


def summary(values, unit_scale=1.0):
    return {"median": percentile(values, 0.5) * unit_scale, "p99": percentile(values, 0.99) * unit_scale,
            "max": percentile(values, 1.0) * unit_scale, "n": len(values)}


def run_ours(args, dump_path):
    cmd = [args.bench, "--model", args.tokenizer, "--outputs-per-schema", str(args.outputs_per_schema),
           "--compile-repeats", str(args.compile_repeats), "--dump-outputs", dump_path] + (["--warm"] if args.warm else [])
    for c in args.corpus:
        cmd += ["--corpus", c]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def run_xgrammar(args, records):
    import torch
    import xgrammar as xgr
    from transformers import AutoTokenizer

    t0 = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
    info = xgr.TokenizerInfo.from_huggingface(tokenizer)
    info_seconds = time.perf_counter() - t0
    compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
    compile_ms, mask_us = [], []
    supported = rejected_outputs = 0
    errors = {}
    bitmask = xgr.allocate_token_bitmask(1, info.vocab_size)
    for record in records:
        schema = json.dumps(record["schema"])
        times, compiled = [], None
        try:
            for _ in range(args.compile_repeats):
                t0 = time.perf_counter()
                compiled = compiler.compile_json_schema(schema, any_whitespace=True, strict_mode=True)
                times.append(time.perf_counter() - t0)
        except Exception as e:  # xgrammar raises RuntimeError/ValueError for what it does not support
            key = str(e).splitlines()[0][:80]
            errors[key] = errors.get(key, 0) + 1
            continue
        supported += 1
        compile_ms.append(statistics.median(times) * 1e3)
        for ids in record.get("outputs", []):
            matcher = xgr.GrammarMatcher(compiled)
            for i in range(len(ids) + 1):
                t0 = time.perf_counter()
                matcher.fill_next_token_bitmask(bitmask)
                mask_us.append((time.perf_counter() - t0) * 1e6)
                if i < len(ids) and not matcher.accept_token(ids[i]):
                    rejected_outputs += 1
                    break
    return {"version": importlib.metadata.version("xgrammar"), "torch": torch.__version__,
            "tokenizer_info_seconds": info_seconds, "vocab_size": info.vocab_size,
            "schemas": len(records), "supported": supported, "compile_ms": summary(compile_ms),
            "mask_us": summary(mask_us), "outputs_rejected_part_way": rejected_outputs,
            "top_errors": sorted(errors.items(), key=lambda kv: -kv[1])[:8]}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bench", default="build/grammar_bench")
    p.add_argument("--tokenizer", default="tests/data/tokenizers/deepseek-v3")
    p.add_argument("--corpus", action="append", default=None)
    p.add_argument("--outputs-per-schema", type=int, default=2)
    p.add_argument("--compile-repeats", type=int, default=5)
    p.add_argument("--warm", action="store_true", help="grammar_bench --warm: its JSON frames warmed first, as a server does")
    args = p.parse_args()
    args.corpus = args.corpus or CORPORA
    with tempfile.NamedTemporaryFile(suffix=".jsonl") as dump:
        ours = run_ours(args, dump.name)
        with open(dump.name, encoding="utf-8") as f:
            records = [json.loads(line) for line in f]
    # Our mask times over the same sequences come from grammar_bench (cache per output: cold).
    theirs = run_xgrammar(args, records)
    report = {"ours": {"schemas": ours["schemas"], "supported": ours["supported"], "compile_ms": ours["compile_ms"],
                       "mask_cache_per_output_us": ours["mask_cache_per_output"],
                       "mask_cache_per_schema_us": ours["mask_cache_per_schema"],
                       "vocabulary_seconds": ours["vocabulary_seconds"], "outputs": ours["outputs"]},
              "xgrammar": theirs}
    json.dump(report, sys.stdout, indent=2)
    print()
    o, x = report["ours"], theirs
    print("| engine | supported | compile median / p99 ms | mask median / p99 us |")
    print("| --- | --- | --- | --- |")
    print(f"| ours, cache per output | {o['supported']}/{o['schemas']} | {o['compile_ms']['median']:.3g} / "
          f"{o['compile_ms']['p99']:.3g} | {o['mask_cache_per_output_us']['median_us']:.3g} / "
          f"{o['mask_cache_per_output_us']['p99_us']:.4g} |")
    print(f"| ours, cache per schema | | | {o['mask_cache_per_schema_us']['median_us']:.3g} / "
          f"{o['mask_cache_per_schema_us']['p99_us']:.4g} |")
    print(f"| xgrammar {x['version']} | {x['supported']}/{x['schemas']} | {x['compile_ms']['median']:.3g} / "
          f"{x['compile_ms']['p99']:.3g} | {x['mask_us']['median']:.3g} / {x['mask_us']['p99']:.4g} |")


if __name__ == "__main__":
    main()
