"""Type aliases of verifiers 0.1.7 that vfgym's own `vfgym.types` has no use for."""

from __future__ import annotations

JsonPrimitive = str | int | float | bool | None
