"""`vfgym.integrations.trl.rollout`: real GRPO steps of TRL's trainer on CPU, on a game
and on a tool task, with the tiny local model; what reaches the loss is checked
against the ids, masks and rewards of vfgym's own rollouts."""

from __future__ import annotations

import copy
import random
from pathlib import Path
from typing import Any

import pytest
from tiny_policy import completion_logprobs, warmed_policy

import vfgym as vf

GROUP = 4


def game_env() -> Any:
    return vf.load_environment(
        "guess-the-number", num_examples=4, low=1, high=5, max_invalid_moves=2, max_turns=4
    )


def game_policy(model_dir: Path) -> tuple[Any, Any]:
    """The tiny model warmed up to answer a guess-the-number prompt, or a hint, with a
    tagged guess (a different one each time, so some games are won and some lost)."""
    rng = random.Random(0)
    prompt = game_env().get_dataset()[0]["prompt"]
    examples = []
    for _ in range(6):
        first, second = rng.randint(1, 5), rng.randint(1, 5)
        examples.append((prompt, {"role": "assistant", "content": f"<move>{first}</move>"}))
        later = [
            *prompt,
            {"role": "assistant", "content": f"<move>{first}</move>"},
            {"role": "user", "content": f"{first} is too low. Guess again."},
        ]
        examples.append((later, {"role": "assistant", "content": f"<move>{second}</move>"}))
    return warmed_policy(model_dir, examples, steps=80, lr=5e-3)


class LossInputs:
    """Subclasses a trainer class so every `compute_loss` call's inputs are kept,
    with the model's logprobs of the batch under the weights of that moment."""

    def __init__(self, rollout: Any) -> None:
        self.calls: list[dict[str, Any]] = []
        self.rollout = rollout

    def trainer_class(self) -> type:
        import torch
        from trl import GRPOTrainer

        calls = self.calls
        rollout = self.rollout

        class Recording(GRPOTrainer):  # type: ignore[misc]
            def compute_loss(self, model: Any, inputs: Any, *args: Any, **kwargs: Any) -> Any:
                kept = {
                    k: v.detach().clone() if torch.is_tensor(v) else v for k, v in inputs.items()
                }
                # The logprobs the current weights give the ids just sampled, before
                # this step's update: equal to the sampler's when sampling used them.
                returned = rollout.history[-1]["returned"]
                now = [
                    completion_logprobs(model, p, c)
                    for p, c in zip(returned["prompt_ids"], returned["completion_ids"], strict=True)
                ]
                calls.append({"step": self.state.global_step, "inputs": kept, "logprobs": now})
                return super().compute_loss(model, inputs, *args, **kwargs)

        return Recording


def unpadded(inputs: dict[str, Any], k: int) -> tuple[list[int], list[int], list[int]]:
    """Row k's prompt ids, completion ids and env mask as the loss sees them (padding cut)."""
    prompt = inputs["prompt_ids"][k][inputs["prompt_mask"][k].bool()].tolist()
    keep = inputs["completion_mask"][k].bool()
    completion = inputs["completion_ids"][k][keep].tolist()
    mask = inputs["tool_mask"][k][keep].tolist()
    return prompt, completion, mask


def group_advantages(rewards: list[float]) -> list[float]:
    """GRPO's advantages as TRL computes them by default: per group, (r - mean) / (std + 1e-4)."""
    import torch

    grouped = torch.tensor(rewards).view(-1, GROUP)
    mean = grouped.mean(dim=1, keepdim=True)
    std = grouped.std(dim=1, keepdim=True)
    return ((grouped - mean) / (std + 1e-4)).view(-1).tolist()


def run_grpo(model: Any, tokenizer: Any, env: Any, tmp_path: Path, steps: int = 2) -> Any:
    from trl import GRPOConfig

    from vfgym.integrations.trl import rollout_func, rubric_reward

    rollout = rollout_func(env, seed=0, on_mismatch="raise")
    recorder = LossInputs(rollout)
    config = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=2 * GROUP,
        num_generations=GROUP,
        max_steps=steps,
        learning_rate=5e-3,
        max_completion_length=16,
        beta=0.0,
        use_cpu=True,
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        seed=0,
        dataloader_num_workers=0,
    )
    trainer = recorder.trainer_class()(
        model=model,
        processing_class=tokenizer,
        reward_funcs=rubric_reward,
        args=config,
        train_dataset=rollout.dataset(),
        rollout_func=rollout,
    )
    trainer.train()
    return rollout, recorder, trainer


def served_ids(rollout: dict[str, Any]) -> tuple[list[int], list[int]]:
    """The prompt ids the server was shown first and every id it sampled, turn by turn,
    as the responses in the rollout's State hold them."""
    responses = rollout["state"]["responses"]
    sampled = [t for response in responses for t in response.choices[0].token_ids]
    return list(responses[0].prompt_token_ids), sampled


def check_loss_inputs(rollout: Any, recorder: LossInputs, tokenizer: Any) -> None:
    """What reached the loss at each step is exactly that step's vfgym rollouts: each
    row of the loss's batch is one rollout (TRL shuffles their order), its ids with
    mask 1 are the ids the server sampled, its ids with mask 0 are the environment's
    messages, and its advantage is GRPO's of the rubric's rewards."""
    assert len(rollout.history) == len(recorder.calls)
    for record, call in zip(rollout.history, recorder.calls, strict=True):
        inputs = call["inputs"]
        rollouts = [r for group in record["results"] for r in group["rollouts"]]
        advantages = group_advantages([float(r["reward"]) for r in rollouts])
        assert len(inputs["prompt_ids"]) == len(rollouts)
        unmatched = set(range(len(rollouts)))
        for k in range(len(rollouts)):
            prompt, completion, mask = unpadded(inputs, k)
            sampled = [t for t, m in zip(completion, mask, strict=True) if m == 1]
            returned = record["returned"]["completion_ids"]
            matches = [
                j
                for j in unmatched
                if served_ids(rollouts[j]) == (prompt, sampled) and returned[j] == completion
            ]
            assert matches, f"loss row {k} is no rollout's ids (sampled with mask 1)"
            # Two groups can play the same game alike; such rows are told apart by nothing
            # but their group, so the row may be either (each with its group's advantage).
            advantage = float(inputs["advantages"][k])
            fitting = [j for j in matches if advantage == pytest.approx(advantages[j], abs=1e-4)]
            assert fitting, f"loss row {k}'s advantage {advantage} is none of {matches}'"
            j = fitting[0]
            unmatched.discard(j)
            # mask 0 exactly on what the environment said (and the template's glue)
            env_text = tokenizer.decode(
                [t for t, m in zip(completion, mask, strict=True) if m == 0]
            )
            env_messages = [
                m["content"] for m in rollouts[j]["completion"] if m["role"] != "assistant"
            ]
            assert env_messages, "every rollout here has environment turns"
            for text in env_messages:
                assert text in env_text
            model_text = tokenizer.decode(sampled)
            for text in env_messages:
                assert text not in model_text
        assert not unmatched


def test_grpo_trains_on_a_game_with_vfgyms_ids_masks_and_rewards(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    import torch

    model, tokenizer = game_policy(tiny_model_dir)
    initial = {name: p.detach().clone() for name, p in model.named_parameters()}
    env = game_env()
    rollout, recorder, _ = run_grpo(model, tokenizer, env, tmp_path)

    check_loss_inputs(rollout, recorder, tokenizer)
    rewards = [float(r["reward"]) for g in rollout.history[0]["results"] for r in g["rollouts"]]
    texts = [
        [m["content"] for m in r["completion"]]
        for g in rollout.history[0]["results"]
        for r in g["rollouts"]
    ]
    assert len(set(rewards)) > 1, f"the warmed-up policy's rewards should differ: {rewards} {texts}"
    changed = [n for n, p in model.named_parameters() if not torch.equal(p, initial[n])]
    assert changed, "two GRPO steps left every weight as it was"
    rounding = check_on_policy(rollout, recorder)
    # ... and not from the weights the run started with
    before = copy.deepcopy(model)
    with torch.no_grad():
        for name, parameter in before.named_parameters():
            parameter.copy_(initial[name])
    second = rollout.history[1]["returned"]
    gaps = []
    for k, (p, c) in enumerate(zip(second["prompt_ids"], second["completion_ids"], strict=True)):
        sampled = model_logprobs(second, k, second["logprobs"][k])
        old = model_logprobs(second, k, completion_logprobs(before, p, c))
        gaps += [abs(a - b) for a, b in zip(sampled, old, strict=True)]
    moved = sum(gaps) / len(gaps)
    assert moved > 10 * rounding, (
        f"step 2 sampled as the initial weights would have (mean gap {moved}, rounding {rounding})"
    )


def model_logprobs(returned: dict[str, Any], k: int, logprobs: list[float]) -> list[float]:
    """Rollout k's logprobs at the ids the model sampled (env_mask 1)."""
    mask = returned["env_mask"][k]
    return [lp for lp, m in zip(logprobs, mask, strict=True) if m == 1]


def check_on_policy(rollout: Any, recorder: LossInputs) -> float:
    """Each step's rollouts came from the weights of that step: the sampler's logprobs
    are the ones the model gives the same ids at that moment (up to float rounding:
    the sampler decodes with a KV cache, the check runs one whole forward pass).
    Returns the mean gap."""
    gaps = []
    for record, call in zip(rollout.history, recorder.calls, strict=True):
        returned = record["returned"]
        for k in range(len(returned["completion_ids"])):
            sampled = model_logprobs(returned, k, returned["logprobs"][k])
            now = model_logprobs(returned, k, call["logprobs"][k])
            gaps += [abs(a - b) for a, b in zip(sampled, now, strict=True)]
    mean = sum(gaps) / len(gaps)
    assert mean < 2e-3, f"the sampler's logprobs are not the current weights' (mean gap {mean})"
    return mean
