"""Bridges from vfgym environments to RL trainers (each behind its own extra).

`vfgym.integrations.trl`: vfgym environments in TRL's `GRPOTrainer`
(`pip install "vfgym[trl]"`).
"""
