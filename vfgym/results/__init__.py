"""Evaluation results on disk and what is made from them.

`jsonl` writes a run's `results.jsonl` and `metadata.json` (one line per finished
rollout, appended as it finishes, so a run can resume); `durable` keeps that file strict
JSON lines whatever happens to the process or the disk; `records`, `reader` and `resume`
build, read and continue those lines; `summary` turns them into the table `vfgym eval`
prints, and `report` (reading through `report_input`, which marks what it cannot show)
into the HTML page of `vfgym view`.
"""
