"""The meta-path finder that makes `import verifiers` (and every `verifiers.X.Y` of
0.1.7.post0) resolve to vfgym.

Each `verifiers.*` module is a small module object of its own whose attributes are
looked up, on first use, in the vfgym module the table names (`vfgym.compat.table`):
classes and functions are vfgym's very objects, so `isinstance`, subclassing and
`vf.Environment` behave as with `import vfgym as vf`. A name vfgym deliberately
lacks raises `VerifiersNameUnavailable`, which says what to use instead.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import logging
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, TypeVar

from vfgym.compat.table import ALIASED_VERSION, MODULES, AliasedModule
from vfgym.errors import VerifiersNameUnavailable

ALIAS_ROOT = "verifiers"
_T = TypeVar("_T")


def _refusal(module_name: str, name: str, advice: str) -> VerifiersNameUnavailable:
    return VerifiersNameUnavailable(
        f"`{module_name}.{name}` (verifiers 0.1.7) is not provided by vfgym: {advice}.",
        name=name,
    )


def _resolve(module: ModuleType, spec: AliasedModule, name: str) -> Any:
    """The value of `name` on the alias module `module`, or the error that says why not."""
    module_name = module.__name__
    if name in spec.extra:
        where, _, attribute = spec.extra[name].partition(":")
        return getattr(importlib.import_module(where), attribute)
    if name in spec.refused:
        raise _refusal(module_name, name, spec.refused[name])
    if spec.refuse_all is not None:
        if name.startswith("_"):
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        raise _refusal(module_name, name, spec.refuse_all)
    if spec.target is not None and not (name.startswith("__") and name.endswith("__")):
        target = importlib.import_module(spec.target)
        try:
            return getattr(target, name)
        except AttributeError:
            pass
    submodule = f"{module_name}.{name}"
    if submodule in MODULES:  # `import verifiers; verifiers.envs` without importing it
        return importlib.import_module(submodule)
    raise AttributeError(
        f"module {module_name!r} has no attribute {name!r} "
        f"(it is vfgym's {spec.target or 'nothing'} under the verifiers alias)"
    )


def _public_names(spec: AliasedModule) -> list[str]:
    names = set(spec.extra) | set(spec.refused)
    if spec.target is not None:
        target = importlib.import_module(spec.target)
        names.update(getattr(target, "__all__", None) or dir(target))
    return sorted(name for name in names if not name.startswith("_"))


class _AliasLoader(importlib.abc.Loader):
    """Fills a fresh `verifiers.*` module with a lazy attribute lookup into vfgym."""

    def __init__(self, spec: AliasedModule) -> None:
        self.spec = spec

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None  # the default module object

    def exec_module(self, module: ModuleType) -> None:
        spec = self.spec
        if spec.target is not None:
            importlib.import_module(spec.target)  # a missing dependency shows at import
            target_doc = sys.modules[spec.target].__doc__
        else:
            target_doc = None
        if spec.refuse_all is not None:
            doc = f"Not provided by vfgym: {spec.refuse_all}."
        else:
            doc = f"verifiers 0.1.x names, served by vfgym ({spec.target})."
            if target_doc:
                doc += "\n\n" + target_doc
        module.__doc__ = doc
        module.logger = logging.getLogger(module.__name__)  # type: ignore[attr-defined]
        if module.__name__ == ALIAS_ROOT:
            module.__version__ = ALIASED_VERSION  # type: ignore[attr-defined]

        def __getattr__(name: str) -> Any:
            value = _resolve(module, spec, name)
            if not isinstance(value, ModuleType) or spec.target is not None:
                module.__dict__[name] = value  # later lookups skip this function
            return value

        def __dir__() -> list[str]:
            return sorted({*module.__dict__, *(_public_names(spec))})

        module.__getattr__ = __getattr__  # type: ignore[attr-defined,method-assign]
        module.__dir__ = __dir__  # type: ignore[method-assign]
        if spec.refuse_all is None:
            module.__all__ = _public_names(spec)  # type: ignore[attr-defined]


class VerifiersAliasFinder(importlib.abc.MetaPathFinder):
    """Finds `verifiers` and its 0.1.7.post0 submodules, and nothing else."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        spec = MODULES.get(fullname)
        if spec is None:
            return None  # not a 0.1.7 module: the usual ModuleNotFoundError
        return importlib.util.spec_from_loader(
            fullname, _AliasLoader(spec), is_package=spec.package
        )


def _installed_finder() -> VerifiersAliasFinder | None:
    for finder in sys.meta_path:
        if isinstance(finder, VerifiersAliasFinder):
            return finder
    return None


def verifiers_alias_active() -> bool:
    """Whether `import verifiers` currently resolves to vfgym."""
    return _installed_finder() is not None


def real_verifiers_available() -> bool:
    """Whether a real `verifiers` package is importable (the alias left aside)."""
    if _installed_finder() is not None:
        return False
    loaded = sys.modules.get(ALIAS_ROOT)
    if loaded is not None:
        return True
    return importlib.util.find_spec(ALIAS_ROOT) is not None


def install_verifiers_alias(force: bool = False) -> bool:
    """Make `import verifiers` and every `verifiers.X.Y` path of 0.1.7.post0 resolve to vfgym.

    Does nothing, and returns False, when the real verifiers is importable, so an
    installed verifiers is never shadowed; `force=True` installs the alias anyway
    (refused when the real one is already imported, since two packages under one
    name would mix). Returns True when the alias is in place. Calling it again is
    harmless.
    """
    if _installed_finder() is not None:
        return True
    loaded = sys.modules.get(ALIAS_ROOT)
    if loaded is not None:
        if force:
            raise RuntimeError(
                "the real verifiers package is already imported, so vfgym cannot take its "
                "name; call vfgym.compat.install_verifiers_alias(force=True) before anything "
                "imports verifiers"
            )
        return False
    if not force and importlib.util.find_spec(ALIAS_ROOT) is not None:
        return False
    sys.meta_path.insert(0, VerifiersAliasFinder())
    return True


def uninstall_verifiers_alias() -> None:
    """Take the alias away again and forget the `verifiers.*` modules it made."""
    finder = _installed_finder()
    if finder is None:
        return
    sys.meta_path.remove(finder)
    for name in [n for n in sys.modules if n == ALIAS_ROOT or n.startswith(ALIAS_ROOT + ".")]:
        if isinstance(getattr(sys.modules[name], "__loader__", None), _AliasLoader):
            del sys.modules[name]


def _missing_verifiers(exc: ModuleNotFoundError) -> bool:
    name = exc.name or ""
    return name == ALIAS_ROOT or name.startswith(ALIAS_ROOT + ".")


def with_verifiers_alias(load: Callable[[], _T]) -> _T:
    """Run `load` (an import of an environment module); if it fails only because
    `verifiers` is absent, install the alias and run it again.

    This is how `vfgym eval`, `vf.load_environment` and the entry-point registry run
    an environment written for verifiers 0.1.x with no edit, while never touching
    an installed verifiers or a module that does not need it.
    """
    try:
        return load()
    except ModuleNotFoundError as exc:
        if not _missing_verifiers(exc) or verifiers_alias_active():
            raise
        if not install_verifiers_alias():
            raise
    return load()
