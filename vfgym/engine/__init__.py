"""The rollout engine's machinery: batches, dataset rows, and where user code runs.

`runner` schedules a batch of rollouts (`generate`/`evaluate` call it), `data` turns
what users pass as a dataset into plain rows, `offload` and `limited_pool` keep sync
user code (reward functions, tools) off the event loop, `gcpolicy` keeps the garbage
collector from stalling large batches, and `_async` holds the small async helpers every
layer shares. Nothing is imported here, so a lower layer (rubrics, sandboxes) can use
`vfgym.engine.offload` without loading the batch runner.
"""
