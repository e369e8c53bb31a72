"""What an executed block read, recorded in the block worker: modules, files, folders, variables.

The worker (:mod:`gpulesson.site.block_worker`) installs one :class:`ReadRecorder` before
any block runs. While a block runs it notes:

* **modules**: every repository module an ``import`` statement (or
  ``importlib.import_module``) reached, plus the modules those import, transitively
  (the recorder keeps the import graph of the whole worker, so a module imported by an
  earlier block still brings its own imports along), plus their parent packages;
* **files** opened for reading and **folders** listed (``open``, ``os.listdir`` and
  ``os.scandir`` audit events) inside the repository (``roots``, minus ``excluded``:
  the virtual environment, the cache, the built site), by the block itself or by
  module code it called; a file that a module read while it was imported (say an
  ``lru_cache`` loader) counts for every later block whose modules include it;
* **variables** read through ``os.environ`` (``os.getenv`` included) before the block
  set them itself, with the value seen (but :data:`IGNORED_ENV`).

The build process hashes what was recorded and stores it with the result
(:mod:`gpulesson.site.exec_cache`): the result is reused only while every one of those
hashes is unchanged. A module file saved anew while a block ran it (``changed``: the code in
memory is not the file's) makes the result one the build shows but does not store.

>>> recorder = ReadRecorder()
>>> recorder.configure([Path("/repo")], [Path("/repo/.venv")])
>>> recorder.is_local("/repo/docs/x.yml"), recorder.is_local("/repo/.venv/lib/y.py")
(True, False)
>>> recorder.is_local("/elsewhere/z.py")
False
"""

from __future__ import annotations

import builtins
import importlib
import importlib.util
import os
import sys
import weakref
from collections.abc import Callable, Iterable
from pathlib import Path
from types import FrameType
from typing import Any

BLOCK_FILE = "<code block: "
# Configured anew (its files read again) whenever the build configures it: never stale.
REREAD_MODULES = frozenset(("gpulesson.site.content",))
# Read when a block copies os.environ (for a child process, say) but never what it prints:
# the shell's bookkeeping, and the variables that change how a build runs.
# (torch.compile's worker pool copies the whole environment, so its blocks read all of it.)
IGNORED_ENV = frozenset(
    ("_", "OLDPWD", "PWD", "PS1", "PS2", "SHLVL")
    + ("GPULESSON_FRESH", "GPULESSON_CACHE_DIR", "GPULESSON_BLOCK_TIMEOUT_S")
)
_IMPORT_FRAMES = ("<frozen importlib", "<frozen zipimport")


class RecordingEnviron(os._Environ):  # type: ignore[name-defined,misc]
    """``os.environ`` as before, telling the recorder which variables were read or set."""

    recorder: ReadRecorder | None = None

    def __getitem__(self, key: str) -> str:
        try:
            value = super().__getitem__(key)
        except KeyError:
            if self.recorder is not None:
                self.recorder.note_variable(key, None)
            raise
        if self.recorder is not None:
            self.recorder.note_variable(key, value)
        return value

    def __setitem__(self, key: str, value: str) -> None:
        if self.recorder is not None:
            self.recorder.note_set(key)
        super().__setitem__(key, value)

    def __delitem__(self, key: str) -> None:
        if self.recorder is not None:
            self.recorder.note_set(key)
        super().__delitem__(key)


class ReadRecorder:
    """Records, per block, what it read; see the module docstring."""

    def __init__(self) -> None:
        self.roots: tuple[str, ...] = ()
        self.excluded: tuple[str, ...] = ()
        self.active = False
        self._edges: dict[str, set[str]] = {}  # module -> the repository modules it imports
        self._module_reads: dict[str, set[tuple[str, str]]] = {}  # module -> (kind, path)
        self._module_env: dict[str, dict[str, str | None]] = {}  # module -> variables read
        self._first_stat: dict[str, tuple[int, int] | None] = {}  # path -> (mtime_ns, size)
        # module -> (the module object, its file, the file's stat when it was imported)
        self._loaded: dict[str, tuple[weakref.ref[Any], str, tuple[int, int] | None]] = {}
        self._local_name: dict[str, bool] = {}
        self._local_file: dict[str, bool] = {}
        self._touched: set[str] = set()
        self._reads: set[tuple[str, str]] = set()
        self._env: dict[str, str | None] = {}
        self._env_set: set[str] = set()
        self._original_import: Callable[..., Any] = builtins.__import__
        self._original_import_module: Callable[..., Any] = importlib.import_module
        self._installed = False

    # --- set-up -------------------------------------------------------------------------

    def configure(self, roots: Iterable[Path], excluded: Iterable[Path]) -> None:
        """Which folders are the repository, and which folders inside it do not count."""
        self.roots = tuple(os.path.abspath(r) for r in roots)
        self.excluded = tuple(os.path.abspath(e) for e in excluded)
        self._local_name.clear()
        self._local_file.clear()

    def install(self) -> None:
        """Hook ``import``, ``importlib.import_module``, the audit events and os.environ."""
        if self._installed:
            return
        self._installed = True
        builtins.__import__ = self._import
        importlib.import_module = self._import_module  # type: ignore[assignment]
        sys.addaudithook(self._audit)
        os.environ.__class__ = RecordingEnviron
        RecordingEnviron.recorder = self

    # --- what counts ----------------------------------------------------------------------

    def is_local(self, path: str) -> bool:
        """True for a path inside a root and outside every excluded folder."""
        cached = self._local_file.get(path)
        if cached is not None:
            return cached

        def under(folder: str) -> bool:
            return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)

        local = (
            any(under(r) for r in self.roots)
            and not any(under(e) for e in self.excluded)
            and "__pycache__" not in path
            and not path.endswith((".pyc", ".pyo"))
        )
        self._local_file[path] = local
        return local

    def _module_local(self, name: str) -> bool:
        cached = self._local_name.get(name)
        if cached is not None:
            return cached
        module = sys.modules.get(name)
        if module is None:
            return False  # not imported (yet): decide when it is
        file = getattr(module, "__file__", None)
        local = bool(file) and self.is_local(os.path.abspath(file))
        self._local_name[name] = local
        return local

    def local_modules(self) -> set[str]:
        """The names of the repository modules imported now."""
        return {name for name in list(sys.modules) if self._module_local(name)}

    # --- hooks ---------------------------------------------------------------------------

    def _import(
        self,
        name: str,
        globals: dict[str, Any] | None = None,  # noqa: A002 (builtins.__import__'s names)
        locals: Any = None,  # noqa: A002
        fromlist: Any = (),
        level: int = 0,
    ) -> Any:
        module = self._original_import(name, globals, locals, fromlist, level)
        try:
            self._note_import(name, globals, fromlist, level)
        except Exception:  # noqa: BLE001, S110 (recording must never break an import)
            pass
        return module

    def _import_module(self, name: str, package: str | None = None) -> Any:
        module = self._original_import_module(name, package)
        try:
            caller = sys._getframe(1).f_globals
            self._note_import(module.__name__, caller, (), 0)
        except Exception:  # noqa: BLE001, S110
            pass
        return module

    def _note_import(
        self, name: str, caller: dict[str, Any] | None, fromlist: Any, level: int
    ) -> None:
        if level:
            package = (caller or {}).get("__package__") or ""
            absolute = importlib.util.resolve_name("." * level + name, package)
        else:
            absolute = name
        targets = [absolute] + [f"{absolute}.{item}" for item in fromlist or () if item != "*"]
        local = [t for t in targets if self._module_local(t)]
        if not local:
            return
        self._remember_loaded(local)
        if self.active:
            self._touched.update(local)
        importer = (caller or {}).get("__name__")
        if isinstance(importer, str) and self._module_local(importer):
            self._edges.setdefault(importer, set()).update(local)

    def _remember_loaded(self, names: Iterable[str]) -> None:
        """Each module's file stat as it was imported (again after a re-import)."""
        for name in names:
            module = sys.modules.get(name)
            file = getattr(module, "__file__", None)
            known = self._loaded.get(name)
            if module is None or not file or (known is not None and known[0]() is module):
                continue
            path = os.path.abspath(file)
            self._loaded[name] = (weakref.ref(module), path, _stat(path))

    def changed_since_loaded(self, names: Iterable[str]) -> list[str]:
        """The files of these modules saved anew since they were imported (code now stale).

        >>> ReadRecorder().changed_since_loaded(["json"])  # not imported while it recorded
        []
        """
        changed = []
        for name in names:
            known = self._loaded.get(name)
            if known is not None and known[0]() is sys.modules.get(name):
                if _stat(known[1]) != known[2]:
                    changed.append(known[1])
        return sorted(changed)

    def _reader(self) -> str | None:
        """The module whose code is reading (None: a block's own code, or no module)."""
        frame: FrameType | None = sys._getframe(2)
        while frame is not None:
            filename = frame.f_code.co_filename
            if filename.startswith(BLOCK_FILE):
                return None
            if filename.startswith(_IMPORT_FRAMES):
                return ""  # the import system reading a module's source: not data
            if self.is_local(os.path.abspath(filename)):
                name = frame.f_globals.get("__name__")
                return name if isinstance(name, str) else None
            frame = frame.f_back
        return None

    def _note(self, kind: str, path: str) -> None:
        reader = self._reader()
        if reader == "":
            return
        if reader is not None:
            self._module_reads.setdefault(reader, set()).add((kind, path))
            self._first_stat.setdefault(path, _stat(path))
        if self.active:
            self._reads.add((kind, path))

    def _audit(self, event: str, args: tuple[Any, ...]) -> None:
        if event == "open":
            kind = "file"
        elif event in ("os.listdir", "os.scandir"):
            kind = "listing"
        else:
            return
        try:
            target = args[0] if args else None
            if target is None and kind == "listing":
                target = "."
            if target is None or isinstance(target, int):
                return
            if kind == "file" and not _opens_for_reading(args[1], args[2]):
                return
            path = os.path.abspath(os.fsdecode(target))
            if self.is_local(path):
                self._note(kind, path)
        except Exception:  # noqa: BLE001, S110 (an audit hook that raises breaks the open)
            pass

    def note_variable(self, name: str, value: str | None) -> None:
        """A variable read through ``os.environ``: the block's or its module's."""
        if name in IGNORED_ENV:
            return
        try:
            if self.active and name not in self._env_set:
                self._env.setdefault(name, value)
            reader = self._reader() if not self.active else None
            if reader:
                self._module_env.setdefault(reader, {}).setdefault(name, value)
        except Exception:  # noqa: BLE001, S110
            pass

    def note_set(self, name: str) -> None:
        """A variable the block sets: later reads of it are its own, not an input."""
        if self.active:
            self._env_set.add(name)

    # --- one block ------------------------------------------------------------------------

    def begin(self) -> None:
        """Start recording a block."""
        self._touched, self._reads, self._env, self._env_set = set(), set(), {}, set()
        self.active = True

    def end(self) -> dict[str, list[Any]]:
        """Stop recording; what the block read (module files, files, folders, variables),
        and which of its modules' files were saved anew since they were imported."""
        self.active = False
        closure = self._closure(self._touched)
        files = {p for kind, p in self._reads if kind == "file"}
        listings = {p for kind, p in self._reads if kind == "listing"}
        env = dict(self._env)
        module_files = set()
        for name in closure:
            module = sys.modules.get(name)
            file = getattr(module, "__file__", None)
            if file:
                module_files.add(os.path.abspath(file))
            for kind, path in self._module_reads.get(name, ()):
                (files if kind == "file" else listings).add(path)
            for variable, value in self._module_env.get(name, {}).items():
                env.setdefault(variable, value)
        files -= module_files
        return {
            "modules": sorted(module_files),
            "files": sorted(files),
            "listings": sorted(listings),
            "environ": sorted(env.items()),
            "changed": self.changed_since_loaded(closure),
        }

    def _closure(self, names: set[str]) -> set[str]:
        seen: set[str] = set()
        todo = list(names)
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            todo.extend(self._edges.get(name, ()))
            parent = name.rpartition(".")[0]
            if parent and self._module_local(parent):
                todo.append(parent)
        return seen

    def stale(self) -> list[str]:
        """Files read by modules still imported here that changed since: the worker is stale.

        A module keeps what it read (a cache, a constant), so a new worker must read it again.
        Folder listings and :data:`REREAD_MODULES` do not count.
        """
        alive = self.local_modules()
        changed = []
        for name in sorted(alive - REREAD_MODULES):
            module = sys.modules.get(name)
            reads = self._module_reads.get(name, ())
            paths = {path for kind, path in reads if kind == "file"}
            file = getattr(module, "__file__", None)
            if file:
                path = os.path.abspath(file)
                self._first_stat.setdefault(path, _stat(path))
                paths.add(path)
            changed += [p for p in sorted(paths) if _stat(p) != self._first_stat.get(p)]
        return sorted(set(changed))


def _stat(path: str) -> tuple[int, int] | None:
    try:
        result = os.stat(path)
    except OSError:
        return None
    return result.st_mtime_ns, result.st_size


def _opens_for_reading(mode: Any, flags: Any) -> bool:
    """True when an ``open`` audit event reads the file (not only writes it).

    >>> _opens_for_reading("r", 0), _opens_for_reading("w", 0), _opens_for_reading("a+", 0)
    (True, False, True)
    >>> _opens_for_reading(None, os.O_WRONLY), _opens_for_reading(None, os.O_RDONLY)
    (False, True)
    """
    if isinstance(mode, str):
        return "r" in mode or "+" in mode
    if isinstance(flags, int):
        return flags & os.O_ACCMODE != os.O_WRONLY
    return True
