"""Where condcli writes: an output path is checked before any work and written whole or not at all.

One concept for every file condcli writes (``junit``, and each file of an ``--out`` folder):

- the path is usable: not empty, no name longer than the file system allows, no dangling symlink or
  symlink loop on the way, the nearest existing folder really takes a new entry (probed by creating and
  removing a staging folder: read-only mounts, /sys and /proc fail here, not after the analysis);
- only regular files are written: a target that exists as a FIFO, a device or a folder is refused, so
  ``/dev/null`` stays a device;
- an output never overwrites what the run reads (:func:`clash`): not the same path once symlinks and
  relative parts are resolved, not the same file (a hard link), not inside a folder the run reads;
- a file is written to a temporary file beside it and moved into place (:func:`write_file`).

Staging and probe folders, and the temporary file of a single file, are named
``.condcli-<host>-<pid>-<start>-<random>`` (:func:`staging_prefix`), so a later write into the same folder
can tell those of a dead process (killed, even by SIGKILL) from a live one's and remove them
(:func:`clean_stale_staging`).
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import shutil
import socket
import stat
import tempfile
from collections.abc import Sequence
from pathlib import Path

from condcli.errors import UsageError, one_line

NAME_MAX = 255  # bytes in one path component (Linux, macOS); pathconf says where it can
PATH_MAX = 4096
STAGING = ".condcli-"
_STAGING_NAME = re.compile(r"^\.condcli-([0-9a-f]{8})-(\d{1,10})-(\d{1,20})-[A-Za-z0-9_]+(\.tmp)?$")

Inputs = Sequence[
    tuple[str, Path]
]  # (how the user named it, e.g. "--baseline"; the path) of what a run reads


def shown(path: Path | str) -> str:
    """``path`` for an error line: control characters escaped, so the error stays one line."""
    return one_line(os.fspath(path))


def _name_max(folder: Path) -> int:
    try:
        return int(os.pathconf(folder, "PC_NAME_MAX"))
    except (OSError, ValueError):
        return NAME_MAX


def check_name(path: Path, what: str) -> None:
    """Refuse an empty path, a path component longer than the file system allows, or an overlong path."""
    raw = os.fspath(path)
    if not raw.strip():
        raise UsageError(f"{what} is empty", "give a path")
    limit = _name_max(Path.cwd())
    for part in Path(raw).parts:
        size = len(os.fsencode(part))
        if size > limit:
            raise UsageError(
                f"{what}: a name in it is {size} bytes long, more than the {limit} a file name can have",
                "shorten that folder or file name",
            )
    if len(os.fsencode(os.path.abspath(raw))) >= PATH_MAX:
        raise UsageError(f"{what}: the path is longer than {PATH_MAX} bytes", "give a shorter path")


def existing_ancestor(path: Path, what: str) -> Path:
    """``path`` or its nearest ancestor that exists (symlinks followed); refuses a dangling symlink or a
    symlink loop on the way."""
    here = Path(os.path.abspath(path))
    loop: Path | None = None
    while True:
        try:
            os.stat(here)
        except OSError as e:
            if e.errno == errno.ELOOP:
                loop = here
            elif loop is not None:
                break
            elif e.errno == errno.ENOENT and os.path.islink(here):
                raise UsageError(
                    f"{what}: {shown(here)} is a symlink to {shown(os.readlink(here))}, which does not exist",
                    "create what it points to, or give another path",
                ) from None
            elif e.errno not in (errno.ENOENT, errno.ENOTDIR):
                raise UsageError(
                    f"{what}: {shown(here)} cannot be reached ({e.strerror})", "give another path"
                ) from None
            if here.parent == here:
                raise UsageError(
                    f"{what}: no part of it exists", "give a path in an existing folder"
                ) from None
            here = here.parent
            continue
        if loop is None:
            return here
        break
    raise UsageError(f"{what}: {shown(loop)} is a symlink loop", "fix the link, or give another path")


def staging_prefix() -> str:
    """``.condcli-<host>-<pid>-<start>-``: this process, so that a later run can tell whether it is alive."""
    host = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]
    return f"{STAGING}{host}-{os.getpid()}-{_start_time(os.getpid())}-"


def _start_time(pid: int) -> int:
    """The process's start time in clock ticks after boot (Linux /proc), 0 where it cannot be read."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
        return int(text.rpartition(")")[2].split()[19])
    except (OSError, ValueError, IndexError):
        return 0


def _alive(pid: int, start: int) -> bool:
    """Whether process ``pid`` that started at ``start`` is still running (a reused pid is not it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, another user's
    except (OverflowError, ValueError):
        return False
    now = _start_time(pid)
    return start == 0 or now == 0 or now == start


def clean_stale_staging(folder: Path) -> list[Path]:
    """Remove the staging folders and temporary files in ``folder`` that a dead condcli process of this
    host left behind (killed while writing); a live run's, another host's and anything else stay."""
    host = staging_prefix()[len(STAGING) :].split("-")[0]
    removed = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []
    for entry in entries:
        match = _STAGING_NAME.match(entry.name)
        if match is None or match.group(1) != host or entry.is_symlink():
            continue
        pid, start = int(match.group(2)), int(match.group(3))
        if pid == os.getpid() or _alive(pid, start):
            continue
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        elif entry.is_file(follow_symlinks=False):
            try:
                os.unlink(entry.path)
            except OSError:
                continue
        else:
            continue
        removed.append(Path(entry.path))
    return removed


def probe(folder: Path, what: str) -> None:
    """Refuse ``folder`` unless a new entry can really be made there (create and remove a staging folder)."""
    if not folder.is_dir():
        raise UsageError(f"{what}: {shown(folder)} is not a folder", "give a path in a folder")
    try:
        made = tempfile.mkdtemp(prefix=staging_prefix(), dir=folder)
    except OSError as e:
        raise UsageError(
            f"{what}: cannot write in {shown(folder)} ({e.strerror})", "give a folder you can write to"
        ) from None
    os.rmdir(made)


def clash(target: Path, inputs: Inputs) -> tuple[str, Path, bool] | None:
    """The input that writing ``target`` would overwrite or write into: (its label, its path, whether
    ``target`` lies inside it), else None. Paths are compared resolved (symlinks, ``..``) and by file
    identity (a hard link); an input need not exist (``junit=pyproject.toml`` must not create the config)."""
    real = os.path.realpath(target)
    for label, path in inputs:
        source = os.path.realpath(path)
        if real == source:
            return label, path, False
        try:
            if os.path.samefile(target, path):
                return label, path, False
        except OSError:
            pass
        if os.path.isdir(source) and real.startswith(source.rstrip(os.sep) + os.sep):
            return label, path, True
    return None


def refuse_clash(target: Path, inputs: Inputs, what: str, name: str | None = None) -> None:
    """Raise :class:`UsageError` when writing ``target`` would touch an input (see :func:`clash`);
    ``name``: the file written into the folder ``what`` names."""
    found = clash(target, inputs)
    if found is None:
        return
    label, path, inside = found
    read = f"{label} {shown(path)}, which this run reads"
    if inside:
        raise UsageError(f"{what} lies inside {read}", "write the output somewhere else")
    where = f"{what}: writing {name} there" if name else what
    raise UsageError(f"{where} would overwrite {read}", "write the output somewhere else")


def kind(mode: int) -> str:
    """What a file of ``mode`` is, in words ("a file", "a FIFO", "a device", …)."""
    if stat.S_ISREG(mode):
        return "a file"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a special file"


def regular_or_absent(path: Path, what: str) -> None:
    """Refuse a ``path`` that exists (symlinks followed) and is not a regular file: condcli replaces only
    regular files, never a device, a FIFO or a folder."""
    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise UsageError(f"{what} is a symlink loop", "fix the link, or give another path") from None
        if e.errno == errno.ENOENT and os.path.islink(path):
            raise UsageError(
                f"{what} is a symlink to {shown(os.readlink(path))}, which does not exist",
                "create what it points to, or give another path",
            ) from None
        return
    if not stat.S_ISREG(mode):
        raise UsageError(f"{what} is {kind(mode)}", "condcli writes only regular files: give a file path")


def check_file_target(path: Path, what: str, inputs: Inputs = ()) -> None:
    """Refuse, before any work, a file path that cannot or must not be written (see the module docstring)."""
    check_name(path, what)
    regular_or_absent(path, what)
    folder = existing_ancestor(Path(os.path.abspath(path)).parent, what)
    if not folder.is_dir():
        raise UsageError(f"{what}: {shown(folder)} is a file, not a folder", "give a path in a folder")
    refuse_clash(path, inputs, what)
    probe(folder, what)


def make_folders(folder: Path, created: list[Path]) -> None:
    """``mkdir -p folder``, inserting each folder it creates at the front of ``created`` (deepest first,
    for :func:`remove_folders`, also when it fails half-way)."""
    missing = []
    here = folder
    while not os.path.lexists(here) and here.parent != here:
        missing.append(here)
        here = here.parent
    for made in reversed(missing):
        os.mkdir(made)
        created.insert(0, made)


def remove_folders(created: list[Path]) -> None:
    """Remove folders :func:`make_folders` created, where they are still empty."""
    for folder in created:
        try:
            os.rmdir(folder)
        except OSError:
            return


def write_file(path: Path, data: bytes, what: str) -> None:
    """Write ``data`` to ``path`` whole or not at all: a temporary file in the same folder, then
    ``os.replace``, which replaces a symlink itself, never what it points to (so no write can reach a
    device through one). A missing folder is made (and removed again when writing fails); a target that
    is not a regular file (symlinks followed) is refused."""
    target = path
    regular_or_absent(target, what)
    created: list[Path] = []
    tmp: str | None = None
    done = False
    try:
        make_folders(target.parent, created)
        clean_stale_staging(target.parent)
        fd, tmp = tempfile.mkstemp(prefix=staging_prefix(), suffix=".tmp", dir=target.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes it private; give it a normal file's mode
        regular_or_absent(target, what)  # again: it may have become a FIFO meanwhile
        os.replace(tmp, target)
        done = True
    except OSError as e:
        raise UsageError(
            f"{what}: writing failed ({e.strerror or e})", "check the folder and free space"
        ) from e
    finally:
        if not done:
            if tmp is not None and os.path.lexists(tmp):
                os.unlink(tmp)
            remove_folders(created)
