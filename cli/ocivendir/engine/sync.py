"""Owns: `sync`.

Stage every directory (fetch, filters, newRootPath, ignorePaths, permissions, symlink checks), swap them all in only
once all are staged (rolling back on failure), and produce the lock.
"""

from __future__ import annotations

import errno
import os
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace

from ocivendir.engine.content import Content
from ocivendir.engine.sources import FRAME_TYPES, FetchContext, lock_entry, log_fetch, source_for
from ocivendir.errors import ConfigError, OcivendirError, SyncError, os_reason
from ocivendir.fs.locks import target_lock
from ocivendir.fs.paths import Guard, pure, resolved, scoped_path, split, within
from ocivendir.fs.swap import STAGE, new_sibling, remove_tree
from ocivendir.fs.swapping import recover, swap_set
from ocivendir.oci.reference import parse_reference
from ocivendir.results import LogEvent
from ocivendir.vendir.config import (
    NATIVE_TYPES,
    Config,
    Directory,
    InputStream,
    config_digest,
    unix_mode,
)
from ocivendir.vendir.config import (
    Content as ContentConfig,
)
from ocivendir.vendir.lockfile import LockConfig, LockContent, LockDirectory

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

__all__ = ["SyncOptions", "SyncOutcome", "apply_lock", "sync"]

DEFAULT_LEGAL = ("{LICENSE,LICENCE,License,Licence}{,.md,.txt,.rst}", "{COPYRIGHT,Copyright}{,.md,.txt,.rst}",
                 "{NOTICE,Notice}{,.md,.txt,.rst}")  # fmt: skip
SUPPORTED = ", ".join(NATIVE_TYPES)


@dataclass(frozen=True, kw_only=True)
class SyncOptions:
    """A sync run, from the command's flags."""

    stream: InputStream
    cwd: str
    previous_lock: LockConfig | None
    locked: bool = False
    lazy: bool = True
    partial: bool = False
    allow_all_symlinks: bool = False
    umask: int = 0o022
    relocation_recheck: float = 3600.0
    delegate_vendir: str | None = None
    guards: tuple[Guard, ...] = ()  # besides the working directory: input files' directories, the cache


@dataclass(frozen=True, kw_only=True)
class SyncOutcome:
    """The lock a sync produced, and what it did."""

    lock: LockConfig
    fetched: int
    skipped: int


@dataclass
class _Task:
    """One content to fetch: where it goes in the stage and where its current copy is."""

    directory: Directory
    config: ContentConfig
    dest: str
    existing: str
    digest: str = ""
    reuse: LockContent | None = None
    stage_root: bool = False  # under -d: `dest` is the content's own stage (made 0700; its mode set by `finish`)


_LINKLESS = frozenset({"image", "imgpkgBundle"})  # sources whose trees only fs/extract.py lays down


@dataclass
class _Staged:
    """One target (a directory, or under -d one content) built in a sibling stage."""

    target: str
    stage: str
    chmods: list[tuple[str, int]] = field(default_factory=list)
    swapped: bool = False
    tasks: list[_Task] = field(default_factory=list)

    def may_hold_links(self) -> bool:
        """Whether a link may be in the stage; no when every content was extracted from layers in this run.

        `fs/extract.py` makes no link (it skips every symlink and hardlink); a lazy content copied from the old tree,
        or any other source, may hold some.
        """
        return any(task.reuse is not None or task.config.source_type not in _LINKLESS for task in self.tasks)


_LOCK_REF_KEYS = {"image": "url", "imgpkgBundle": "image"}  # where an OCI source's lock entry keeps its digest ref


def apply_lock(config: Config, lock: LockConfig) -> tuple[Config, dict[tuple[str, str], str | None]]:
    """`--locked`: image/bundle refs become the lock's digests, tagSelection is dropped, the lock's tag carried."""
    tags: dict[tuple[str, str], str | None] = {}
    directories = []
    for directory in config.directories:
        contents = []
        for content in directory.contents:
            entry = lock.find(directory.path, content.path)  # every content needs its entry, as in vendir
            if content.source_type in {"image", "imgpkgBundle"}:
                key = _LOCK_REF_KEYS[content.source_type]
                if entry.source_type != content.source_type or not entry.data:
                    raise ConfigError("Expected image lock configuration to be non-empty")
                if not entry.data.get(key):
                    what = "image URL" if key == "url" else "imgpkg bundle Image"
                    raise ConfigError(f"Expected {what} to be non-empty")
                source = {k: v for k, v in content.source.items() if k != "tagSelection"}
                source[key] = str(entry.data[key])
                tags[(directory.path, content.path)] = entry.data.get("tag") or None
                content = replace(content, source=source)  # noqa: PLW2901 - rebuilt content
            contents.append(content)
        directories.append(replace(directory, contents=tuple(contents)))
    return replace(config, directories=tuple(directories)), tags


def _frame(exc: OcivendirError, directory: str, content: ContentConfig | None) -> OcivendirError:
    """The chain vendir prints: fetch errors name the content and its source type; later steps only the directory."""
    prefix = f"Syncing directory '{directory}'"
    if content is not None:
        kind = FRAME_TYPES.get(content.source_type, content.source_type)
        prefix += f": Syncing directory '{content.path}' with {kind} contents"
    framed = exc.reworded(f"{prefix}: {exc.message}", hint=exc.hint)
    framed.__cause__ = exc
    return framed


def _files(root: str) -> list[str]:
    found: list[str] = []
    for base, dirs, names in os.walk(root):
        rel = os.path.relpath(base, root)
        links = [d for d in dirs if os.path.islink(os.path.join(base, d))]
        found.extend(name if rel == "." else f"{rel}/{name}" for name in names + links)
    return sorted(found)


def _filter(config: ContentConfig, root: str) -> None:
    """As vendir's FileFilter: unmatched files go (legal files stay), then each directory with no file or link below.

    A directory therefore appears only when some regular file or symlink lives under it, whatever the source made.
    """
    if config.include_paths or config.exclude_paths:
        from ocivendir.vendir import globs  # noqa: PLC0415 - only with path filters

        legal = DEFAULT_LEGAL if config.legal_paths is None else config.legal_paths
        for relative in _files(root):
            keep = not config.include_paths or any(globs.match(p, relative) for p in config.include_paths)
            if any(globs.match(p, relative) for p in config.exclude_paths):
                keep = False
            if any(globs.match(p, relative) for p in legal):
                keep = True
            if not keep:
                os.unlink(os.path.join(root, relative))
    if not _prune_empty(root):
        raise SyncError(
            f"Filtering paths in directory '{config.path}': Expected to find at least one file within directory"
        )


def _new_root(config: ContentConfig, root: str) -> None:
    if not config.new_root_path:
        return
    prefix = f"Changing to new root path '{config.path}'"
    try:
        chosen = scoped_path(root, config.new_root_path)
    except ValueError:
        raise SyncError(f"{prefix}: Invalid path: {config.new_root_path}") from None
    if not os.path.isdir(chosen):
        above = split(chosen)[0]
        siblings = sorted(_directories(above)) if os.path.isdir(above) else []
        found = f" (found other directories: {', '.join(siblings)})" if siblings else ""
        raise SyncError(f"{prefix}: Expected directory '{config.new_root_path}' (subpath) to exist{found}")
    parent, name = split(root)
    holder = os.path.join(parent, f".{name}.ocivendir-newroot")
    os.rename(chosen, holder)
    remove_tree(root)
    os.rename(holder, root)


def _directories(parent: str) -> list[str]:
    """The names in `parent` that are directories (or links to one)."""
    return [name for name in os.listdir(parent) if os.path.isdir(os.path.join(parent, name))]


def _keep_ignored(config: ContentConfig, existing: str, root: str) -> None:
    if not config.ignore_paths or not os.path.isdir(existing):
        return
    import shutil  # noqa: PLC0415 - only when ignorePaths keep files (shutil loads bz2, lzma, fnmatch)

    from ocivendir.vendir import globs  # noqa: PLC0415 - only with ignorePaths

    for relative in _files(existing):
        source = os.path.join(existing, relative)
        if os.path.islink(source) or not os.path.isfile(source):
            continue
        if any(globs.match(p, relative) for p in config.ignore_paths):
            target = os.path.join(root, relative)
            os.makedirs(split(target)[0], 0o700, exist_ok=True)
            shutil.copy2(source, target)


def _prune_empty(root: str) -> bool:
    """Remove each directory below `root` left with no entry once its own empty ones are gone; True if any stays.

    One bottom-up walk: a directory goes when it holds no file and every directory in it went (a link to a directory
    is an entry, never entered).
    """
    removed: set[str] = set()
    for base, dirs, names in os.walk(root, topdown=False):
        if names or any(os.path.join(base, name) not in removed for name in dirs):
            continue
        if base == root:
            return False
        os.rmdir(base)
        removed.add(base)
    return True


def _check_symlinks(root: str) -> None:
    real_root = resolved(root)
    for base, dirs, names in os.walk(root):
        for name in names + dirs:
            path = os.path.join(base, name)
            if not os.path.islink(path):
                continue
            if not within(_resolve_strict(path), real_root):
                shown = os.path.normpath(os.path.join(base, os.readlink(path)))
                raise SyncError(f'Invalid symlink found to outside parent directory: "{shown}"')


def _resolve_strict(path: str) -> str:
    """`Path.resolve(strict=True)`: every link followed; a dangling link or a loop is a SyncError in its words."""
    try:
        return os.path.realpath(path, strict=True)
    except OSError as exc:
        reason = f"Symlink loop from {exc.filename!r}" if exc.errno == errno.ELOOP else os_reason(exc)
        raise SyncError(f"Unable to resolve symlink: {reason}") from None


class _Syncer:
    """One sync: stages, then swaps."""

    def __init__(
        self, options: SyncOptions, content: Content, lock_dir: str, tags: dict[tuple[str, str], str | None]
    ) -> None:
        self.options = options
        self.content = content
        self.lock_dir = lock_dir
        self.tags = tags
        self.staged: list[_Staged] = []
        self.held: list[str] = []  # every target this run swaps (and holds the lock of): a killed set's journal names
        self.fetched = 0
        self.skipped = 0

    def _lazy_entry(self, directory: Directory, config: ContentConfig, digest: str) -> LockContent | None:
        previous = self.options.previous_lock
        if not (self.options.lazy and config.lazy and previous is not None):
            return None
        entry = previous.entry(directory.path, config.path)
        if entry is None or entry.config_digest != digest or not self._kept_may_stay(entry, config):
            return None
        return entry

    def _kept_may_stay(self, entry: LockContent, config: ContentConfig) -> bool:
        """With `--policy`, a lazy image or bundle is kept only when it passed these policy files before.

        A content synced before a policy existed, or under a policy since edited, is fetched again (from the cache when
        its blobs are there) so that the gate judges it: a sync that a policy governs vouches for its whole output.
        A recursive bundle is always judged again: its nested bundles have verdicts of their own, which the lock does
        not name (a pass remembered for the outer one says nothing of them; each is remembered, so this asks nothing).
        """
        gate = self.content.signatures
        key = _LOCK_REF_KEYS.get(entry.source_type)
        if gate is None or key is None:
            return True
        if config.source.get("recursive"):
            return False
        try:
            locked = parse_reference(str(entry.data.get(key) or ""))
        except OcivendirError:
            return False
        if locked.digest is None:
            return False
        return gate.passed_before(self.content.index, str(locked))

    def _reuse(self, task: _Task, entry: LockContent) -> LockContent:
        """A lazy content whose config has not changed: the on-disk copy and the old lock entry, as they are."""
        import shutil  # noqa: PLC0415 - only for lazy contents (shutil loads bz2, lzma, fnmatch)

        try:
            shutil.copytree(task.existing, task.dest, symlinks=True, dirs_exist_ok=True)
        except OSError as exc:
            msg = f"Lazy content missing. Run sync with --lazy=false to fix. '{task.directory.path}': {os_reason(exc)}"
            raise SyncError(msg) from None
        return entry

    def announce(self, task: _Task) -> None:
        """In config order: decide lazy skips and print vendir's `Fetching:` / `Skipping fetch:` line."""
        config, directory = task.config, task.directory
        task.digest = config_digest(config) if config.lazy else ""
        task.reuse = self._lazy_entry(directory, config, task.digest)
        if task.reuse is not None:
            self.skipped += 1
            self.content.events(LogEvent(message=(
                f"Skipping fetch: {directory.path} + {config.path} (flagged as lazy, config has not changed since "
                "last sync)")))  # fmt: skip
            return
        self.fetched += 1
        log_fetch(self.content, directory.path, config)

    def fill(self, task: _Task) -> LockContent | dict[str, Any]:
        """Fetch one content into its place in the stage (threads run several at once).

        Returns the lock entry for a lazy skip or a delegated content, else the source's lock data (`shape` is next).
        """
        if task.reuse is not None:
            return self._reuse(task, task.reuse)
        config, dest = task.config, task.dest
        context = FetchContext(content=self.content, stream=self.options.stream, cwd=self.options.cwd,
                               umask=self.options.umask, relocation_recheck=self.options.relocation_recheck,
                               directory_path=task.directory.path, existing=task.existing,
                               preresolved_tag=self.tags.get((task.directory.path, config.path)))  # fmt: skip
        native = source_for(config.source_type)
        if native is None:
            assert self.options.delegate_vendir is not None  # noqa: S101 - checked before any fetch
            from ocivendir.engine.delegate import delegate_content  # noqa: PLC0415 - only for delegated types

            return delegate_content(self.options.delegate_vendir, config, context, dest)
        if config.source_type in _LINKLESS:  # an image's tree: 0777 & ~umask, as imgpkg makes it
            os.makedirs(dest, 0o700, exist_ok=True)
            if not task.stage_root:  # a content's own stage (-d) is nobody else's while it is filled: `finish` sets it
                os.chmod(dest, 0o777 & ~self.options.umask)
        else:
            os.makedirs(dest, 0o700, exist_ok=True)
        return native(config, context, dest)

    def shape(self, task: _Task) -> None:
        """The steps vendir takes after a fetch: path filters and empty directories, newRootPath, ignorePaths."""
        if task.config.source_type != "manual":
            _filter(task.config, task.dest)
            _new_root(task.config, task.dest)
        _keep_ignored(task.config, task.existing, task.dest)

    def stage_target(self, target: str) -> _Staged:
        os.makedirs(split(target)[0], 0o700, exist_ok=True)
        recover(target, keep=self.content.store.root, held=self.held)
        staged = _Staged(target=target, stage=new_sibling(target, STAGE))
        self.staged.append(staged)
        return staged

    def plan(self, directory: Directory) -> list[_Task]:
        """The stage(s) for one directory and one task per content (under -d, each content is its own target)."""
        root = pure(os.path.join(self.options.cwd, directory.path))
        if self.options.partial:  # a killed sync of whole directories is recovered (or refused) first
            recover(root, keep=self.content.store.root, held=self.held)
        staged = None if self.options.partial else self.stage_target(root)
        if staged is not None:
            os.mkdir(staged.stage, 0o700)
            if directory.permissions is not None:
                staged.chmods.append((staged.stage, directory.permissions))
        tasks = []
        for config in directory.contents:
            if staged is None:
                own = self.stage_target(pure(os.path.join(root, config.path)))
                dest, existing = own.stage, own.target
            else:
                own = staged
                dest = pure(os.path.join(staged.stage, config.path))
                existing = pure(os.path.join(root, config.path))
                os.makedirs(split(dest)[0], 0o700, exist_ok=True)
            permissions = config.permissions if config.permissions is not None else directory.permissions
            if permissions is not None:
                own.chmods.insert(0, (dest, permissions))
            task = _Task(directory=directory, config=config, dest=dest, existing=existing, stage_root=staged is None)
            own.tasks.append(task)
            tasks.append(task)
        return tasks

    def run(self, tasks: list[_Task]) -> list[LockContent]:
        """Fetch every content, independent ones at the same time; the first failure in config order is raised."""
        for task in tasks:
            self.announce(task)
        cold = sum(1 for task in tasks if not self._served_locally(task))
        workers = max(1, min(self.content.concurrency, cold))
        if workers == 1:  # nothing to wait on in parallel: no thread pool to start
            return [self._framed(task) for task in tasks]
        from ocivendir.parallel import map_parallel  # noqa: PLC0415 - only when fetching in parallel

        return map_parallel(self._framed, tasks, workers)

    def _served_locally(self, task: _Task) -> bool:
        """True when a content needs no registry: a lazy skip, a local source, or a digest already in the cache."""
        if task.reuse is not None or task.config.source_type in {"inline", "directory", "manual"}:
            return True
        url = str(task.config.source.get("url") or task.config.source.get("image") or "")
        try:
            ref = parse_reference(url)
        except OcivendirError:
            return False
        return ref.digest is not None and self.content.store.has(ref.digest)

    def _framed(self, task: _Task) -> LockContent:
        try:
            fetched = self.fill(task)
        except OcivendirError as exc:
            raise _frame(exc, task.directory.path, task.config) from exc
        if isinstance(fetched, LockContent):
            return fetched
        try:
            self.shape(task)
        except OcivendirError as exc:
            raise _frame(exc, task.directory.path, None) from exc
        return lock_entry(task.config, fetched, task.digest)

    def finish(self) -> None:
        """Validate symlinks, apply permissions, then swap every target in, all or none (even across a kill)."""
        for staged in self.staged:
            if not self.options.allow_all_symlinks and staged.may_hold_links():
                _check_symlinks(staged.stage)
            for task in staged.tasks:  # under -d, an image's own stage gets its mode now that it is complete
                if task.stage_root and task.reuse is None and task.config.source_type in _LINKLESS:
                    os.chmod(task.dest, 0o777 & ~self.options.umask)
            for path, mode in staged.chmods:  # then the configured permissions, which win
                os.chmod(path, unix_mode(mode))
        for staged in self.staged:
            staged.swapped = True  # from here on the stages are swap_set's: swapped in, removed, or journaled
        swap_set([(staged.stage, staged.target) for staged in self.staged])

    def discard(self) -> None:
        for staged in self.staged:
            if not staged.swapped:
                remove_tree(staged.stage)


@contextmanager
def _target_locks(lock_dir: str, targets: list[str]) -> Iterator[None]:
    with ExitStack() as stack:
        for target in sorted({pure(t) for t in targets}):
            stack.enter_context(target_lock(lock_dir, target))
        yield


def _unsupported(config: Config, delegate: str | None) -> None:
    if delegate is not None:
        return
    for directory in config.directories:
        for content in directory.contents:
            if content.source_type not in NATIVE_TYPES:
                exc = ConfigError(
                    f"Unsupported directory contents type '{content.source_type}' (supported: {SUPPORTED}; set "
                    "OCIVENDIR_DELEGATE_VENDIR to a vendir binary to sync other types)"
                )
                raise _frame(exc, directory.path, content)


def sync(options: SyncOptions, config: Config, content: Content, lock_dir: str,
         tags: dict[tuple[str, str], str | None]) -> SyncOutcome:  # fmt: skip
    """Stage every directory, then swap them all in; on any failure nothing on disk changes.

    The caller has checked every path (`engine.placement.check_placement`) before it created anything, the cache
    included: `run_sync` does, once.
    """
    _unsupported(config, options.delegate_vendir)
    targets = [os.path.join(options.cwd, d.path) for d in config.directories]
    syncer = _Syncer(options, content, lock_dir, tags)
    syncer.held = [pure(t) for t in targets]
    if options.partial:  # under -d each content is a target of its own, inside its (locked) directory
        syncer.held += [pure(os.path.join(t, c.path)) for t, d in zip(targets, config.directories, strict=True)
                        for c in d.contents]  # fmt: skip
    with _target_locks(lock_dir, targets):
        try:
            plans = [syncer.plan(d) for d in config.directories]
            entries = iter(syncer.run([task for tasks in plans for task in tasks]))
            directories = tuple(
                LockDirectory(path=d.path, contents=tuple(next(entries) for _ in tasks))
                for d, tasks in zip(config.directories, plans, strict=True)
            )
            syncer.finish()
        finally:
            syncer.discard()
    return SyncOutcome(lock=LockConfig(directories=directories), fetched=syncer.fetched, skipped=syncer.skipped)
