"""Golden tests: `deepinfer generate` on the fixture checkpoints reproduces the greedy output ids
exactly and each step's logprob within 1e-3. Expected values come from DeepSeek's reference
implementation (deepseek-ai/DeepSeek-V3 inference/model.py, float32, absorbed MLA), recorded in
each fixture's golden.json."""
import json
import pathlib
import subprocess

import pytest

MODELS = pathlib.Path(__file__).resolve().parent.parent / "data" / "models"
CASES = [
    (model, i)
    for model in ("tiny-v3", "tiny-v3-fp8", "tiny-v2")
    for i in range(len(json.loads((MODELS / model / "golden.json").read_text())["cases"]))
]


@pytest.mark.parametrize("model,case_index", CASES)
def test_generate_matches_reference(deepinfer_bin, model, case_index):
    case = json.loads((MODELS / model / "golden.json").read_text())["cases"][case_index]
    out = subprocess.run(
        [deepinfer_bin, "generate", "--model", str(MODELS / model),
         "--prompt-ids", ",".join(map(str, case["prompt_ids"])),
         "--max-tokens", str(len(case["output_ids"])), "--temperature", "0", "--ignore-eos", "--json"],
        capture_output=True, text=True, timeout=300, check=True)
    result = json.loads(out.stdout)
    assert result["output_ids"] == case["output_ids"]
    for step, (got, want) in enumerate(zip(result["logprobs"], case["steps"])):
        assert abs(got - want["logprob"]) < 1e-3, f"step {step}: {got} vs {want['logprob']}"


def test_generate_rejects_bad_ids(deepinfer_bin):
    out = subprocess.run([deepinfer_bin, "generate", "--model", str(MODELS / "tiny-v3"), "--prompt-ids", "3,99999",
                          "--max-tokens", "2", "--json"], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "99999" in out.stderr and "vocabulary" in out.stderr


def test_generate_reports_missing_model(deepinfer_bin, tmp_path):
    out = subprocess.run([deepinfer_bin, "generate", "--model", str(tmp_path), "--prompt-ids", "3",
                          "--max-tokens", "2"], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "config.json" in out.stderr
