"""Shell files: answer questions about a generated directory tree with a sandboxed bash tool.

Each episode writes a generated tree (source files, logs, CSV data, notes) into
the sandbox's workspace; the model explores it with the `bash` tool (find, grep,
wc, sort, ...) and answers in `<answer>…</answer>`: a number, or a path relative
to the workspace such as `src/core/parser.py`. Questions: how many .log files
contain ERROR, how many lines contain WARN across the logs, which file is largest,
how many lines the files under src/ hold, how many .py files are under src/,
which file holds a given key, which CSV file has the most lines, how many
directories there are. Every question has exactly one right answer (ties are
broken when the tree is generated).

Knobs: `difficulty` ("easy" ~10 files in 4 directories, "medium" ~20 in 8,
"hard" ~40 in 13, deeper), `questions` (a subset of `QUESTIONS`; the order it is
listed in does not change the items), `max_turns` (8),
`max_invalid_moves` (3), `sandbox_config`, `pool_size`. The reference policy runs
the one command that answers the question and reads the answer off its output:
right on every seed.
"""

from __future__ import annotations

import posixpath
import random
import re
from typing import Any

from vfgym.games._base import check_choice
from vfgym.games._tool_task import (
    ToolTask,
    answer_message,
    assistant_turns,
    check_invalid_move_limit,
    check_seed,
    check_turn_limit,
    subset_knob,
    task_text,
    tool_call_message,
    tool_outputs_since_last_turn,
)

from vfgym.sandbox.config import SandboxConfig
from vfgym.sandbox.env import SandboxEnv
from vfgym.sandbox.sandbox import DockerSandbox
from vfgym.types import ChatMessage, Messages, State

GYM_ID = "vfgym/ShellFiles-v0"
KIND = "tool"
NEEDS_SANDBOX = True

DIFFICULTIES = ("easy", "medium", "hard")

SYSTEM_PROMPT = """You answer questions about the files in a directory tree. You have a `bash` \
tool: each call runs a command line in a fresh shell whose working directory is the workspace \
holding the tree (find, grep, wc, sort, head, awk and the usual tools are there).
Explore with the tool, then give only the final answer inside answer tags: a number, or a path \
relative to the workspace, for example: <answer>12</answer> or <answer>src/app/main.py</answer>"""

#: Directories of each difficulty (files go in these and at the top level).
DIRECTORIES = {
    "easy": ("src", "logs", "data", "docs"),
    "medium": ("src", "src/core", "src/utils", "logs", "logs/archive", "data", "docs", "tests"),
    "hard": (
        "src",
        "src/core",
        "src/core/io",
        "src/utils",
        "logs",
        "logs/archive",
        "logs/archive/2023",
        "data",
        "data/raw",
        "data/clean",
        "docs",
        "tests",
        "config",
    ),
}
FILE_COUNTS = {"easy": (8, 12), "medium": (16, 24), "hard": (32, 46)}

WORDS = (
    "alpha bravo cargo delta ember falcon garden harbor island jasper kernel lumen meadow "
    "nickel orbit pepper quartz river saddle timber umber velvet willow xenon yonder zephyr "
    "amber basin cedar dune fjord grove heath inlet juniper knoll lagoon marsh"
).split()
SERVICES = ("api", "worker", "auth", "billing", "search", "gateway")
MESSAGES = (
    "request served",
    "cache refreshed",
    "connection opened",
    "connection closed",
    "job finished",
    "retrying upload",
    "slow response",
    "disk usage high",
    "token expired",
    "queue drained",
)

QUESTIONS = {
    "logs_with_error": "How many .log files in the workspace (in any directory) contain the string "
    "ERROR?",
    "warn_lines": "How many lines in total contain the string WARN, across all .log files in the "
    "workspace?",
    "largest_file": "Which file in the workspace is the largest, in bytes? Answer with its path "
    "relative to the workspace.",
    "lines_under_src": "How many lines do the files under src/ hold in total (all files, in all "
    "subdirectories)?",
    "py_under_src": "How many .py files are there under src/ (in all subdirectories)?",
    "find_key": "Exactly one file in the workspace contains the string {key}. Which file? Answer "
    "with its path relative to the workspace.",
    "longest_csv": "Which .csv file in the workspace has the most lines? Answer with its path "
    "relative to the workspace.",
    "count_dirs": "How many directories are there in the workspace, at any depth (not counting "
    "the workspace itself)?",
}
#: The command the reference policy runs for each question.
COMMANDS = {
    "logs_with_error": "grep -rl --include='*.log' ERROR . | wc -l",
    "warn_lines": "grep -rh --include='*.log' WARN . | wc -l",
    "largest_file": "find . -type f -printf '%s %P\\n' | sort -n | tail -1",
    "lines_under_src": "find src -type f -exec cat {} + | wc -l",
    "py_under_src": "find src -type f -name '*.py' | wc -l",
    "find_key": "grep -rl {key} .",
    "longest_csv": "find . -type f -name '*.csv' -exec wc -l {} + | grep -v ' total$' "
    "| sort -n | tail -1",
    "count_dirs": "find . -mindepth 1 -type d | wc -l",
}
PATH_QUESTIONS = frozenset({"largest_file", "find_key", "longest_csv"})
_KEY = re.compile(r"contains the string (key-[0-9a-f]+)\.")


# ----------------------------------------------------------------------- contents


def _py_file(rng: random.Random) -> str:
    lines: list[str] = []
    for _ in range(rng.randint(1, 5)):
        name = f"{rng.choice(WORDS)}_{rng.randint(1, 99)}"
        lines += [f"def {name}(value):", f"    return value * {rng.randint(2, 9)}"]
        if rng.random() < 0.3:
            lines.append(f"    # TODO: handle {rng.choice(WORDS)}")
        lines.append("")
    return "\n".join(lines) + "\n"


def _log_file(rng: random.Random) -> str:
    error_rate = rng.choice((0.0, 0.0, 0.1, 0.25))
    service = rng.choice(SERVICES)
    lines = []
    for _ in range(rng.randint(3, 25)):
        roll = rng.random()
        if roll < error_rate:
            level = "ERROR"
        elif roll < error_rate + 0.15:
            level = "WARN"
        else:
            level = rng.choice(("INFO", "INFO", "DEBUG"))
        stamp = (
            f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} "
            f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"
        )
        lines.append(f"{stamp} {level} {service}: {rng.choice(MESSAGES)}")
    return "\n".join(lines) + "\n"


def _csv_file(rng: random.Random) -> str:
    lines = ["id,name,amount"]
    for i in range(rng.randint(2, 30)):
        lines.append(f"{i + 1},{rng.choice(WORDS)},{rng.randint(1, 9999)}")
    return "\n".join(lines) + "\n"


def _text_file(rng: random.Random) -> str:
    lines = []
    for _ in range(rng.randint(1, 12)):
        lines.append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12))))
    return "\n".join(lines) + "\n"


def _json_file(rng: random.Random) -> str:
    keys = rng.sample(WORDS, rng.randint(2, 6))
    body = ",\n".join(f'  "{key}": {rng.randint(0, 5000)}' for key in keys)
    return "{\n" + body + "\n}\n"


#: Which kinds of file each directory holds (by its first component).
KINDS_BY_TOP = {
    "src": ("py", "py", "py", "txt"),
    "tests": ("py",),
    "logs": ("log",),
    "data": ("csv", "csv", "json"),
    "docs": ("md", "txt"),
    "config": ("json", "txt"),
    "": ("md", "txt"),
}
MAKERS = {
    "py": _py_file,
    "log": _log_file,
    "csv": _csv_file,
    "json": _json_file,
    "md": _text_file,
    "txt": _text_file,
}


def _file_name(rng: random.Random, directory: str, ext: str) -> str:
    if ext == "log":
        stem = f"{rng.choice(SERVICES)}-{rng.randint(1, 40)}"
    elif directory.startswith("tests"):
        stem = f"test_{rng.choice(WORDS)}"
    else:
        stem = rng.choice(WORDS)
    return f"{directory}/{stem}.{ext}" if directory else f"{stem}.{ext}"


def generate_tree(rng: random.Random, difficulty: str) -> dict[str, str]:
    """A directory tree as {relative path: content}; every file ends with a newline.

    At least two .py files under src/, two .log files and two .csv files, and
    ties for the largest file and the longest CSV file are broken.
    """
    directories = DIRECTORIES[difficulty]
    files: dict[str, str] = {}

    def add(directory: str, ext: str | None = None) -> None:
        top = directory.split("/")[0]
        chosen = ext or rng.choice(KINDS_BY_TOP[top])
        while True:
            path = _file_name(rng, directory, chosen)
            if path not in files:
                break
        files[path] = MAKERS[chosen](rng)

    for directory, ext in (("src", "py"), ("src", "py"), ("logs", "log"), ("logs", "log")):
        add(directory, ext)
    add("data", "csv")
    add("data", "csv")
    for directory in directories:  # no empty directory: each one holds a file
        if not any(path.startswith(directory + "/") for path in files):
            add(directory)
    for _ in range(rng.randint(*FILE_COUNTS[difficulty]) - len(files)):
        add(rng.choice(("", *directories)))
    _break_ties(files)
    return dict(sorted(files.items()))


def _break_ties(files: dict[str, str]) -> None:
    """Make the longest CSV file and the largest file unique (the questions need one answer)."""
    while True:
        csvs = sorted((c.count("\n"), p) for p, c in files.items() if p.endswith(".csv"))
        if csvs[-1][0] != csvs[-2][0]:
            break
        path = csvs[-1][1]
        rows = files[path].count("\n")
        files[path] += f"{rows},{WORDS[rows % len(WORDS)]},{rows * 7}\n"
    while True:
        sizes = sorted((len(c.encode()), p) for p, c in files.items())
        if sizes[-1][0] != sizes[-2][0]:
            break
        path = sizes[-1][1]
        files[path] = files[path][:-1] + " \n"  # one byte more, same lines


def directories_of(files: dict[str, str]) -> set[str]:
    """Every directory that holds a file, at any depth."""
    found = set()
    for path in files:
        parts = path.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            found.add("/".join(parts[:depth]))
    return found


def answer_for(question: str, files: dict[str, str], key: str = "") -> str:
    """The one right answer to `question` about the tree `files`."""
    if question == "logs_with_error":
        return str(sum("ERROR" in c for p, c in files.items() if p.endswith(".log")))
    if question == "warn_lines":
        return str(
            sum(
                line.count("WARN") > 0
                for p, c in files.items()
                if p.endswith(".log")
                for line in c.splitlines()
            )
        )
    if question == "largest_file":
        return max(files, key=lambda p: len(files[p].encode()))
    if question == "lines_under_src":
        return str(sum(c.count("\n") for p, c in files.items() if p.startswith("src/")))
    if question == "py_under_src":
        return str(sum(p.startswith("src/") and p.endswith(".py") for p in files))
    if question == "find_key":
        (holder,) = [p for p, c in files.items() if key in c]
        return holder
    if question == "longest_csv":
        csvs = [p for p in files if p.endswith(".csv")]
        return max(csvs, key=lambda p: files[p].count("\n"))
    if question == "count_dirs":
        return str(len(directories_of(files)))
    raise ValueError(f"unknown question {question!r}; questions are {sorted(QUESTIONS)}")


def generate_item(
    rng: random.Random, difficulty: str, questions: tuple[str, ...]
) -> tuple[str, dict[str, Any], str]:
    """One episode: (question, info with the tree, answer), a pure function of `rng`'s seed."""
    files = generate_tree(rng, difficulty)
    question = rng.choice(questions)
    key = ""
    if question == "find_key":
        key = f"key-{rng.getrandbits(40):010x}"
        holder = rng.choice(sorted(files))
        lines = files[holder].splitlines(keepends=True)
        lines.insert(rng.randint(0, len(lines)), f"{key}\n")
        files[holder] = "".join(lines)
        _break_ties(files)
    text = QUESTIONS[question].format(key=key)
    info = {"question": question, "difficulty": difficulty, "files": files}
    if key:
        info["key"] = key
    return text, info, answer_for(question, files, key)


# ---------------------------------------------------------------------------- answers


#: A whole number as an answer may write it: plain digits, or digits in groups of three
#: separated by commas ("1,024"); "12,34" is not a number written with separators.
_NUMBER = re.compile(r"[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)")


def normalise_answer(text: str, workspace: str = "/workspace") -> str:
    """An answer as compared: quotes and backticks dropped, numbers without separators or
    leading zeros, paths made relative to `workspace` and cleaned (`src//./a.py`)."""
    value = text.strip().strip("`'\"").strip()
    if _NUMBER.fullmatch(value):
        return _plain_number(value)
    prefix = workspace.rstrip("/") + "/"
    if value.startswith(prefix):
        value = value[len(prefix) :]
    if "/" in value:
        value = posixpath.normpath(value)
    return value


def _plain_number(value: str) -> str:
    """A whole number as plain digits: no separators, no leading zeros, no sign on zero.
    Done on the text, since `int()` refuses a number of over 4,300 digits."""
    digits = "".join(str(int(ch)) for ch in value.lstrip("+-") if ch != ",").lstrip("0") or "0"
    return f"-{digits}" if value.startswith("-") and digits != "0" else digits


def answers_match(given: str | None, expected: str, workspace: str = "/workspace") -> bool:
    """True when `given` names the same number or path as `expected` (an absolute path
    may start with the sandbox's `workspace`)."""
    return given is not None and normalise_answer(given, workspace) == normalise_answer(
        expected, workspace
    )


def question_kind(text: str) -> str:
    """Which of `QUESTIONS` the task text asks (what the reference policy reads)."""
    for name, template in QUESTIONS.items():
        head = template.split("{")[0]
        if name == "find_key":
            head = template.split("{key}")[1]
        if head in text:
            return name
    raise ValueError(f"not a shell-files question: {text[:80]!r}")


def read_off(question: str, output: str) -> str:
    """The answer in the output of the reference command for `question`."""
    last = output.strip().splitlines()[-1].strip() if output.strip() else ""
    if question in ("largest_file", "longest_csv"):
        last = last.split(maxsplit=1)[1] if " " in last else last
    return last.removeprefix("./")


# ------------------------------------------------------------------------ environment


class ShellFilesEnv(ToolTask, SandboxEnv):
    """Questions about a generated directory tree, answered with a sandboxed bash tool."""

    game_name = "shell-files"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(python_tool=False, bash_tool=True, **kwargs)

    async def prepare_sandbox(self, sandbox: DockerSandbox, state: State) -> None:
        """Write the tree into the workspace: at setup, and again into a sandbox that
        replaces a crashed one (the question must stay answerable)."""
        for path, content in state["info"]["files"].items():
            await sandbox.write_file(path, content)

    def answers_match(self, given: str | None, expected: str) -> bool:
        return answers_match(given, expected, self.sandbox_config.workspace)

    def reference_policy(self, messages: Messages) -> ChatMessage:
        """Run the question's command, then answer with what it shows."""
        question = question_kind(task_text(messages))
        outputs = tool_outputs_since_last_turn(messages)
        if outputs:
            return answer_message(read_off(question, outputs[-1]))
        command = COMMANDS[question]
        if question == "find_key":
            command = command.format(key=_KEY.search(task_text(messages)).group(1))  # type: ignore[union-attr]
        return tool_call_message("bash", {"command": command}, f"call_{assistant_turns(messages)}")

    def random_reply(self, messages: Messages, rng: random.Random) -> ChatMessage:
        if rng.random() < 0.5:
            return answer_message(str(rng.randint(0, 60)))
        return answer_message(f"{rng.choice(('src', 'logs', 'data'))}/{rng.choice(WORDS)}.txt")


def load_environment(
    num_examples: int = 100,
    seed: int = 0,
    difficulty: str = "medium",
    questions: tuple[str, ...] | list[str] = tuple(QUESTIONS),
    max_turns: int = 8,
    max_invalid_moves: int = 3,
    sandbox_config: SandboxConfig | None = None,
    pool_size: int = 4,
) -> ShellFilesEnv:
    """Build the environment (trees of `difficulty`, questions from `questions`)."""
    check_choice("difficulty", difficulty, DIFFICULTIES)
    # In the catalogue's order, so a subset gives the same items however it is listed.
    given = subset_knob("questions", questions, QUESTIONS)
    chosen = tuple(name for name in QUESTIONS if name in given)
    check_invalid_move_limit(max_invalid_moves)
    check_seed(seed)
    check_turn_limit(max_turns, 2, "one command and the answer")
    make = lambda rng, i: generate_item(rng, difficulty, chosen)  # noqa: E731
    return ShellFilesEnv.from_items(
        make,
        num_examples,
        seed,
        system_prompt=SYSTEM_PROMPT,
        max_turns=max_turns,
        max_invalid_moves=max_invalid_moves,
        sandbox_config=sandbox_config,
        pool_size=pool_size,
    )
