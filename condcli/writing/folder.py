"""An output folder written whole or not at all, with a manifest of what condcli wrote there.

Below the API and the CLI (both write through it: ``--out``, ``--csv``, ``report.save()``), above the core's
path checks (:mod:`condcli.outpaths`).
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import shutil
import stat
import tempfile
import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from condcli.errors import CondcliError, InternalError, OutOfMemory, Stopped, UsageError, is_out_of_memory
from condcli.outpaths import (
    Inputs,
    check_name,
    clash,
    clean_stale_staging,
    existing_ancestor,
    kind,
    make_folders,
    probe,
    refuse_clash,
    regular_or_absent,
    remove_folders,
    shown,
    staging_prefix,
)

Writer = Callable[[Path], list[Path]]  # writes files into the given folder and returns them
MANIFEST = ".condcli-manifest.json"  # what the last run wrote into an --out folder, with each file's hash
BACKUP = ".condcli-old"  # inside the staging folder: the files a write replaces, until it has succeeded
MANIFEST_MAX = 1 << 20  # bytes: a larger manifest is not condcli's and is ignored
REPORT_FILES = ("report.json", "report.html")  # what every --out folder holds


class OutputDir:
    """An --out folder that holds what the last run wrote and nothing stale from condcli.

    Checked when made, before any work: the path is usable (no name too long, no dangling symlink or
    loop, the nearest existing folder takes a new entry for real), and no file the command may write
    there (``names``) is one of ``inputs`` or lies inside a folder the run reads.

    :meth:`write` renders everything into a hidden staging folder inside it, then swaps the files into
    place all or nothing: each file it replaces is kept in the staging folder first and put back when
    any step fails. ``.condcli-manifest.json`` records what was written (with each file's hash); a later
    write into the same folder, by any condcli command, removes the files of the previous manifest that it
    does not write again and that are still byte for byte what condcli wrote (a file the user changed or
    replaced is theirs and stays). So after ``spectrum`` then ``sweep-lambda`` into one folder, it holds
    sweep-lambda's report.json and plot only, never a plot beside a report it does not belong to. Staging
    folders of dead runs (killed while writing) are removed; a live concurrent run's are left alone.

    ``only_own``: a write removes only stale files among its own ``names`` and keeps every other file of
    the previous manifest (still listed in the new one): ``--csv`` replaces the CSV tables of an earlier
    run, never the report, page or plots an ``--out`` run wrote into the same folder.
    """

    def __init__(
        self,
        path: Path,
        names: Sequence[str],
        inputs: Inputs = (),
        param: str = "out",
        *,
        only_own: bool = False,
    ) -> None:
        self.path = path
        self.names = tuple(dict.fromkeys((*names, MANIFEST)))
        self.inputs = tuple(inputs)
        self.only_own = only_own
        # the parameter and its value, marked: the CLI shows its flag (--out D), Python the parameter
        self.what = f"`{param}={shown(path)}`"
        check_name(path, self.what)
        existing = existing_ancestor(path, self.what)
        if not existing.is_dir():
            raise UsageError(
                f"{self.what}: {shown(existing)} is {kind(os.stat(existing).st_mode)}, not a folder",
                "give a folder path",
            )
        for name in self.names:
            target = path / name
            # a symlink to a file is itself replaced (never what it points to); anything else is checked
            if os.path.isdir(target) or not os.path.islink(target):
                regular_or_absent(target, f"{self.what}: {name} there")
            refuse_clash(target, self.inputs, self.what, name)
        probe(existing, self.what)

    def write(self, *writers: Writer) -> list[Path]:
        """Run every writer into a staging folder, then swap the files into the folder; returns their
        paths. Running out of memory on the way is :class:`OutOfMemory` (the folder as it was)."""
        created: list[Path] = []
        staging: Path | None = None
        done = False
        try:
            make_folders(self.path, created)
            clean_stale_staging(self.path)
            with signals_deferred():  # a Ctrl-C or SIGTERM between making it and knowing it would leak it
                staging = Path(tempfile.mkdtemp(prefix=staging_prefix(), dir=self.path))
            made = [f for w in writers for f in w(staging)]
            names = [f.name for f in made]
            unknown = sorted(set(names) - set(self.names)) + [f.name for f in made if f.parent != staging]
            if unknown:
                raise InternalError(f"{self.what}: wrote {unknown}, which the command did not declare")
            stale, kept = self._previous(set(names))
            hashes = {**kept, **{name: _sha256(staging / name) for name in names}}
            manifest = json.dumps({"condcli": {"files": hashes}}, indent=2) + "\n"
            (staging / MANIFEST).write_text(manifest, encoding="utf-8")
            _swap(staging, self.path, [*names, MANIFEST], stale, self.what)
            done = True
            return [self.path / name for name in names]
        except CondcliError:
            raise
        except Exception as e:
            if is_out_of_memory(e):
                _release(e)  # so that removing the staging folder below finds memory again
                raise OutOfMemory(f"writing {self.what}") from e
            if isinstance(e, OSError):
                raise UsageError(
                    f"{self.what}: writing failed ({e.strerror or e})", "check the folder and free space"
                ) from e
            raise
        finally:

            def clean() -> None:
                if staging is not None and not (staging / BACKUP / ".kept").exists():
                    shutil.rmtree(staging, ignore_errors=True)
                if not done:
                    remove_folders(created)

            cleaned_despite_signals(clean)

    def _previous(self, now: set[str]) -> tuple[list[str], dict[str, str]]:
        """The previous manifest's files that this write does not make again and that are still condcli's
        (a regular file with the recorded hash), never an input of this run: (those to remove, those kept
        with their hashes: with ``only_own``, the ones outside :attr:`names`)."""
        recorded = _read_manifest(self.path / MANIFEST)
        stale: list[str] = []
        kept: dict[str, str] = {}
        for name, digest in recorded.items():
            target = self.path / name
            if name in now or name == MANIFEST or not _plain(name) or clash(target, self.inputs):
                continue
            try:
                if stat.S_ISREG(os.lstat(target).st_mode) and _sha256(target) == digest:
                    if self.only_own and name not in self.names:
                        kept[name] = digest
                    else:
                        stale.append(name)
            except OSError:
                continue
        return stale, kept


def _release(error: BaseException) -> None:
    """Free what a failed write holds: its figures and buffers, kept alive by the frames of ``error``'s
    traceback (the frames' locals are cleared; the frames themselves stay, for --debug)."""
    traceback.clear_frames(error.__traceback__)
    gc.collect()


def _plain(name: str) -> bool:
    return (
        name not in ("", ".", "..")
        and os.sep not in name
        and "\0" not in name
        and not name.startswith(".condcli-")
    )


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _read_manifest(path: Path) -> dict[str, str]:
    """name → sha256 of the files the last run wrote; {} when there is no manifest or it is not one."""
    try:
        info = os.lstat(path)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MANIFEST_MAX:
            return {}
        from condcli.parsing import parse_json

        data = parse_json(path.read_bytes().decode("utf-8"), str(path), "")
    except (OSError, UnicodeDecodeError, CondcliError):
        return {}
    files = data.get("condcli", {}).get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict):
        return {}
    return {k: v for k, v in files.items() if isinstance(k, str) and isinstance(v, str)}


def _keep(target: Path, backup: Path) -> None:
    """Keep the file ``target`` as ``backup`` (a hard link, else a copy) before it is replaced."""
    try:
        os.link(target, backup, follow_symlinks=False)
    except OSError:
        shutil.copy2(target, backup, follow_symlinks=False)


@contextmanager
def signals_deferred() -> Iterator[None]:
    """SIGINT and SIGTERM held back while inside (delivered on leaving), in the main thread where the
    platform can; elsewhere nothing is held."""
    import signal
    import threading

    held = {signal.SIGINT, signal.SIGTERM}
    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def cleaned_despite_signals(clean: Callable[[], None]) -> None:
    """Run ``clean`` with SIGINT and SIGTERM held back, and run it whole even where a signal lands in the few
    instructions before they are held (the console script's handler raises where the program is: there it
    would skip the clean-up and leave a staging folder behind); that signal's exception is raised once
    ``clean`` has run. A second signal ends the process at once (condcli/__main__.py)."""
    ran: list[bool] = []
    caught: BaseException | None = None
    while not ran:
        try:
            with signals_deferred():  # a signal now is delivered once the folder is gone, not halfway
                clean()
                ran.append(True)
        except (KeyboardInterrupt, Stopped) as e:
            if ran:  # held back during clean() and delivered after it: clean() ran whole
                raise
            caught = e  # landed before the signals were held: clean() did not run; run it now
    if caught is not None:
        raise caught


def _swap(staging: Path, out: Path, names: Iterable[str], stale: Iterable[str], what: str) -> None:
    """Move ``names`` from ``staging`` into ``out`` and ``stale`` out of it, all or nothing: each file
    replaced or removed is kept in ``staging/.condcli-old`` first and put back when any step fails."""
    backup = staging / BACKUP
    backup.mkdir()
    replaced: list[tuple[str, bool]] = []  # (name, whether a file was there before)
    removed: list[str] = []
    try:
        for name in names:
            target = out / name
            had = os.path.lexists(target)
            if had:
                mode = os.lstat(target).st_mode
                if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):  # it changed since the check
                    raise UsageError(
                        f"{what}: {name} there is {kind(mode)}",
                        "remove it, or give another folder",
                    )
                _keep(target, backup / name)
            os.replace(staging / name, target)
            replaced.append((name, had))
        for name in stale:
            os.replace(out / name, backup / name)
            removed.append(name)
    except BaseException:
        lost = _restore(backup, out, replaced, removed)
        if lost:
            (backup / ".kept").touch()
            raise UsageError(
                f"{what}: writing failed, and {', '.join(lost)} could not be put back",
                f"the old files are in {shown(backup)}",
            ) from None
        raise


def _restore(backup: Path, out: Path, replaced: list[tuple[str, bool]], removed: list[str]) -> list[str]:
    """Undo a partial :func:`_swap`; returns the names it could not put back."""
    lost = []
    for name in reversed(removed):
        try:
            os.replace(backup / name, out / name)
        except OSError:
            lost.append(name)
    for name, had in reversed(replaced):
        try:
            if had:
                os.replace(backup / name, out / name)
            else:
                os.unlink(out / name)
        except OSError:
            lost.append(name)
    return lost
