"""`Registry[T]`: the one way agentrl names its extension points.

Six registries use it: agent loops (`agentrl.loops.registry.LOOPS`), tools (`agentrl.tools.registry.TOOLS`),
tool-call parsers (`agentrl.tools.parsers.registry.PARSERS`), reward types (`agentrl.rewards.registry.REWARDS`),
advantage estimators and policy losses (`agentrl.trainer.registry.ADVANTAGES` / `LOSSES`). Each works the same:

- built-ins are lazy `name -> "pkg.module:Attr"` strings, imported on first use (importing agentrl imports no
  loop, tool or reward module);
- `register(name)` is a decorator; it refuses a name already taken by something else;
- `get(name)` takes a registered name or a dotted path (`pkg.module:Attr`, `pkg.module.Attr`, or
  `path/to/file.py:Attr`), and an unknown name errors with the known ones and the closest match;
- `names()` lists them; `problem(name)` says what is wrong with a name without importing any built-in (run
  validation); `override(name, entry)` swaps one entry and `scoped()` undoes every registration for the length
of a `with` block (tests).
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Generic, TypeVar

from agentrl.errors import UserError

T = TypeVar("T")
E = TypeVar("E")

_MISSING = object()


class UnknownNameError(UserError):
    """A name that is neither registered nor an importable dotted path."""


class RegistryConflictError(UserError):
    """`register(name)` for a name already taken by a different object."""


class Registry(Generic[T]):
    """Names of one kind of extension, mapped to the objects (or dotted paths of the objects) they stand for.

    Args:
        kind: what an entry is, for messages ("agent loop", "tool").
        builtins: the built-in entries as `name -> "pkg.module:Attr"`, imported on first `get`.
        accepts: whether an object is a valid entry (checked on `register` and after every import).
        expected: what a valid entry is, for messages ("an AgentLoopBase subclass").
        example: a dotted path shown in the unknown-name message ("my_pkg.loops:MyLoop").
        convert: turns an accepted object into the entry `get` returns (e.g. wraps a function); default: as is.
        plural: `kind` in the plural, when not `kind + "s"`.
    """

    def __init__(
        self,
        kind: str,
        builtins: Mapping[str, str],
        *,
        accepts: Callable[[Any], bool],
        expected: str,
        example: str,
        convert: Callable[[str, Any], T] | None = None,
        plural: str | None = None,
    ):
        self.kind = kind
        self.plural = plural or f"{kind}s"
        self.expected = expected
        self.example = example
        self._accepts = accepts
        self._convert = convert
        self._entries: dict[str, Any] = dict(builtins)
        self._builtins = frozenset(builtins)

    # ---- registering ----------------------------------------------------------------------------------------

    def register(self, name: str) -> Callable[[E], E]:
        """Class/function decorator registering the decorated object under `name` (returned unchanged)."""

        def decorate(obj: E) -> E:
            self.add(name, obj)
            return obj

        return decorate

    def add(self, name: str, entry: Any) -> None:
        """Register `entry` (an object, or the dotted path of one, imported on first use) under `name`.

        Raises:
            RegistryConflictError: `name` is taken by a different entry (re-running the same definition is fine).
            TypeError: `entry` is not what this registry holds.
        """
        if not isinstance(name, str) or not name:
            raise TypeError(f"a {self.kind} name must be a non-empty string, got {name!r}")
        if not isinstance(entry, str) and not self._accepts(entry):
            raise TypeError(f"{self.kind} {name!r} must be {self.expected}, got {entry!r}")
        current = self._entries.get(name, _MISSING)
        if current is not _MISSING and not _same(current, entry):
            raise RegistryConflictError(
                f"{self.kind} name {name!r} is already registered to {_describe(current)}; "
                f"register {_describe(entry)} under another name"
            )
        self._entries[name] = entry

    @contextlib.contextmanager
    def override(self, name: str, entry: Any) -> Iterator[None]:
        """Within the block, `name` means `entry` (a new or a replaced entry); the old state comes back after."""
        before = self._entries.get(name, _MISSING)
        self._entries[name] = entry
        try:
            yield
        finally:
            if before is _MISSING:
                self._entries.pop(name, None)
            else:
                self._entries[name] = before

    @contextlib.contextmanager
    def scoped(self) -> Iterator[Registry[T]]:
        """Within the block, register freely; every entry added or replaced is undone after (tests)."""
        before = dict(self._entries)
        try:
            yield self
        finally:
            self._entries.clear()
            self._entries.update(before)

    # ---- looking up -----------------------------------------------------------------------------------------

    def names(self) -> list[str]:
        """Every registered name, sorted."""
        return sorted(self._entries)

    def builtin_names(self) -> list[str]:
        """The names agentrl itself registers, sorted (what its own tests check every entry of)."""
        return sorted(self._builtins)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def get(self, name: str) -> T:
        """The entry registered as `name`, or the object at the dotted path `name`.

        Raises:
            UnknownNameError: neither registered nor a dotted path (the message lists the known names).
            UserError: the dotted path cannot be imported, or names something that is not a valid entry.
        """
        if not isinstance(name, str) or not name:
            raise UnknownNameError(f"{self.kind} name must be a non-empty string, got {name!r}; {self._known()}")
        entry = self._entries.get(name, _MISSING)
        if entry is _MISSING:
            if not is_dotted_path(name):
                raise UnknownNameError(self.unknown_message(name))
            entry = name
        if isinstance(entry, str):
            entry = self._load(name, entry)
            if name in self._entries:
                self._entries[name] = entry  # cache the import
        return entry

    def problem(self, name: Any) -> str | None:
        """What is wrong with `name` (None if nothing): registered names are fine without importing them; a
        dotted path is imported and checked."""
        if isinstance(name, str) and name in self._entries:
            return None
        try:
            self.get(name)
        except UserError as exc:
            return str(exc)
        return None

    def unknown_message(self, name: str) -> str:
        close = difflib.get_close_matches(name, self._entries, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        return f"unknown {self.kind} {name!r}.{hint} {self._known()}"

    def _known(self) -> str:
        listed = ", ".join(self.names()) or "none registered"
        return f"Known {self.plural}: {listed}; or give a dotted path such as {self.example}."

    def _load(self, name: str, path: str) -> T:
        obj = import_object(path, f"{self.kind} {name!r}")
        if not self._accepts(obj):
            raise UserError(f"{self.kind} {name!r}: {path} is {obj!r}, not {self.expected}")
        return self._convert(name, obj) if self._convert else obj


def is_dotted_path(text: str) -> bool:
    """Whether `text` looks like `pkg.module:Attr`, `pkg.module.Attr` or `path/to/file.py:Attr`."""
    return ":" in text or "." in text


def import_object(path: str, what: str) -> Any:
    """The object at `pkg.module:Attr`, `pkg.module.Attr` or `path/to/file.py:Attr`; `what` names it in errors.

    Raises:
        UserError: not a dotted path, or the module, file or attribute cannot be found.
    """
    target, sep, attr = path.rpartition(":")
    if not sep:
        target, _, attr = path.rpartition(".")
    if not target or not attr:
        raise UserError(f"{what}: {path!r} is not a dotted path; write it as pkg.module:Name")
    try:
        module = _load_file(Path(target)) if target.endswith(".py") else importlib.import_module(target)
    except (ImportError, FileNotFoundError, SyntaxError) as exc:
        raise UserError(f"{what}: cannot import {target!r} for {path!r} ({type(exc).__name__}: {exc})") from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise UserError(f"{what}: module {target!r} has no attribute {attr!r}") from None


class MissingPackageError(UserError, ValueError):
    """An optional package a setting needs is not installed (a `ValueError` too, so that a config validator that
    imports it reports the missing package as that setting's problem)."""


def import_package(module: str, package: str, needed_by: str) -> Any:
    """The optional module `module` of the PyPI package `package`, imported; `needed_by` names the setting that
    needs it.

    Raises:
        MissingPackageError: it is not installed (the message says what to run).
    """
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingPackageError(f"{needed_by} needs the {package} package: pip install {package}") from None


def _load_file(path: Path) -> Any:
    path = path.resolve()
    name = f"agentrl_user_{hashlib.sha1(str(path).encode()).hexdigest()[:12]}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None or not path.is_file():
        raise FileNotFoundError(f"no Python file {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _same(current: Any, entry: Any) -> bool:
    """The same entry, or the same definition run again (a module reloaded, a notebook cell re-run)."""
    if current is entry or current == entry:
        return True
    return _qualified(current) is not None and _qualified(current) == _qualified(entry)


def _qualified(obj: Any) -> str | None:
    if isinstance(obj, str):
        return obj.replace(":", ".")
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    return f"{module}.{qualname}" if module and qualname else None


def _describe(entry: Any) -> str:
    return _qualified(entry) or repr(entry)
