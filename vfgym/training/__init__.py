"""Token-level training data: `process_env_results` turns finished rollouts into ids,
masks and logprobs for a trainer."""
