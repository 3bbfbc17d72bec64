"""Evaluation results on disk and what is made from them.

`jsonl` writes and reads a run's `results.jsonl` and `metadata.json` (one line per
finished rollout, appended as it finishes, so a run can resume), `summary` turns
them into the table `vfgym eval` prints, and `report` into the HTML page of
`vfgym view`.
"""
