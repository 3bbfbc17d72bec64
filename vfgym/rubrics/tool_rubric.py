"""ToolRubric: how often the model called each tool, reported as metrics.

The counts have weight 0, so they show up next to the reward without changing
it; add the rubric to a RubricGroup, or give a count a weight, to reward or
punish tool use.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from vfgym.parsers._chat import message_role, tool_call_name, tool_calls
from vfgym.rubrics.reward_call import reward_func_name
from vfgym.rubrics.rubric import Rubric
from vfgym.tools.schema import convert_func_to_oai_tool
from vfgym.types import Messages, State


def tool_name(tool: Any) -> str:
    """The name of a tool given as a function or as an OpenAI tool schema dict."""
    if isinstance(tool, dict):
        function = tool.get("function", tool)
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str) or not name:
            raise ValueError(f"tool schema without a name: {tool!r}")
        return name
    if callable(tool):
        return reward_func_name(tool)
    raise TypeError(f"a tool must be a function or an OpenAI tool schema, got {tool!r}")


def _called_name(entry: Any) -> str | None:
    """The tool a call or record entry names, or None when it names none.

    A call without a function name (absent, None, "" or not a string) still was a
    call, but crediting it to `str(name)` would count it for a tool called "None"
    (or "7"), so it is kept apart from every tool. Malformed calls (no
    "function", a function or call that is not an object) read as nameless
    rather than raise: a metric must not fail on the shape of what the model sent.
    """
    name = entry if isinstance(entry, str) else tool_call_name(entry)
    return name if isinstance(name, str) and name else None


def count_tool_calls(completion: Messages, state: State | None) -> Counter[str | None]:
    """Calls per tool name, with the calls that name no tool under None.

    `state["tools_called"]` (entries with a "name", or plain names) is the
    record when the environment keeps one, plus the calls of a final assistant
    turn left unanswered; otherwise the assistant messages' `tool_calls` are
    counted. The None key lets the total include nameless calls
    while no tool, whatever its name, is credited with them.
    """
    counts: Counter[str | None] = Counter()
    recorded = state.get("tools_called") if isinstance(state, dict) else None
    if isinstance(recorded, list):
        for entry in recorded:
            counts[_called_name(entry)] += 1
        # Calls of a last turn the loop stopped after (the turn limit came first)
        # were asked for but never run, so the record lacks them; verifiers 0.1.x
        # counted every call the model made, and so does this.
        if isinstance(completion, list) and completion:
            last = completion[-1]
            if message_role(last) == "assistant":
                for call in tool_calls(last):
                    counts[_called_name(call)] += 1
        return counts
    if isinstance(completion, str):
        return counts
    for message in completion:
        if message_role(message) == "assistant":
            for call in tool_calls(message):
                counts[_called_name(call)] += 1
    return counts


class ToolCallCounter:
    """Reward function counting the calls to one tool (a class, so it pickles)."""

    def __init__(self, tool: str) -> None:
        self.tool = tool
        self.__name__ = f"{tool}_calls"

    def __call__(self, completion: Messages, state: State) -> float:
        """Number of calls to this tool in the rollout."""
        return float(count_tool_calls(completion, state)[self.tool])


TOTAL_METRIC = "total_tool_calls"


def _check_tool_names(names: list[str]) -> None:
    """Refuse names whose `<tool>_calls` metrics would collide, saying which tool to rename.

    Left to `add_reward_func`, the clash reads as a reward function's duplicate
    `__name__`, which a ToolRubric user never chose.
    """
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ValueError(
                f"ToolRubric got two tools named {name!r}; each tool's calls are counted "
                "by name, so list it once"
            )
        seen.add(name)
        if f"{name}_calls" == TOTAL_METRIC:
            raise ValueError(
                f"a tool named {name!r} would report its calls as {TOTAL_METRIC!r}, the "
                "metric of all tool calls; rename the tool"
            )


class ToolRubric(Rubric):
    """Metrics `total_tool_calls` and `<tool>_calls` for each tool, weight 0."""

    def __init__(self, tools: list[Callable[..., Any] | dict[str, Any]] | None = None) -> None:
        self.tools = list(tools or [])
        self.tool_names = [tool_name(t) for t in self.tools]
        _check_tool_names(self.tool_names)
        counters = [ToolCallCounter(name) for name in self.tool_names]
        super().__init__(
            funcs=[self.total_tool_calls, *counters],
            weights=[0.0] * (1 + len(counters)),
        )

    @property
    def oai_tools(self) -> list[Any]:
        """The tools' OpenAI schemas, built when asked for: counting calls needs only
        the names, and a tool whose parameters an environment fills in itself
        (PythonEnv's `python` takes the rollout's sandbox) has no schema of its own."""
        return [t if isinstance(t, dict) else convert_func_to_oai_tool(t) for t in self.tools]

    def total_tool_calls(self, completion: Messages, state: State) -> float:
        """Number of tool calls in the rollout, whatever the tool."""
        return float(sum(count_tool_calls(completion, state).values()))
