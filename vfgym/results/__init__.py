"""Evaluation results on disk and how they are read: `jsonl` writes and reads
`results.jsonl` and `metadata.json`, `summary` computes the statistics `vfgym eval`
prints, and `report` renders `vfgym view`'s HTML page. Nothing is imported here."""
