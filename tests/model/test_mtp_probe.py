"""`deepinfer mtp-probe --json` on tiny-v4 against golden_mtp.json, whose values come from DeepSeek's
V4-Flash inference/model.py MTPBlock (release 0825add, float32, exact weights): for the 45-token
case (longer than the 16-token window), every position's top-1 id equal (either near-tied id where
the golden marks the position "ambiguous"), its top-5 logprobs rank by rank and the target's
logprob within 1e-3, and exactly the keys t, top5, target_logprob. Bad input is a clear error and
exit code 1. The C++ test (deepseek_v4_mtp_test.cpp) covers every case of both fixtures."""
import json
import os
import pathlib
import subprocess

import pytest

MODELS = pathlib.Path(__file__).resolve().parent.parent / "data" / "models"


def probe(binary, model, ids, *extra):
    return subprocess.run(
        [binary, "mtp-probe", "--model", str(MODELS / model), "--ids", ",".join(map(str, ids)), *extra],
        capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})


def test_mtp_probe_matches_model_py(deepinfer_bin):
    golden = json.loads((MODELS / "tiny-v4" / "golden_mtp.json").read_text())
    case = golden["cases"][2]
    s = case["prompt_ids"] + case["output_ids"]
    assert len(case["prompt_ids"]) == 45
    out = probe(deepinfer_bin, "tiny-v4", s, "--json")
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert list(got) == ["positions"]
    assert len(got["positions"]) == len(s) - 1 == len(case["positions"])
    for mine, want in zip(got["positions"], case["positions"]):
        t = want["t"]
        assert list(mine) == ["t", "top5", "target_logprob"] and mine["t"] == t
        top1 = [want["top5"][0][0]] + ([want["top5"][1][0]] if want["ambiguous"] else [])
        assert mine["top5"][0][0] in top1, f"t={t}"
        assert len(mine["top5"]) == 5
        for rank, (m, w) in enumerate(zip(mine["top5"], want["top5"])):
            assert abs(m[1] - w[1]) < 1e-3, f"t={t} rank {rank}: {m} vs {w}"
        if want["target_id"] is None:
            assert mine["target_logprob"] is None and t == len(s) - 2
        else:
            assert abs(mine["target_logprob"] - want["target_logprob"]) < 1e-3, f"t={t}"


@pytest.mark.parametrize("model,ids,message", [
    ("tiny-v4", [5], "at least 2 token ids"),
    ("tiny-v4", [5, 1024], "token id 1024 is outside the vocabulary [0, 1024)"),
    ("tiny-v4", ["5", "x"], "'x' is not a token id"),
    ("tiny-v3", [5, 17], "is a DeepseekV3ForCausalLM checkpoint"),
])
def test_mtp_probe_errors(deepinfer_bin, model, ids, message):
    out = probe(deepinfer_bin, model, ids, "--json")
    assert out.returncode == 1
    assert message in out.stderr
    assert out.stdout == ""
