"""Writes the reference renderings that tests/chat compares the C++ chat template engine with.

The reference is Hugging Face transformers itself: `render_jinja_template`, the function that
`tokenizer.apply_chat_template` renders with (sandboxed Jinja2, trim_blocks, lstrip_blocks,
its own tojson, raise_exception and strftime_now), given each template in
tests/data/chat/templates/ and the special tokens of its checkpoint (listed below). For
DeepSeek-V3 it also runs the full `apply_chat_template(..., tokenize=True)` on the real tokenizer
files, to record the token ids the `chat-template` CLI must print.

Run it once when templates or cases change, and commit what it writes:
    .venv/bin/pip install transformers==4.57.1
    .venv/bin/python tests/chat/make_reference.py
It writes tests/data/chat/reference/<template>.jsonl (one row per case and add_generation_prompt
value: the inputs and either "rendered" or, where transformers raises, "error") and
tests/data/chat/reference/deepseek-v3-tokenized.jsonl.
"""
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
TEMPLATES = ROOT / "tests" / "data" / "chat" / "templates"
OUT = ROOT / "tests" / "data" / "chat" / "reference"
# The real DeepSeek-V3 tokenizer: the project's copy, else the shared fixture it was copied from.
DEEPSEEK_TOKENIZERS = [ROOT / "tests" / "data" / "tokenizers" / "deepseek-v3",
                       ROOT.parent / "shared" / "fixtures" / "tokenizers" / "deepseek-v3"]

DEEPSEEK = {"bos_token": "<｜begin▁of▁sentence｜>", "eos_token": "<｜end▁of▁sentence｜>",
            "pad_token": "<｜end▁of▁sentence｜>"}
LLAMA3 = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}
QWEN = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
MISTRAL = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
GEMMA = {"bos_token": "<bos>", "eos_token": "<eos>", "unk_token": "<unk>", "pad_token": "<pad>"}

# Template file -> special tokens of its checkpoint (from that checkpoint's tokenizer_config.json).
SPECIAL_TOKENS = {
    "deepseek-v3.jinja": DEEPSEEK,
    "deepseek-v3.1.jinja": DEEPSEEK,
    "deepseek-r1.jinja": DEEPSEEK,
    "deepseek-r1-distill-llama-8b.jinja": DEEPSEEK,
    "llama-3.1-8b-instruct.jinja": LLAMA3,
    "llama-3.2-3b-instruct.jinja": LLAMA3,
    "qwen2.5-7b-instruct.jinja": QWEN,
    "qwq-32b.jinja": QWEN,
    "qwen3-0.6b.jinja": QWEN,
    "mistral-nemo-instruct-2407.jinja": MISTRAL,
    "mistral-small-3.2-24b-instruct-2506.jinja": MISTRAL,
    "gemma-2-2b-it.jinja": GEMMA,
    "gemma-4-31b-it.jinja": GEMMA,
}

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city. Returns \"temp_c\" & conditions <b>now</b>.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Paris or 東京"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"},
                "days": {"type": "integer", "minimum": 1, "maximum": 1e1, "description": "Forecast days"},
                "threshold": {"type": "number", "default": 0.5},
            },
            "required": ["city"],
        },
    },
}
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the web.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"},
                                                        "tags": {"type": "array", "items": {"type": "string"}}},
                       "required": ["query"]},
    },
}


def call(i, name, args, as_text):
    # Nine alphanumeric characters: the only ids Mistral's templates accept.
    return {"id": f"call0000{i}", "type": "function",
            "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False) if as_text else args}}


def tool_cases(as_text):
    """Tool-calling conversations; arguments as JSON text (DeepSeek's templates concatenate them)
    with null content, or as objects (what most other templates expect) with empty content."""
    suffix = "_text_args" if as_text else "_object_args"
    empty = None if as_text else ""
    one_call = [
        {"role": "system", "content": "You are a weather bot."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": empty, "tool_calls": [call(0, "get_weather", {"city": "Paris"}, as_text)]},
        {"role": "tool", "tool_call_id": "call00000", "name": "get_weather", "content": "{\"temp_c\": 18}"},
        {"role": "assistant", "content": "It is 18°C in Paris."},
        {"role": "user", "content": "And in Tokyo and Lima?"},
    ]
    two_calls = [
        {"role": "user", "content": "Weather in Tokyo and Lima?"},
        {"role": "assistant", "content": empty, "tool_calls": [
            call(1, "get_weather", {"city": "東京", "unit": "celsius"}, as_text),
            call(2, "get_weather", {"city": "Lima", "days": 2}, as_text)]},
        {"role": "tool", "tool_call_id": "call00001", "name": "get_weather", "content": "{\"temp_c\": 21}"},
        {"role": "tool", "tool_call_id": "call00002", "name": "get_weather", "content": "{\"temp_c\": 16}"},
    ]
    with_content = [
        {"role": "user", "content": "Search for cats."},
        {"role": "assistant", "content": "Let me search.",
         "tool_calls": [call(3, "search", {"query": "cats", "tags": ["pets"]}, as_text)]},
        {"role": "tool", "tool_call_id": "call00003", "name": "search", "content": "Cats are mammals."},
        {"role": "assistant", "content": "Cats are mammals."},
    ]
    return [
        ("tool_call_and_result" + suffix, one_call, [WEATHER_TOOL, SEARCH_TOOL], {}),
        ("parallel_tool_calls" + suffix, two_calls, [WEATHER_TOOL], {}),
        ("tool_call_with_content" + suffix, with_content, [SEARCH_TOOL], {}),
    ]


CASES = [
    ("single_user", [{"role": "user", "content": "Hello!"}], None, {}),
    ("system_and_user", [{"role": "system", "content": "You are a helpful assistant."},
                         {"role": "user", "content": "What is 2+2?"}], None, {}),
    ("multi_turn", [{"role": "system", "content": "Be brief."},
                    {"role": "user", "content": "Hi"},
                    {"role": "assistant", "content": "Hello! How can I help?"},
                    {"role": "user", "content": "Tell me a joke."},
                    {"role": "assistant", "content": "Why did the chicken cross the road?"},
                    {"role": "user", "content": "Why?"}], None, {}),
    ("two_system_prompts", [{"role": "system", "content": "Be brief."},
                            {"role": "system", "content": "Answer in English."},
                            {"role": "user", "content": "你好"}], None, {}),
    ("unicode_and_escapes", [{"role": "user", "content": "  Ünïcödé 🚀 עברית \"quotes\" 'single' back\\slash\n\ttab  "},
                             {"role": "assistant", "content": "Ça va? 😀\r\nline2"},
                             {"role": "user", "content": "{{ not a template }} {% raw %} <think>x</think>"}],
     None, {}),
    ("empty_content", [{"role": "system", "content": ""}, {"role": "user", "content": ""}], None, {}),
    ("assistant_with_reasoning", [{"role": "user", "content": "What is 1+1?"},
                                  {"role": "assistant", "content": "<think>\nSimple sum.\n</think>\n\n2"},
                                  {"role": "user", "content": "And 2+2?"}], None, {}),
    ("content_parts", [{"role": "user", "content": [{"type": "text", "text": "Describe"},
                                                    {"type": "text", "text": " this."}]}], None, {}),
    ("tools_only", [{"role": "user", "content": "What's the weather in Paris?"}], [WEATHER_TOOL, SEARCH_TOOL], {}),
    ("thinking_on", [{"role": "user", "content": "Think about 3*7."}], None, {"thinking": True, "enable_thinking": True}),
    ("thinking_off", [{"role": "user", "content": "Quick: 3*7?"}], None, {"thinking": False, "enable_thinking": False}),
    ("date_string", [{"role": "system", "content": "Today is special."}, {"role": "user", "content": "Date?"}], None,
     {"date_string": "02 Jan 2025"}),
    ("assistant_last", [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}], None, {}),
] + tool_cases(True) + tool_cases(False)


def render_all():
    from transformers.utils.chat_template_utils import render_jinja_template

    OUT.mkdir(parents=True, exist_ok=True)
    for path in sorted(TEMPLATES.glob("*.jinja")):
        source = path.read_text(encoding="utf-8")
        special = SPECIAL_TOKENS[path.name]
        rows = []
        for name, messages, tools, kwargs in CASES:
            for agp in (False, True):
                # Llama 3.2 prints today's date unless given one: keep the reference stable.
                extra = dict(kwargs)
                if path.name.startswith("llama-3.2") and "date_string" not in extra:
                    extra["date_string"] = "26 Jul 2024"
                row = {"template": path.name, "case": name, "messages": messages, "tools": tools,
                       "add_generation_prompt": agp, "kwargs": extra, "special_tokens": special}
                try:
                    rendered, _ = render_jinja_template(
                        conversations=[json.loads(json.dumps(messages))], tools=tools, chat_template=source,
                        add_generation_prompt=agp, **{**special, **extra})
                    row["rendered"] = rendered[0]
                except Exception as e:  # noqa: BLE001 - any failure is the expected outcome
                    row["error"] = f"{type(e).__name__}: {e}"
                rows.append(row)
        out = OUT / (path.stem + ".jsonl")
        with out.open("w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        errors = sum("error" in r for r in rows)
        print(f"{out.relative_to(ROOT)}: {len(rows)} rows, {errors} raise")


def tokenize_deepseek(tokenizer_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    rows = []
    for name, messages, tools, kwargs in CASES:
        if "object_args" in name or name == "content_parts":
            continue  # the DeepSeek-V3 template cannot render these (see deepseek-v3.jsonl)
        for agp in (False, True):
            text = tok.apply_chat_template(messages, tools=tools, add_generation_prompt=agp, tokenize=False, **kwargs)
            ids = tok.apply_chat_template(messages, tools=tools, add_generation_prompt=agp, tokenize=True, **kwargs)
            request = {"messages": messages, "add_generation_prompt": agp}
            if tools is not None:
                request["tools"] = tools
            if kwargs:
                request["chat_template_kwargs"] = kwargs
            rows.append({"case": name, "request": request, "rendered": text, "ids": list(ids)})
    out = OUT / "deepseek-v3-tokenized.jsonl"
    with out.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"{out.relative_to(ROOT)}: {len(rows)} rows")


if __name__ == "__main__":
    render_all()
    found = [d for d in DEEPSEEK_TOKENIZERS if (d / "tokenizer.json").exists()]
    if found:
        tokenize_deepseek(found[0])
    else:
        print("no DeepSeek-V3 tokenizer.json found: token ids not written", file=sys.stderr)
