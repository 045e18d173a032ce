"""Speculative decoding is lossless: `deepinfer generate --speculative ngram` prints exactly the
JSON of plain decoding (ids and every logprob bitwise) on every golden fixture (DeepSeek-V2, V3,
V3-FP8, V4, V4-FP8), for k = 1..4 drafts, every case batched in one run; and on a repeating
prompt, where n-gram drafts are right, greedy and seeded sampling alike. `--speculative mtp` (the
MTP block's drafts, DeepSeek-V4, and DeepSeek-V3's MTP layer on tiny-v3-mtp) prints the same JSON
on V4, V4-FP8 and tiny-v3-mtp for k = 1..4, greedy and seeded, and reports its cache kinds at load;
models without an MTP drafter (V3 without an MTP layer, V4.1) refuse it.
The reference is the plain path, itself checked against DeepSeek's reference implementation by
test_golden.py."""
import json
import os
import pathlib
import re
import subprocess

import pytest

MODELS = pathlib.Path(__file__).resolve().parent.parent / "data" / "models"


def generate(binary, model, prompts, *extra, max_tokens=16, stats=False, log=False):
    out = subprocess.run(
        [binary, "generate", "--model", str(model), "--prompts-file", str(prompts), "--max-tokens", str(max_tokens),
         "--ignore-eos", "--json", "--kv-cache-memory", str(64 << 20), *extra],
        capture_output=True, text=True, timeout=600, check=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    if log:
        return out.stdout, out.stderr
    if not stats:
        return out.stdout
    m = re.search(r"speculative: (\d+) draft tokens, (\d+) accepted", out.stderr)
    return out.stdout, int(m.group(1)), int(m.group(2))


@pytest.mark.parametrize("model", ["tiny-v2", "tiny-v3", "tiny-v3-fp8", "tiny-v4", "tiny-v4-fp8"])
def test_ngram_speculation_gives_the_plain_output_on_the_fixtures(deepinfer_bin, tmp_path, model):
    cases = json.loads((MODELS / model / "golden.json").read_text())["cases"]
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"prompt_ids": c["prompt_ids"]}) + "\n" for c in cases))
    plain = generate(deepinfer_bin, MODELS / model, prompts, "--temperature", "0")
    for k in (1, 2, 3, 4):
        spec = generate(deepinfer_bin, MODELS / model, prompts, "--temperature", "0", "--speculative", "ngram",
                        "--num-speculative-tokens", str(k))
        assert spec == plain, f"k={k}"


@pytest.mark.parametrize("model", ["tiny-v4", "tiny-v4-fp8"])
def test_mtp_speculation_gives_the_plain_output_on_the_v4_fixtures(deepinfer_bin, tmp_path, model):
    # The fixtures' weights are random, so the MTP block's drafts are rarely right: drafting and
    # verifying are what is checked here, and that the output does not move.
    cases = json.loads((MODELS / model / "golden.json").read_text())["cases"]
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"prompt_ids": c["prompt_ids"]}) + "\n" for c in cases))
    for sampling in (["--temperature", "0"], ["--temperature", "0.8", "--seed", "5"]):
        plain = generate(deepinfer_bin, MODELS / model, prompts, *sampling)
        for k in (1, 2, 3, 4):
            spec, drafted, accepted = generate(deepinfer_bin, MODELS / model, prompts, *sampling, "--speculative", "mtp",
                                               "--num-speculative-tokens", str(k), stats=True)
            assert spec == plain, (sampling, k)
            assert drafted > 0 and 0 <= accepted <= drafted, (sampling, k, drafted, accepted)
    _, stderr = generate(deepinfer_bin, MODELS / model, prompts, "--speculative", "mtp", log=True)
    assert "mtp window 16" in stderr and "mtp streams" in stderr, stderr
    _, stderr = generate(deepinfer_bin, MODELS / model, prompts, log=True)
    assert "mtp" not in stderr, stderr


def test_mtp_speculation_gives_the_plain_output_with_the_v3_mtp_layer(deepinfer_bin, tmp_path):
    # DeepSeek-V3's MTP layer (tiny-v3-mtp; the layer against its reference in
    # tests/model/deepseek_mtp_test.cpp): random weights, so drafts are rarely right.
    model = MODELS / "tiny-v3-mtp"
    cases = json.loads((model / "golden_mtp.json").read_text())["cases"]
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"prompt_ids": c["ids"]}) + "\n" for c in cases))
    for sampling in (["--temperature", "0"], ["--temperature", "0.8", "--seed", "5"]):
        plain = generate(deepinfer_bin, model, prompts, *sampling)
        for k in (1, 2, 3, 4):
            spec, drafted, accepted = generate(deepinfer_bin, model, prompts, *sampling, "--speculative", "mtp",
                                               "--num-speculative-tokens", str(k), stats=True)
            assert spec == plain, (sampling, k)
            assert drafted > 0 and 0 <= accepted <= drafted, (sampling, k, drafted, accepted)
    _, stderr = generate(deepinfer_bin, model, prompts, "--speculative", "mtp", log=True)
    assert "mtp_latent" in stderr and "mtp_hidden" in stderr, stderr
    _, stderr = generate(deepinfer_bin, model, prompts, log=True)
    assert "mtp_latent" not in stderr and "mtp_hidden" not in stderr, stderr


def test_ngram_drafts_are_accepted_and_stay_exact(deepinfer_bin, tmp_path):
    # Over 120 tokens the tiny model's own output repeats (vocabulary 1,024), so some drafts are
    # right and some wrong: both paths run, greedy and seeded sampling alike.
    segment = [17, 201, 33, 480, 75, 9, 612, 88]
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps({"prompt_ids": segment * 2}) + "\n" + json.dumps({"prompt_ids": segment * 3}) + "\n")
    model = MODELS / "tiny-v3"
    for sampling in (["--temperature", "0"], ["--temperature", "0.8", "--seed", "5"]):
        plain = generate(deepinfer_bin, model, prompts, *sampling, max_tokens=120)
        spec, drafted, accepted = generate(deepinfer_bin, model, prompts, *sampling, "--speculative", "ngram",
                                           "--num-speculative-tokens", "4", max_tokens=120, stats=True)
        assert spec == plain, sampling
        # Greedy, the output falls into the prompt's cycle: drafts are accepted and rejected. Sampled,
        # it may leave it at once, and the gate then pauses a sequence after its first rejected drafts.
        assert drafted > accepted > 0 if sampling[1] == "0" else drafted > 0, (sampling, drafted, accepted)


def test_speculative_flags_are_checked(deepinfer_bin, tmp_path):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps({"prompt_ids": [1, 2, 3]}) + "\n")
    for model, extra, message in (
            ("tiny-v3", ["--speculative", "eagle"], "--speculative"),
            ("tiny-v3", ["--speculative", "mtp"], "MTP"),
            ("tiny-v41", ["--speculative", "mtp"], "MTP"),
            ("tiny-v3", ["--speculative", "ngram", "--num-speculative-tokens", "0"], "num-speculative-tokens")):
        p = subprocess.run([deepinfer_bin, "generate", "--model", str(MODELS / model), "--prompts-file", str(prompts),
                            "--max-tokens", "2", "--kv-cache-memory", str(64 << 20), *extra], capture_output=True,
                           text=True, timeout=120)
        assert p.returncode != 0 and message in p.stderr, (model, extra, p.stderr)
