"""`load_environment` at the path verifiers 0.1.x kept it (`verifiers.utils.env_utils`)."""

from vfgym.envs.registry import load_environment

__all__ = ["load_environment"]
