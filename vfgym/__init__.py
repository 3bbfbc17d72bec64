"""vfgym: sandboxed multi-turn text games and tool environments for LLM RL and evaluation.

`import vfgym as vf` gives the same names an environment written for the
verifiers 0.1.x API expects: environments, parsers, rubrics, the seed's types
and `load_environment`.
"""

from vfgym.client import RetryPolicy
from vfgym.data import build_prompt
from vfgym.envs import (
    EnvGroup,
    Environment,
    MultiTurnEnv,
    SingleTurnEnv,
    StatefulToolEnv,
    ToolEnv,
)
from vfgym.errors import ContextLengthExceeded, ModelCallError, VFGymError
from vfgym.parsers import (
    MaybeThinkParser,
    Parser,
    ThinkParser,
    XMLParser,
    extract_boxed_answer,
    extract_hash_answer,
)
from vfgym.processing import ServerTokenizer, process_env_results
from vfgym.registry import UnknownEnvironmentError, list_environments, load_environment
from vfgym.rubrics import JudgeRubric, Rubric, RubricGroup, ToolRubric
from vfgym.tools import Tool, convert_func_to_oai_tool
from vfgym.types import *  # noqa: F403  (the seed's vocabulary is the public contract)
from vfgym.types import __all__ as _types_all

__version__ = "0.1.0"

# Loaded on first use: the sandbox names pull in the Docker SDK, and the Gym
# adapter registers Gymnasium ids, neither of which `import vfgym` should do.
_LAZY = {
    "SandboxConfig": "vfgym.sandbox",
    "DockerSandbox": "vfgym.sandbox",
    "SandboxPool": "vfgym.sandbox",
    "ExecResult": "vfgym.sandbox",
    "SandboxError": "vfgym.sandbox",
    "SandboxLostError": "vfgym.sandbox",
    "SandboxPathError": "vfgym.sandbox",
    "SandboxEnv": "vfgym.sandbox.env",
    "GymEnv": "vfgym.gym",
    "play_episode": "vfgym.gym",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'vfgym' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = [
    *_types_all,
    *_LAZY,
    "ContextLengthExceeded",
    "EnvGroup",
    "Environment",
    "JudgeRubric",
    "MaybeThinkParser",
    "ModelCallError",
    "MultiTurnEnv",
    "Parser",
    "RetryPolicy",
    "Rubric",
    "RubricGroup",
    "ServerTokenizer",
    "SingleTurnEnv",
    "StatefulToolEnv",
    "ThinkParser",
    "Tool",
    "ToolEnv",
    "ToolRubric",
    "UnknownEnvironmentError",
    "VFGymError",
    "XMLParser",
    "build_prompt",
    "convert_func_to_oai_tool",
    "extract_boxed_answer",
    "extract_hash_answer",
    "list_environments",
    "load_environment",
    "process_env_results",
]
