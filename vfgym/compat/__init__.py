"""Running environments written for verifiers 0.1.x unmodified.

`install_verifiers_alias()` makes `import verifiers` and every `verifiers.X.Y`
module path of verifiers 0.1.7.post0 resolve to vfgym (see `vfgym.compat.alias`);
`vfgym eval`, `vf.load_environment` and the entry-point registry install it by
themselves when an environment they load imports `verifiers` and the real one is
absent. docs/migrating.md lists what matches 0.1.7 and what differs.
"""

from vfgym.compat.alias import (
    VerifiersAliasFinder,
    install_verifiers_alias,
    real_verifiers_available,
    uninstall_verifiers_alias,
    verifiers_alias_active,
    with_verifiers_alias,
)

__all__ = [
    "VerifiersAliasFinder",
    "install_verifiers_alias",
    "real_verifiers_available",
    "uninstall_verifiers_alias",
    "verifiers_alias_active",
    "with_verifiers_alias",
]
