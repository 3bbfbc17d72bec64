"""vfgym: sandboxed multi-turn text games and tool environments for LLM RL and evaluation.

`import vfgym as vf` gives the same names an environment written for the
verifiers 0.1.x API expects: environments, parsers, rubrics, the seed's types
and `load_environment`.

Every name is loaded on first use. `import vfgym` itself costs nothing, so the
`vfgym` command starts at once (and a Ctrl-C while it loads lands in its own
handler), and `import vfgym` never pulls in the Docker SDK or registers Gymnasium
ids; `vf.Environment` loads what it needs then.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: Each public name and the module that defines it.
_EXPORTS: dict[str, str] = {
    # the seed's vocabulary (vfgym.types), the public contract
    **dict.fromkeys(
        (
            "ChatCompletion",
            "ChatCompletionMessageToolCall",
            "ChatCompletionToolParam",
            "ChatMessage",
            "Completion",
            "GenerateInputs",
            "GenerateOutputs",
            "Info",
            "Message",
            "MessageType",
            "Messages",
            "ModelResponse",
            "ProcessedOutputs",
            "RewardFunc",
            "RolloutScore",
            "RolloutScores",
            "SamplingArgs",
            "State",
        ),
        "vfgym.types",
    ),
    "RetryPolicy": "vfgym.inference.client",
    "build_prompt": "vfgym.engine.data",
    **dict.fromkeys(
        (
            "EnvGroup",
            "Environment",
            "MultiTurnEnv",
            "SingleTurnEnv",
            "StatefulToolEnv",
            "ToolEnv",
        ),
        "vfgym.envs",
    ),
    **dict.fromkeys(
        (
            "ContextLengthExceeded",
            "EnvironmentImportError",
            "ModelCallError",
            "ResultCallbackError",
            "SubEnvError",
            "VFGymError",
        ),
        "vfgym.errors",
    ),
    **dict.fromkeys(
        (
            "MaybeThinkParser",
            "Parser",
            "ThinkParser",
            "XMLParser",
            "extract_boxed_answer",
            "extract_hash_answer",
        ),
        "vfgym.parsers",
    ),
    "ServerTokenizer": "vfgym.training.processing",
    "ServerTokenizerError": "vfgym.training.processing",
    "process_env_results": "vfgym.training.processing",
    "UnexpectedArgumentError": "vfgym.envs.registry",
    "UnknownEnvironmentError": "vfgym.envs.registry",
    "list_environments": "vfgym.envs.registry",
    "load_environment": "vfgym.envs.registry",
    **dict.fromkeys(("JudgeRubric", "Rubric", "RubricGroup", "ToolRubric"), "vfgym.rubrics"),
    "Tool": "vfgym.tools",
    "ToolTimeoutError": "vfgym.envs.tool_env",
    "convert_func_to_oai_tool": "vfgym.tools",
    **dict.fromkeys(
        (
            "SandboxConfig",
            "DockerSandbox",
            "SandboxPool",
            "ExecResult",
            "SandboxError",
            "SandboxLostError",
            "SandboxPathError",
        ),
        "vfgym.sandbox",
    ),
    "SandboxEnv": "vfgym.sandbox.env",
    # the classes verifiers 0.1.x offered on heavy packages (each needs its extra)
    "MathRubric": "vfgym.rubrics.math_rubric",
    "PythonEnv": "vfgym.envs.python_env",
    "ReasoningGymEnv": "vfgym.envs.reasoninggym_env",
    "TextArenaEnv": "vfgym.envs.textarena_env",
    "install_verifiers_alias": "vfgym.compat",
    "GymEnv": "vfgym.gym",
    "play_episode": "vfgym.gym",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'vfgym' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups find it without coming here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


if TYPE_CHECKING:  # what type checkers and editors see: the same names, eagerly
    from vfgym.compat import install_verifiers_alias
    from vfgym.engine.data import build_prompt
    from vfgym.envs import (
        EnvGroup,
        Environment,
        MultiTurnEnv,
        SingleTurnEnv,
        StatefulToolEnv,
        ToolEnv,
    )
    from vfgym.envs.python_env import PythonEnv
    from vfgym.envs.reasoninggym_env import ReasoningGymEnv
    from vfgym.envs.registry import UnexpectedArgumentError, list_environments, load_environment
    from vfgym.envs.textarena_env import TextArenaEnv
    from vfgym.errors import (
        ContextLengthExceeded,
        EnvironmentImportError,
        ModelCallError,
        ResultCallbackError,
        ServerTokenizerError,
        SubEnvError,
        ToolTimeoutError,
        UnknownEnvironmentError,
        VFGymError,
    )
    from vfgym.gym import GymEnv, play_episode
    from vfgym.inference.client import RetryPolicy
    from vfgym.parsers import (
        MaybeThinkParser,
        Parser,
        ThinkParser,
        XMLParser,
        extract_boxed_answer,
        extract_hash_answer,
    )
    from vfgym.rubrics import JudgeRubric, Rubric, RubricGroup, ToolRubric
    from vfgym.rubrics.math_rubric import MathRubric
    from vfgym.sandbox import (
        DockerSandbox,
        ExecResult,
        SandboxConfig,
        SandboxError,
        SandboxLostError,
        SandboxPathError,
        SandboxPool,
    )
    from vfgym.sandbox.env import SandboxEnv
    from vfgym.tools import Tool, convert_func_to_oai_tool
    from vfgym.training.processing import ServerTokenizer, process_env_results
    from vfgym.types import *  # noqa: F403
