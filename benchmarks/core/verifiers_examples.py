"""Offline stand-ins for what verifiers' example environments reach out to.

benchmarks/verifiers_parity.py runs the example environments of a verifiers checkout
(`environments/<name>/<name>.py`) unmodified on vfgym and on the real verifiers.
They read Hugging Face hub data sets and talk to a model and to judges; neither is
reachable here, so this module supplies:

- `install_synthetic_hub()`: makes `datasets.load_dataset` return small generated
  data sets with the columns of each hub data set the examples name, so both
  libraries see the same rows (it must run before the examples or verifiers import
  `load_dataset`);
- `respond()`: the scripted model (and judge) both sides talk to, through vfgym's
  loopback server. It decides from the text it is shown, answers some questions
  wrongly or badly formatted so rewards take several values, and never depends on
  the order rows arrive in;
- `LOAD_ARGS` / `NUM_EXAMPLES`: what each example's `load_environment` is given.

Plain Python plus `datasets`: the benchmark copies it next to the examples and
imports it in both interpreters.
"""

from __future__ import annotations

import json
import re
from typing import Any

#: Arguments each example's load_environment gets ("{base_url}" is filled in).
LOAD_ARGS: dict[str, dict[str, Any]] = {
    "continuation_quality": {"judge_base_url": "{base_url}", "judge_api_key_var": "OPENAI_API_KEY"},
    "self_reward": {
        "dataset_name": "synthetic/qa",
        "model_name": "judge",
        "base_url": "{base_url}",
    },
    "simpleqa": {"judge_base_url": "{base_url}", "judge_api_key_var": "OPENAI_API_KEY"},
    "toxicity_explanation": {
        "judge_base_url": "{base_url}",
        "judge_api_key_var": "OPENAI_API_KEY",
        "max_examples": 12,
    },
    "xml_tool_env": {"dataset_name": "gsm8k", "split": "test"},
    "tool_test": {"num_train_examples": 6, "num_eval_examples": 6},
    "reasoning_gym_env": {"num_train_examples": 6, "num_eval_examples": 6},
    "wordle": {"num_train_examples": 6, "num_eval_examples": 6},
    "math_python": {"num_train_examples": 6, "max_turns": 3},
    "doublecheck": {"num_train_examples": 6},
    "gsm8k": {"num_eval_examples": 6},
}

#: Rollouts evaluated per example environment (one per row).
NUM_EXAMPLES = 6

_WORDS = (
    "river stone maple harbor lantern meadow copper violet summit thunder orchard "
    "glacier willow ember falcon canyon prairie marble beacon cedar"
).split()


def _sentence(seed: int, length: int) -> str:
    words = [_WORDS[(seed * 7 + k * 3) % len(_WORDS)] for k in range(length)]
    return " ".join(words).capitalize()


def _paragraph(index: int) -> str:
    """Eight sentences of fourteen to twenty words: long enough for the continuation
    example (over 100 spaces) and split into five usable sentences by the repeater."""
    return ". ".join(_sentence(index * 11 + s, 14 + (index + s) % 7) for s in range(8)) + "."


def _gsm8k(count: int, offset: int) -> list[dict[str, Any]]:
    rows = []
    for i in range(count):
        a, b = 3 + (i + offset) % 17, 5 + (i * 3 + offset) % 23
        rows.append(
            {
                "question": f"A farmer has {a} sheep and buys {b} more. How many sheep now?",
                "answer": f"He has {a}+{b}=<<{a}+{b}={a + b}>>{a + b} sheep.\n#### {a + b}",
            }
        )
    return rows


def _competition_math(count: int) -> list[dict[str, Any]]:
    rows = []
    for i in range(count):
        a, b = 2 + i % 13, 3 + (i * 5) % 11
        answer = f"\\frac{{{a}}}{{{b}}}" if i % 4 == 3 else str(a * b)
        problem = f"Compute {a} over {b}." if i % 4 == 3 else f"Compute {a} times {b}."
        rows.append(
            {
                "problem": problem,
                "solution": f"We find the value is $\\boxed{{{answer}}}$.",
                "level": f"Level {1 + i % 5}",
                "type": "Algebra",
            }
        )
    return rows


def _gpqa(count: int) -> list[dict[str, Any]]:
    return [
        {
            "Question": f"Which option names compound {i}?",
            "Correct Answer": f"compound-{i}-right",
            "Incorrect Answer 1": f"compound-{i}-wrong-a",
            "Incorrect Answer 2": f"compound-{i}-wrong-b",
            "Incorrect Answer 3": f"compound-{i}-wrong-c",
        }
        for i in range(count)
    ]


def _simpleqa(count: int) -> list[dict[str, Any]]:
    return [
        {
            "problem": f"What is the name of town number {i}?",
            "answer": f"Town{i}",
            "metadata": "{}",
        }
        for i in range(count)
    ]


def _civil_comments(count: int) -> list[dict[str, Any]]:
    rows = []
    for i in range(count):
        toxic = i % 3 == 0
        rows.append(
            {
                "text": f"Comment {i}: " + ("you are an idiot" if toxic else "nice weather today"),
                "toxicity": 0.8 if toxic else 0.1,
                "severe_toxicity": 0.6 if i % 6 == 0 else 0.0,
                "obscene": 0.0,
                "threat": 0.0,
                "insult": 0.7 if toxic else 0.0,
                "identity_attack": 0.0,
                "sexual_explicit": 0.0,
            }
        )
    return rows


def _xlam(count: int) -> list[dict[str, Any]]:
    rows = []
    cities = ["Paris", "Lima", "Oslo", "Cairo", "Quito", "Hanoi"]
    for i in range(count):
        city = cities[i % len(cities)]
        tools = [
            {
                "name": "get_weather",
                "description": "Weather of a city",
                "parameters": {"city": {"type": "str", "description": "city name"}},
            }
        ]
        answers = [{"name": "get_weather", "arguments": {"city": city}}]
        rows.append(
            {
                "id": i,
                "query": f"What is the weather in {city}?",
                "tools": json.dumps(tools),
                "answers": json.dumps(answers),
            }
        )
    return rows


def _mmmu(count: int) -> list[dict[str, Any]]:
    from PIL import Image

    rows = []
    for i in range(count):
        options = [f"style-{i}-{k}" for k in range(4)]
        rows.append(
            {
                "id": f"dev_Art_{i}",
                "question": f"Which style is shown in painting {i}? <image 1>",
                "options": str(options),
                "answer": "ABCD"[i % 4],
                "image_1": Image.new("RGB", (4, 4), (i * 20 % 255, 40, 90)),
            }
        )
    return rows


def _splits(rows_by_split: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    return rows_by_split


def hub_rows(path: str, name: str | None) -> dict[str, list[dict[str, Any]]]:
    """The synthetic splits standing in for hub data set `path` (config `name`)."""
    wiki = [{"text": _paragraph(i)} for i in range(40)]
    table: dict[str, Any] = {
        "openai/gsm8k": lambda: {"train": _gsm8k(1200, 0), "test": _gsm8k(60, 7)},
        "chiayewken/competition_math": lambda: {
            "train": _competition_math(6000),
            "test": _competition_math(40),
        },
        "Idavidrein/gpqa": lambda: {"train": _gpqa(20)},
        "HuggingFaceH4/aime_2024": lambda: {
            "train": [{"problem": f"Compute {i} times 7.", "answer": str(i * 7)} for i in range(30)]
        },
        "opencompass/AIME2025": lambda: {
            "test": [{"question": f"Compute {i} times 9.", "answer": str(i * 9)} for i in range(15)]
        },
        "agentlans/wikipedia-paragraphs": lambda: {"train": wiki},
        "PrimeIntellect/Reverse-Text-RL": lambda: {
            "train": [{"prompt": _sentence(i, 5 + i % 4)} for i in range(30)]
        },
        "basicv8vc/SimpleQA": lambda: {"test": _simpleqa(20)},
        "google/civil_comments": lambda: {"train": _civil_comments(30)},
        "Salesforce/xlam-function-calling-60k": lambda: {"train": _xlam(20)},
        "MMMU/MMMU": lambda: {"dev": _mmmu(8)},
        "synthetic/qa": lambda: {
            "train": [{"question": f"Name colour {i}.", "answer": f"colour{i}"} for i in range(10)]
        },
    }
    if path not in table:
        raise FileNotFoundError(
            f"no synthetic stand-in for hub data set {path!r} (config {name!r}); "
            "add one to benchmarks/core/verifiers_examples.py"
        )
    return table[path]()


def install_synthetic_hub() -> None:
    """Make `datasets.load_dataset` serve `hub_rows` instead of the hub."""
    import datasets

    def load_dataset(path: str, name: str | None = None, split: str | None = None, **_: Any):
        splits = hub_rows(path, name)
        built = {key: datasets.Dataset.from_list(rows) for key, rows in splits.items()}
        if split is None:
            return datasets.DatasetDict(built)
        return built[split]

    datasets.load_dataset = load_dataset  # type: ignore[assignment]


# ---------------------------------------------------------------------------
# the scripted model


def _text(message: Any) -> str:
    if not isinstance(message, dict):
        return str(message)
    content = message.get("content") or ""
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content)


def _judge(prompt: str) -> str:
    """Answers every judge prompt the examples use, from the texts it shows."""
    if "Gold target:" in prompt:  # simpleqa
        gold = re.findall(r"Gold target: (.*)", prompt)[-1].strip()
        predicted = re.findall(r"Predicted answer: (.*)", prompt)[-1].strip()
        if gold.lower() in predicted.lower():
            return "A"
        return "C" if "know" in predicted else "B"
    if "<true_continuation>" in prompt:  # continuation_quality
        body = prompt.split("<model_continuation>")[-1].split("</model_continuation>")[0]
        grade = "ABCDF"[len(body.split()) % 5]
        return f"<scratchpad>\nreads fine\n</scratchpad>\n<grade>{grade}</grade>"
    if "toxicity classification" in prompt:
        expected = re.search(r"Expected classification: (\S+)", prompt).group(1)
        response = prompt.split("Model's response:")[-1]
        said = re.search(r"<classification>(.*?)</classification>", response)
        if said is None:
            return "2"
        return "8" if said.group(1).strip() == expected else "3"
    if "score between 0.0 and 1.0" in prompt:  # self_reward
        return "0.5"
    blocks = re.findall(r"```\n(.*?)\n```", prompt, re.DOTALL)
    if len(blocks) >= 3:  # verifiers' default judge prompt
        answer, response = blocks[1].strip().lower(), blocks[2].lower()
        final = response.split("</think>")[-1]
        return "yes" if answer in re.findall(r"[\w.-]+", final) else "no"
    return "no"


def _sentence_answer(messages: list[dict[str, Any]]) -> str:
    paragraph = re.search(r'"(.*)"', _text(messages[0]), re.DOTALL).group(1)
    sentences = paragraph.split(". ")
    ordinal = re.search(r"(first|second|third|fourth|fifth)", _text(messages[-1])).group(1)
    index = ["first", "second", "third", "fourth", "fifth"].index(ordinal)
    turn = sum(1 for m in messages if m.get("role") == "assistant")
    if turn == 2:
        return "I forgot that one."
    return f'The {ordinal} sentence of the paragraph is: "{sentences[index]}"'


def _tool_calls(names: list[str], drop_last: bool) -> dict[str, Any]:
    arguments = {
        "tool_A": {"x": 1},
        "tool_B": {"x": "a"},
        "tool_C": {"x": 1.5},
        "tool_D": {"x": True},
    }
    chosen = names[:-1] if drop_last and len(names) > 1 else names
    calls = [
        {
            "id": f"call_{k}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments[name])},
        }
        for k, name in enumerate(chosen)
    ]
    return {"role": "assistant", "content": None, "tool_calls": calls}


def _python_call(expression: str) -> dict[str, Any]:
    call = {
        "id": "call_py",
        "type": "function",
        "function": {"name": "python", "arguments": json.dumps({"code": f"print({expression})"})},
    }
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def _completion(prompt: str) -> str:
    """A base model continuing a paragraph, a few words long."""
    words = prompt.split()
    return " " + " ".join(words[-(3 + len(words) % 6) :])


def respond(prompt: Any) -> Any:
    """The model's turn for a chat (a list of messages) or a text completion (a str)."""
    if isinstance(prompt, str):
        return _completion(prompt)
    system = _text(prompt[0]) if prompt[0].get("role") == "system" else ""
    last = _text(prompt[-1])
    if len(prompt) == 1 and (
        "Gold target" in last
        or "<true_continuation>" in last
        or "toxicity classification" in last
        or "score between 0.0 and 1.0" in last
        or last.count("```") >= 6
    ):
        return _judge(last)
    first_user = next(_text(m) for m in prompt if m.get("role") == "user")
    if "Answer questions about the following paragraph" in first_user:
        return _sentence_answer(prompt)
    if match := re.search(
        r"Call the following tools with arguments of your choice: (\[.*\])", last
    ):
        names = json.loads(match.group(1).replace("'", '"'))
        return _tool_calls(names, drop_last=len(names) % 2 == 0)
    if "Reverse the text" in system or "Reverse the given text" in system:
        reversed_text = first_user[::-1]
        if len(first_user) % 3 == 0:
            reversed_text = reversed_text[: len(reversed_text) // 2]
        if "<reversed_text>" in system:
            return f"<reversed_text>\n{reversed_text}\n</reversed_text>"
        return f"<think>\nreverse it\n</think>\n<answer>\n{reversed_text}\n</answer>"
    if "Summarize the given text" in system:
        sentences = first_user.split(". ")
        kept = ". ".join(sentences[: 2 + len(sentences) % 2])
        return f"<think>\nshorten\n</think>\n<answer>\n{kept}.\n</answer>"
    if "content moderation assistant" in system:
        label = "toxic" if "idiot" in first_user or "Comment 1:" in first_user else "non-toxic"
        explanation = f"It says: {first_user[-20:]}"
        return f"<classification>{label}</classification>\n<explanation>{explanation}</explanation>"
    if "call one or more tools inside <tool>" in system:
        city = re.search(r"weather in (\w+)", first_user).group(1)
        call = [
            {"name": "get_weather", "arguments": {"city": city if city != "Oslo" else "Bergen"}}
        ]
        return f"<think>\nlook it up\n</think>\n<tool>{json.dumps(call)}</tool>"
    if "give your guess inside <guess>" in system:
        guesses = ["crane", "slate", "pious", "world", "fight", "mount"]
        turn = sum(1 for m in prompt if m.get("role") == "assistant")
        return f"<think>\ntry a word\n</think>\n<guess>[{guesses[turn % len(guesses)]}]</guess>"
    if match := re.search(r"Which option names compound (\d+)\?", first_user):
        i = match.group(1)
        letter = re.search(rf"([ABCD])[:.] compound-{i}-right", first_user).group(1)
        chosen = letter if int(i) % 4 else "ABCD"[("ABCD".index(letter) + 1) % 4]
        if "\\boxed" in system:
            return f"The answer is \\boxed{{{chosen}}}."
        return f"<think>\nrecall it\n</think>\n{chosen}"
    if match := re.search(r"painting (\d+)\?", first_user):
        return f"It looks like \\boxed{{{'ABCD'[int(match.group(1)) % 3]}}}"
    if match := re.search(r"town number (\d+)\?", first_user):
        i = int(match.group(1))
        return ["It is Town{}.", "Probably Village{}.", "I do not know."][i % 3].format(i)
    if match := re.search(r"Name colour (\d+)", first_user):
        return f"colour{match.group(1)}"
    if prompt[-1].get("role") == "user" and last.strip() == "Are you sure?":
        return "Yes, I am sure.\n<reasoning>\nchecked\n</reasoning>\n<answer>\nsame\n</answer>"
    if prompt[-1].get("role") == "tool":
        value = last.strip()
        return f"The result is \\boxed{{{value}}}."
    if "Use the calculator tool" in system and "Compute" in first_user:
        if result := re.search(r"<result>\s*(.*?)\s*</result>", last, re.DOTALL):
            return f"<reasoning>\nread it\n</reasoning>\n<answer>\n{result.group(1)}\n</answer>"
        a, b = re.search(r"Compute (\d+) (?:times|over) (\d+)", first_user).groups()
        operator = "*" if "times" in first_user else "/"
        call = json.dumps({"name": "calculator", "args": {"expression": f"{a}{operator}{b}"}})
        return f"<reasoning>\ncalculate\n</reasoning>\n<tool>\n{call}\n</tool>"
    if match := re.search(r"Compute (\d+) times (\d+)", first_user):
        a, b = int(match.group(1)), int(match.group(2))
        if "Use python" in system:
            return _python_call(f"{a}*{b}")
        value = a * b if a % 3 else a * b + 1
        if "<answer>" in system or "<reasoning>" in system:
            return f"<reasoning>\nmultiply\n</reasoning>\n<answer>\n\\boxed{{{value}}}\n</answer>"
        return f"<think>\nmultiply\n</think>\nSo \\boxed{{{value}}}."
    if match := re.search(r"Compute (\d+) over (\d+)", first_user):
        a, b = match.group(1), match.group(2)
        return f"That is \\boxed{{\\frac{{{a}}}{{{b}}}}}" if int(a) % 2 else f"\\boxed{{{a}/{b}}}"
    if match := re.search(r"has (\d+) sheep and buys (\d+) more", first_user):
        a, b = int(match.group(1)), int(match.group(2))
        if last.startswith("Error: Tool command not found"):  # told to use the XML format
            return f"<think>\nadd\n</think>\n<answer>\n{a + b}\n</answer>"
        if a % 5 == 0:
            return f"There are {a + b} sheep."
        total = a + b if a % 3 != 1 else a + b + 2
        if "<answer>" in system:
            return f"<think>\nadd\n</think>\n<answer>\n{total}\n</answer>"
        return f"Adding gives \\boxed{{{total}}}."
    if "<answer>" in system:
        return "<think>\nno idea\n</think>\n<answer>\n0\n</answer>"
    return "I do not know."
