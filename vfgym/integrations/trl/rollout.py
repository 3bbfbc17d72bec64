"""Any vfgym environment as TRL's `rollout_func`: vfgym's own multi-turn loop, token-exact.

`GRPOTrainer(rollout_func=...)` hands the function each batch of prompts (every prompt
repeated `num_generations` times in a row) and trains on the ids it returns. Here each
group runs through the environment's `generate` (its turns, tools, sandbox and rubric)
against a model server that samples from the trainer's current weights, and the
result becomes the trainer's columns:

- ``prompt_ids``, ``completion_ids``, ``logprobs``: the ids as the model sampled them,
  read from the server's answers (never re-tokenized text), and their logprobs;
- ``env_mask``: 1 on ids the model sampled, 0 on environment and tool ids (and on
  the chat template's glue between turns, which the model never sampled);
- ``vfgym_reward``: the rubric's reward per rollout, which `rubric_reward` (the
  reward function to pass as `reward_funcs`) hands back to the trainer.

Each turn's ids are checked against the prompt ids the server was shown for it: a
rollout whose sequence is not what the model saw is kept out of training like an
errored one (or raises `TokenMismatchError` with `on_mismatch="raise"`). In chat mode
the server renders the conversation's text again each turn, so a turn whose sampled
ids do not re-tokenize to themselves (common for an untrained model's noise, rare for
a trained model's text) mismatches; a token-exact client that sends the kept ids as
`/v1/completions` prompts removes that cause.

A rollout that errored for infrastructure reasons (the model server failed, a
sandbox died) is not a wrong answer: its whole group runs again, up to
`max_retries` times. A group that still errors is kept out of training: its reward
is None (TRL leaves it out of the group baseline and gives it no advantage) and its
`env_mask` is all 0, so no token of it reaches the loss.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Sequence
from typing import Any

from openai import AsyncOpenAI

from vfgym.errors import TokenMismatchError
from vfgym.integrations.trl.policy_server import PolicyServer
from vfgym.integrations.trl.versions import check_trl_version
from vfgym.training.response_ids import response_field
from vfgym.types import SamplingArgs

logger = logging.getLogger(__name__)

#: The extra column carrying the rubric's rewards to `rubric_reward`.
REWARD_KEY = "vfgym_reward"


#: The key the first message of each dataset prompt carries: the row's index here.
#: The trainer hands rollout_func only the prompts, and games ask the same question
#: of many rows (a different hidden number each), so the prompt text cannot say
#: which row it came from. Chat templates read only the keys they know.
ROW_KEY = "vfgym_row"


def row_of(prompt: Any) -> int | None:
    """The dataset row a prompt the trainer passed back came from, or None."""
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], dict):
        row = prompt[0].get(ROW_KEY)
        return row if isinstance(row, int) and not isinstance(row, bool) else None
    return None


class VFGymRollout:
    """`rollout_func` for TRL's `GRPOTrainer`, running `env`'s rollouts (see module doc).

    env: any vfgym environment (a game, a tool task, a sandboxed task, an EnvGroup).
    sampling_args: overrides per model turn; by default each turn may use up to the
        trainer's `max_completion_length` tokens at its `temperature` and `top_p`.
    max_retries: how many times a group with an errored rollout runs again.
    max_concurrent: rollouts in flight at once (-1: no limit).
    seed: seeds the sampling of the built-in policy server.
    server_factory: builds the server that samples for a trainer; by default a
        `PolicyServer` on the trainer's live model (CPU or one GPU, no vLLM).
    on_mismatch: what to do with a rollout whose ids are not what the model was shown
        at a later turn (`check_turns`): "drop" keeps it out of training (reward None,
        env_mask all 0) and logs it, "raise" raises `TokenMismatchError`.
    """

    def __init__(
        self,
        env: Any,
        *,
        sampling_args: SamplingArgs | None = None,
        max_retries: int = 2,
        max_concurrent: int = -1,
        seed: int = 0,
        server_factory: Callable[[Any], PolicyServer] | None = None,
        on_mismatch: str = "drop",
    ) -> None:
        check_trl_version()
        if on_mismatch not in ("drop", "raise"):
            raise ValueError(f"on_mismatch must be 'drop' or 'raise', got {on_mismatch!r}")
        self.on_mismatch = on_mismatch
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ValueError(f"max_retries must be a whole number >= 0, got {max_retries!r}")
        self.env = env
        self.sampling_args = dict(sampling_args or {})
        self.max_retries = max_retries
        self.max_concurrent = max_concurrent
        self.seed = seed
        self.server_factory = server_factory or self._local_server
        self._rows: list[dict[str, Any]] = []
        #: one record per call: the rollouts' vfgym outputs and what was returned
        self.history: list[dict[str, Any]] = []

    # -- the dataset the trainer samples prompts from --------------------------------

    def dataset(self, n: int | None = -1, seed: int | None = None) -> Any:
        """The environment's rows as a `datasets.Dataset` with the "prompt" column TRL
        reads; the rest of each row (answer, info, task) stays here, found again by
        its prompt when the trainer hands the prompt back."""
        from datasets import Dataset

        rows = self.env.get_dataset(n=n, seed=seed)
        if not rows:
            raise ValueError("the environment has no dataset rows to train on")
        if self.env.message_type != "chat":
            raise ValueError(
                "rollout_func trains chat environments (message_type='chat'); this one is "
                f"{self.env.message_type!r}"
            )
        self._rows = []
        prompts = []
        for index, row in enumerate(rows):
            self._rows.append(
                {
                    "prompt": row["prompt"],
                    "answer": row.get("answer", ""),
                    "info": row.get("info") or {},
                    "task": row.get("task") or "default",
                }
            )
            first, *rest = row["prompt"]
            prompts.append({"prompt": [{**first, ROW_KEY: index}, *rest]})
        return Dataset.from_list(prompts)

    # -- the rollout function ----------------------------------------------------------

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        """Run one group of rollouts per run of `num_generations` equal prompts."""
        size = trainer.num_generations if trainer.model.training else trainer.num_generations_eval
        groups = self._groups(prompts, size)
        settings = self._sampling(trainer)
        with self.server_factory(trainer) as server:
            results = self._run_groups(groups, size, server, settings)
        tokenizer = trainer.processing_class
        out = self._columns(results, tokenizer)
        self.history.append({"results": results, "returned": copy.deepcopy(out)})
        return out

    def _groups(self, prompts: list[Any], size: int) -> list[dict[str, Any]]:
        if not prompts or len(prompts) % size:
            raise ValueError(
                f"the trainer passed {len(prompts)} prompts, not whole groups of "
                f"num_generations={size}"
            )
        groups = []
        for start in range(0, len(prompts), size):
            rows = {row_of(p) for p in prompts[start : start + size]}
            row = rows.pop() if len(rows) == 1 else None
            if row is None or not 0 <= row < len(self._rows):
                raise ValueError(
                    f"prompts {start}..{start + size - 1} are not one row of this rollout's "
                    f"dataset repeated num_generations={size} times; build train_dataset with "
                    "rollout.dataset() (its prompts carry their row) and keep GRPO groups whole"
                )
            groups.append(self._rows[row])
        return groups

    def _sampling(self, trainer: Any) -> SamplingArgs:
        args = trainer.args
        settings: dict[str, Any] = {
            "max_tokens": args.max_completion_length,
            "temperature": args.temperature,
            "top_p": args.top_p,
            "logprobs": True,
        }
        settings.update(self.sampling_args)
        extra = dict(settings.get("extra_body") or {})
        extra["return_token_ids"] = True  # the ids come from the server, never from text
        settings["extra_body"] = extra
        return settings

    def _local_server(self, trainer: Any) -> PolicyServer:
        model = trainer.accelerator.unwrap_model(trainer.model)
        return PolicyServer(
            model, trainer.processing_class, seed=self.seed + trainer.state.global_step
        )

    def _run_groups(
        self, groups: list[dict[str, Any]], size: int, server: PolicyServer, settings: SamplingArgs
    ) -> list[dict[str, Any]]:
        """Run every group; run again the groups with an errored rollout."""
        results: list[dict[str, Any] | None] = [None] * len(groups)
        pending = list(range(len(groups)))
        for attempt in range(self.max_retries + 1):
            outputs = self._generate([groups[g] for g in pending], size, server, settings)
            still = []
            for slot, g in enumerate(pending):
                rollouts = [_pick(outputs, slot * size + k) for k in range(size)]
                results[g] = {"rollouts": rollouts, "attempts": attempt + 1}
                if any(r["state"].get("error") for r in rollouts):
                    still.append(g)
            if still:
                logger.warning(
                    "%d group(s) had an errored rollout (attempt %d of %d)",
                    len(still),
                    attempt + 1,
                    self.max_retries + 1,
                )
            pending = still
            if not pending:
                break
        for g in pending:
            entry = results[g]
            assert entry is not None
            entry["errored"] = True
        return [entry for entry in results if entry is not None]

    def _generate(
        self, groups: list[dict[str, Any]], size: int, server: PolicyServer, settings: SamplingArgs
    ) -> Any:
        inputs: dict[str, list[Any]] = {
            "prompt": [], "answer": [], "info": [], "task": [], "example_id": []
        }  # fmt: skip
        for number, row in enumerate(groups):
            for _ in range(size):
                inputs["prompt"].append(row["prompt"])
                inputs["answer"].append(row["answer"])
                inputs["info"].append(row["info"])
                inputs["task"].append(row["task"])
                inputs["example_id"].append(number)
        client = AsyncOpenAI(base_url=server.base_url, api_key="vfgym", max_retries=0)
        return self.env.generate_sync(
            inputs,
            client,
            server.model_name,
            settings,
            rollouts_per_example=size,
            max_concurrent=self.max_concurrent,
        )

    def _columns(self, results: list[dict[str, Any]], tokenizer: Any) -> dict[str, list[Any]]:
        rollouts = [r for group in results for r in group["rollouts"]]
        errored = [bool(group.get("errored")) for group in results for _ in group["rollouts"]]
        processed = self.env.process_env_results(
            [r["prompt"] for r in rollouts],
            [r["completion"] for r in rollouts],
            [r["state"] for r in rollouts],
            [r["reward"] for r in rollouts],
            tokenizer,
            mask_env_responses=True,
        )
        # `process_env_results` gives one row per exact sample: a rollout whose history
        # the server re-rendered differently (chat mode) comes back as several rows. TRL
        # takes one sequence per prompt, so such a rollout is kept out of training.
        rows_of: list[list[int]] = [[] for _ in rollouts]
        for row, k in enumerate(processed.rollout_index):
            rows_of[k].append(row)
        rewards: list[float | None] = []
        dropped = list(errored)
        for k, rollout in enumerate(rollouts):
            if errored[k]:
                rewards.append(None)
                continue
            rows = rows_of[k]
            try:
                if len(rows) != 1:
                    raise TokenMismatchError(
                        f"the rollout's token history splits into {len(rows)} exact samples "
                        "(the server saw a context other than the sequence kept so far); "
                        "one sequence per prompt is what the trainer takes"
                    )
                check_turns(
                    processed.prompt_ids[rows[0]],
                    processed.completion_ids[rows[0]],
                    processed.completion_mask[rows[0]],
                    rollout["state"].get("responses") or [],
                )
            except TokenMismatchError as exc:
                if self.on_mismatch == "raise":
                    raise
                logger.warning("rollout %d kept out of training: %s", k, exc)
                dropped[k] = True
                rewards.append(None)
                continue
            rewards.append(float(rollout["reward"]))
        first = [rows[0] for rows in rows_of]  # every rollout gives at least one row
        env_mask = [
            [0] * len(processed.completion_mask[row])
            if dropped[k]
            else list(processed.completion_mask[row])
            for k, row in enumerate(first)
        ]
        return {
            "prompt_ids": [processed.prompt_ids[row] for row in first],
            "completion_ids": [processed.completion_ids[row] for row in first],
            "logprobs": [processed.completion_logprobs[row] for row in first],
            "env_mask": env_mask,
            REWARD_KEY: rewards,
        }


def _pick(outputs: Any, k: int) -> dict[str, Any]:
    return {
        "prompt": outputs.prompt[k],
        "completion": outputs.completion[k],
        "state": outputs.state[k],
        "reward": outputs.reward[k],
    }


def check_turns(
    prompt_ids: Sequence[int],
    completion_ids: Sequence[int],
    env_mask: Sequence[int],
    responses: Sequence[Any],
) -> None:
    """Check that each model turn was sampled after exactly the ids before it here.

    The server returned, for every turn, the prompt ids it generated after
    (`prompt_token_ids`); the assembled sequence up to that turn's first sampled id
    must be those ids, or the trainer would score the turn in a context the model never
    saw. Raises `TokenMismatchError` naming the turn.
    """
    sampled = [i for i, m in enumerate(env_mask) if m]
    offset = 0
    sequence = [*prompt_ids, *completion_ids]
    for turn, response in enumerate(responses):
        choices = response_field(response, "choices") or []
        ids = response_field(choices[0], "token_ids") if choices else None
        shown = response_field(response, "prompt_token_ids")
        if shown is None and choices:
            shown = response_field(choices[0], "prompt_token_ids")
        if not ids or shown is None:
            continue
        if offset >= len(sampled):
            break  # the turn was cut off by a sequence-length limit
        start = len(prompt_ids) + sampled[offset]
        if list(shown) != sequence[:start]:
            raise TokenMismatchError(
                f"model turn {turn} was generated after {len(shown)} prompt ids, but the "
                f"assembled rollout has {start} different ids before it: the chat template "
                "renders earlier turns differently once more follow, so this rollout cannot "
                "be trained on token-exactly; use a template that renders each turn the same "
                "whatever follows it"
            )
        offset += len(ids)


def rubric_reward(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
    """The reward function to pass to `GRPOTrainer(reward_funcs=...)` with a vfgym
    rollout: the rubric's rewards, which the rollout put in the `vfgym_reward` column
    (None for a rollout that errored, which TRL leaves out of training)."""
    rewards = kwargs.get(REWARD_KEY)
    if rewards is None:
        raise KeyError(
            f"no {REWARD_KEY!r} column reached the reward function: use rubric_reward "
            "together with rollout_func=vfgym.integrations.trl.rollout_func(env)"
        )
    return list(rewards)


def rollout_func(env: Any, **options: Any) -> VFGymRollout:
    """`env` as a `rollout_func` for TRL's `GRPOTrainer`, in one call.

    Build the trainer's dataset with `.dataset()` and pass `rubric_reward` as its
    reward function::

        rollout = rollout_func(env)
        trainer = GRPOTrainer(model, reward_funcs=rubric_reward, args=config,
                              train_dataset=rollout.dataset(), rollout_func=rollout)

    `options` are `VFGymRollout`'s (sampling_args, max_retries, max_concurrent, seed).
    """
    return VFGymRollout(env, **options)
