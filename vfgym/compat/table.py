"""Where each module path of verifiers 0.1.7.post0 leads under the `verifiers` alias.

Every module the 0.1.7.post0 wheel contains has an entry: the vfgym module whose
names it shows, names it adds from elsewhere, and names (or the whole module) it
refuses with advice on what to use instead. `tests/compat/test_verifiers_alias.py`
walks the wheel and checks that each of its public names is either given or refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class AliasedModule:
    """One `verifiers.*` module path under the alias.

    `target` is the vfgym module whose attributes it shows (None: only `extra`);
    `extra` maps a name to the "module:attribute" that provides it; `refused` maps a
    name to the advice its error gives; `refuse_all`, when set, is the advice for any
    public name of a module vfgym does not provide at all.
    """

    target: str | None = None
    extra: dict[str, str] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)
    refuse_all: str | None = None
    package: bool = False


_TRAINING = (
    "vfgym does not train models: it produces the rollouts and token-level outputs a "
    "trainer consumes. Evaluate with `vfgym eval` or `env.evaluate(...)`, turn results into "
    "training batches with `vfgym.training.processing.process_env_results`, and train with "
    "your own trainer (prime-rl, TRL, ...)"
)
_SCRIPTS = (
    "the vf-* command-line scripts are replaced by the `vfgym` command: `vfgym eval`, "
    "`vfgym list`, `vfgym play`; install an environment package with pip"
)
_EVAL_UTILS = (
    "run evaluations with `vfgym eval` or `env.evaluate(...)`; results are written by "
    "`vfgym.results` (results.jsonl and metadata.json) and summarised by `vfgym.results.summary`"
)
_REPORT = "HTML reports are written by `vfgym eval --report` (vfgym.results.report)"
_MESSAGES = (
    "messages are plain dicts in vfgym (`vfgym.types.ChatMessage`); "
    "vfgym.inference.messages converts them for the model client"
)
_PROCESSING = "token-level outputs come from `vfgym.training.processing.process_env_results`"

_RL = AliasedModule(refuse_all=_TRAINING)
_RL_PACKAGE = AliasedModule(refuse_all=_TRAINING, package=True)
_SCRIPT = AliasedModule(refuse_all=_SCRIPTS)

#: The module of vfgym that provides each class the 0.1.7 top level loaded lazily.
_CLASSES = {
    "MathRubric": "vfgym.rubrics.math_rubric:MathRubric",
    "PythonEnv": "vfgym.envs.python_env:PythonEnv",
    "TextArenaEnv": "vfgym.envs.textarena_env:TextArenaEnv",
    "ReasoningGymEnv": "vfgym.envs.reasoninggym_env:ReasoningGymEnv",
}
_DATA_UTILS = {
    name: f"vfgym.utils.data_utils:{name}"
    for name in ("extract_boxed_answer", "extract_hash_answer", "load_example_dataset")
}
_LOGGING = {
    name: f"vfgym.utils.logging_utils:{name}"
    for name in ("setup_logging", "print_prompt_completions_sample")
}

_RUN_CONFIG = {
    name: "run settings are the options of `vfgym eval` (--base-url, --model, ...) and "
    "the arguments of `env.evaluate(...)`; results are written by `vfgym.results`"
    for name in ("ClientConfig", "Endpoint", "Endpoints", "EvalConfig", "GenerateMetadata")
}

MODULES: dict[str, AliasedModule] = {
    "verifiers": AliasedModule(
        target="vfgym",
        extra={
            **_CLASSES,
            **_DATA_UTILS,
            **_LOGGING,
            "JsonPrimitive": "vfgym.compat.types:JsonPrimitive",
        },
        refused={
            **_RUN_CONFIG,
            **{
                name: _TRAINING
                for name in (
                    "RLTrainer",
                    "RLConfig",
                    "GRPOTrainer",
                    "GRPOConfig",
                    "grpo_defaults",
                    "lora_defaults",
                    "get_model",
                    "get_model_and_tokenizer",
                )
            },
        },
        package=True,
    ),
    "verifiers.types": AliasedModule(
        target="vfgym.types",
        extra={"JsonPrimitive": "vfgym.compat.types:JsonPrimitive"},
        refused=_RUN_CONFIG,
    ),
    "verifiers.envs": AliasedModule(target="vfgym.envs", extra=dict(_CLASSES), package=True),
    "verifiers.envs.env_group": AliasedModule(target="vfgym.envs.env_group"),
    "verifiers.envs.environment": AliasedModule(target="vfgym.envs.environment"),
    "verifiers.envs.multiturn_env": AliasedModule(target="vfgym.envs.multiturn_env"),
    "verifiers.envs.singleturn_env": AliasedModule(target="vfgym.envs.singleturn_env"),
    "verifiers.envs.stateful_tool_env": AliasedModule(target="vfgym.envs.stateful_tool_env"),
    "verifiers.envs.tool_env": AliasedModule(target="vfgym.envs.tool_env"),
    "verifiers.envs.sandbox_env": AliasedModule(target="vfgym.sandbox.env"),
    "verifiers.envs.python_env": AliasedModule(target="vfgym.envs.python_env"),
    "verifiers.envs.textarena_env": AliasedModule(target="vfgym.envs.textarena_env"),
    "verifiers.envs.reasoninggym_env": AliasedModule(target="vfgym.envs.reasoninggym_env"),
    "verifiers.parsers": AliasedModule(target="vfgym.parsers", package=True),
    "verifiers.parsers.parser": AliasedModule(target="vfgym.parsers.parser"),
    "verifiers.parsers.think_parser": AliasedModule(target="vfgym.parsers.think_parser"),
    "verifiers.parsers.maybe_think_parser": AliasedModule(target="vfgym.parsers.think_parser"),
    "verifiers.parsers.xml_parser": AliasedModule(target="vfgym.parsers.xml_parser"),
    "verifiers.rubrics": AliasedModule(
        target="vfgym.rubrics",
        extra={"MathRubric": _CLASSES["MathRubric"]},
        package=True,
    ),
    "verifiers.rubrics.rubric": AliasedModule(target="vfgym.rubrics.rubric"),
    "verifiers.rubrics.rubric_group": AliasedModule(target="vfgym.rubrics.rubric_group"),
    "verifiers.rubrics.judge_rubric": AliasedModule(target="vfgym.rubrics.judge_rubric"),
    "verifiers.rubrics.tool_rubric": AliasedModule(target="vfgym.rubrics.tool_rubric"),
    "verifiers.rubrics.math_rubric": AliasedModule(target="vfgym.rubrics.math_rubric"),
    "verifiers.rl": _RL_PACKAGE,
    "verifiers.rl.inference": _RL_PACKAGE,
    "verifiers.rl.inference.client": _RL,
    "verifiers.rl.inference.server": _RL,
    "verifiers.rl.trainer": _RL_PACKAGE,
    "verifiers.rl.trainer.config": _RL,
    "verifiers.rl.trainer.orchestrator": _RL,
    "verifiers.rl.trainer.trainer": _RL,
    "verifiers.rl.trainer.utils": _RL,
    "verifiers.scripts": AliasedModule(refuse_all=_SCRIPTS, package=True),
    **{
        f"verifiers.scripts.{name}": _SCRIPT
        for name in ("eval", "init", "install", "prime_rl", "rl", "setup", "train", "tui")
    },
    "verifiers.utils": AliasedModule(target="vfgym.utils", package=True),
    "verifiers.utils.async_utils": AliasedModule(target="vfgym.utils.async_utils"),
    "verifiers.utils.client_utils": AliasedModule(
        refuse_all="make the client yourself: openai.AsyncOpenAI(base_url=..., api_key=...); "
        "`vfgym eval --base-url` does it for a run"
    ),
    "verifiers.utils.data_utils": AliasedModule(target="vfgym.utils.data_utils"),
    "verifiers.utils.env_utils": AliasedModule(target="vfgym.utils.env_utils"),
    "verifiers.utils.eval_utils": AliasedModule(refuse_all=_EVAL_UTILS),
    "verifiers.utils.logging_utils": AliasedModule(target="vfgym.utils.logging_utils"),
    "verifiers.utils.message_utils": AliasedModule(refuse_all=_MESSAGES),
    "verifiers.utils.path_utils": AliasedModule(
        refuse_all="give `vfgym eval --output` (or `results_path=` to evaluate) the directory"
    ),
    "verifiers.utils.processing_utils": AliasedModule(refuse_all=_PROCESSING),
    "verifiers.utils.report_utils": AliasedModule(refuse_all=_REPORT),
    "verifiers.utils.tool_utils": AliasedModule(target="vfgym.utils.tool_utils"),
    "verifiers.utils.tools": AliasedModule(
        refuse_all="the example tools of verifiers (web search, `ask`, a local `python`) "
        "reach the network or run code unsandboxed; write the tool you need as a plain "
        "function for ToolEnv, or use PythonEnv / vfgym.SandboxEnv for Python in a sandbox"
    ),
}

#: The version string `verifiers.__version__` shows: the API the alias follows.
ALIASED_VERSION = "0.1.7.post0"
