"""Names a package exports but imports on first use (a module ``__getattr__``, PEP 562), so that
importing the package does not import what only some callers need."""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``package``: each name of ``exports`` imported from its module
    when first asked for, then kept in the package."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__


# package -> its functions named like one of its submodules (``functions_over_submodules``)
_FUNCTIONS: dict[str, frozenset[str]] = {}
# "package.submodule" -> what calling that submodule calls (``callable_submodule``)
_CALLS: dict[str, Callable[..., Any]] = {}


class _Package(types.ModuleType):
    """A package that keeps its own attributes from the import system: Python sets a submodule
    as an attribute of its package when the submodule is first imported, which would hide a
    function of that name exported lazily, and gives no hook to make a submodule callable."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType):
            if name in _FUNCTIONS.get(self.__name__, ()):
                return  # the submodule stays in sys.modules only
            if f"{self.__name__}.{name}" in _CALLS:
                value.__class__ = _CallablePackage
        super().__setattr__(name, value)


class _CallablePackage(types.ModuleType):
    """A package that can be called (``callable_submodule``); its submodules import as ever."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _CALLS[self.__name__](*args, **kwargs)


def functions_over_submodules(package: str, *names: str) -> None:
    """``package.<name>`` stays the package's function ``name`` once the submodule of that name
    is imported (``profan.capture``, ``profan.trace.load``)."""
    _FUNCTIONS[package] = _FUNCTIONS.get(package, frozenset()) | frozenset(names)
    sys.modules[package].__class__ = _Package


def callable_submodule(package: str, name: str, call: Callable[..., Any]) -> None:
    """Calling the submodule ``package.<name>``, once imported, calls ``call``: the package
    above it says what (``profan.report(path)`` is ``profan.api.report``, and ``profan.report``
    imports nothing of the API)."""
    _CALLS[f"{package}.{name}"] = call
    sys.modules[package].__class__ = _Package
    imported = sys.modules.get(f"{package}.{name}")
    if imported is not None:
        imported.__class__ = _CallablePackage
