"""Reaching Ray: the install hint when it is missing, and joining or starting a cluster."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from vfgym.errors import RayUnavailableError

INSTALL_HINT = "install it with `pip install 'vfgym[ray]'` (or `pip install ray`)"


def require_ray() -> ModuleType:
    """The `ray` module, or an error that says how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise RayUnavailableError(
            f"running on a Ray cluster needs the ray package, which is not installed; "
            f"{INSTALL_HINT}"
        ) from exc
    return ray


def check_address(address: Any) -> str:
    """Refuse an address that cannot name a cluster, with the forms that can."""
    if not isinstance(address, str) or not address.strip():
        raise ValueError(
            f"ray address must be 'auto' (join the running cluster), 'local' (start one on "
            f"this machine) or a cluster address such as 'ray://HOST:10001' or "
            f"'HOST:6379', got {address!r}"
        )
    return address.strip()


def connect(address: str) -> bool:
    """Join the cluster at `address` ('auto', 'local', or an address); True when this
    call started Ray here (so the caller shuts it down again), False when it joined
    or reused a connection that someone else owns."""
    ray = require_ray()
    address = check_address(address)
    if ray.is_initialized():
        return False
    if address == "local":
        ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False)
    else:
        ray.init(address=address, log_to_driver=False, configure_logging=False)
    return True
