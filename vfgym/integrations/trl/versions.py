"""Which TRL versions the integration is tested with, checked before anything of TRL loads.

TRL marks `rollout_func` and `environment_factory` experimental: their shapes change
between minor releases, so a version outside the tested range fails here, by name,
instead of deep inside a training step.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from vfgym.errors import IntegrationVersionError

#: The TRL releases the tests under tests/integrations ran against: [low, high).
TRL_TESTED = ((1, 16), (1, 17))
_INSTALL = 'pip install "vfgym[trl]"  (or: pip install "trl>=1.16,<1.17")'


def _release(text: str) -> tuple[int, ...]:
    """The numeric release of a version string: "1.16.0.dev0" -> (1, 16, 0)."""
    parts = []
    for piece in text.split("."):
        digits = "".join(ch for ch in piece if ch.isdigit()) if piece[:1].isdigit() else ""
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def check_trl_version(installed: str | None = None) -> str:
    """Return the installed TRL version, or raise `IntegrationVersionError` naming it
    and the tested range when it is missing or outside that range."""
    if installed is None:
        try:
            installed = version("trl")
        except PackageNotFoundError:
            raise IntegrationVersionError(
                f"vfgym.integrations.trl needs TRL, which is not installed; {_INSTALL}"
            ) from None
    low, high = TRL_TESTED
    release = _release(installed)
    if not low <= release[:2] < high:
        raise IntegrationVersionError(
            f"TRL {installed} is installed, but vfgym.integrations.trl is tested with TRL "
            f">={'.'.join(map(str, low))},<{'.'.join(map(str, high))} (its rollout_func and "
            f"environment_factory hooks are experimental and change between releases); "
            f"{_INSTALL}"
        )
    return installed
