"""The grammar engine's outputs checked by references we did not write.

JSON Schemas: tests/grammar/corpus/ (origins in its README and on each line). Every schema either
compiles or fails with an error that names the keyword or problem; for every compiled one, random
walks through the token matcher over the DeepSeek-V3 vocabulary (`deepinfer grammar-sample`) must
parse as JSON and validate with the `jsonschema` package (format checks on). Regexes: outputs must
`re.fullmatch` the pattern. The supported share is printed (pytest -s).
"""
import json
import pathlib
import re
import subprocess

import jsonschema
import pytest

CORPUS = pathlib.Path(__file__).parent / "corpus"
SAMPLES_PER_SCHEMA = 4
# An error names what it rejects: a quoted keyword/format/construct, or one of these problems.
NAMED_PROBLEM = re.compile(r"'[^']+'|not valid JSON|admits no value|matches no text|nested too deeply"
                           r"|points to nothing|only local references|only one of|not an object")


def sample(deepinfer_bin, root, requests):
    proc = subprocess.run([deepinfer_bin, "grammar-sample", "--max-tokens", "600"],
                          input="".join(json.dumps(r) + "\n" for r in requests),
                          capture_output=True, text=True, cwd=root, timeout=600)
    assert proc.returncode in (0, 1), proc.stderr
    out = [json.loads(line) for line in proc.stdout.splitlines() if line]
    assert len(out) == len(requests)
    return out


def load(name):
    with open(CORPUS / name, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def check_corpus(deepinfer_bin, root, records):
    requests = [{"schema": r["schema"], "seed": i, "count": SAMPLES_PER_SCHEMA} for i, r in enumerate(records)]
    results = sample(deepinfer_bin, root, requests)
    supported, unsupported, invalid, unfinished, n_valid = 0, [], [], 0, 0
    for record, result in zip(records, results):
        if "error" in result:
            assert NAMED_PROBLEM.search(result["error"]), (record["origin"], result["error"])
            unsupported.append((record["origin"], result["error"]))
            continue
        supported += 1
        cls = jsonschema.validators.validator_for(record["schema"], default=jsonschema.Draft202012Validator)
        validator = cls(record["schema"], format_checker=cls.FORMAT_CHECKER)
        for s in result["samples"]:
            assert not s.get("stuck") and "matcher_error" not in s, (record["origin"], s)
            if not s["terminated"]:
                unfinished += 1
                continue
            try:
                validator.validate(json.loads(s["text"]))
                n_valid += 1
            except (json.JSONDecodeError, jsonschema.ValidationError) as e:
                invalid.append((record["origin"], s["text"], str(e)[:300]))
    n = len(records)
    print(f"\n{n} schemas: {supported} supported ({100.0 * supported / n:.1f} %), "
          f"{n_valid} outputs valid, {len(invalid)} invalid, {unfinished} hit the token limit")
    reasons = {}
    for _, err in unsupported:
        key = re.sub(r" at #.*| at /.*", "", err)
        reasons[key] = reasons.get(key, 0) + 1
    for reason, count in sorted(reasons.items(), key=lambda kv: -kv[1])[:15]:
        print(f"  {count:4d}  {reason}")
    assert not invalid, invalid[:5]
    assert unfinished <= 0.05 * supported * SAMPLES_PER_SCHEMA
    return supported, n


def test_json_schema_test_suite(deepinfer_bin, root):
    supported, n = check_corpus(deepinfer_bin, root, load("json_schema_test_suite.jsonl"))
    assert n >= 380
    assert supported >= 0.4 * n  # a floor against regressions; the share is printed


def test_jsonschemabench_sample(deepinfer_bin, root):
    supported, n = check_corpus(deepinfer_bin, root, load("jsonschemabench_sample.jsonl"))
    assert n >= 350
    assert supported >= 0.4 * n  # a floor against regressions; the share is printed


def test_tool_schemas_all_supported(deepinfer_bin, root):
    supported, n = check_corpus(deepinfer_bin, root, load("tool_schemas.jsonl"))
    assert supported == n


PATTERNS = [
    r"^[A-Z]{3}-\d{4}$", r"(\+\d{1,3} )?\(?\d{3}\)?[ -]?\d{3}-\d{4}", r"[a-z]+(_[a-z0-9]+)*",
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)", r"#[0-9a-fA-F]{6}", r"(yes|no|maybe)",
    r"\w+@\w+\.(com|org|net)", r"[^\s,]{1,8}(,[^\s,]{1,8}){0,3}", r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}",
    r"[αβγ]+[\u4e00-\u9fff]?", r"(ab|cd)*e?", r"a.{0,5}z",
]


def test_regex_outputs_fullmatch(deepinfer_bin, root):
    results = sample(deepinfer_bin, root, [{"regex": p, "seed": i, "count": 8} for i, p in enumerate(PATTERNS)])
    for pattern, result in zip(PATTERNS, results):
        assert "error" not in result, (pattern, result)
        for s in result["samples"]:
            assert s["terminated"] and not s.get("stuck"), (pattern, s)
            assert re.fullmatch(pattern, s["text"]), (pattern, s["text"])


def test_json_object_mode(deepinfer_bin, root):
    [result] = sample(deepinfer_bin, root, [{"json_object": True, "seed": 3, "count": 8}])
    for s in result["samples"]:
        if s["terminated"]:
            assert isinstance(json.loads(s["text"]), dict)


def test_errors_name_the_keyword(deepinfer_bin, root):
    bad = [({"type": "object", "patternProperties": {"^a": {}, "^b": {}}}, "'patternProperties'"),
           ({"type": "string", "pattern": "(a)\\1"}, "backreferences"),
           ({"type": "string", "format": "color"}, "'color'"),
           ({"not": {}}, "'not'")]
    results = sample(deepinfer_bin, root, [{"schema": s} for s, _ in bad])
    for (schema, word), result in zip(bad, results):
        assert word in result.get("error", ""), (schema, result)
