"""Writing files so that nothing is lost and nothing is half-written.

Every file LayerLab writes (models, outputs, reports, exports) goes through :func:`atomic_write`: the content
is written to a temporary file in the target's folder, synced, renamed over the target, and the folder is
synced. A symbolic link is followed (the file it points to is updated, the link stays); a read-only target is
refused; temporary files left by an earlier write of the same file that was killed are removed; every error
names the target, never the temporary file."""
from __future__ import annotations

import contextlib
import os
import secrets
import shutil
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from engine.errors import LayerLabError


class OutputError(LayerLabError):
    """A file or folder cannot be written where the user asked (names the path and why)."""


def _temp_prefix(target: Path) -> str:
    return f".{target.name}."


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return pid > 0
    return True


def clean_stray_temps(target: str | os.PathLike[str]) -> list[Path]:
    """Remove temporary files of ``target`` left behind by writes that were killed (their process is gone,
    or they predate the process id in the name). Returns what was removed."""
    t = Path(target)
    removed: list[Path] = []
    try:
        entries = list(t.parent.iterdir()) if str(t.parent) else list(Path(".").iterdir())
    except OSError:
        return removed
    prefix = _temp_prefix(t)
    for e in entries:
        name = e.name
        if not name.startswith(prefix) or ".tmp" not in name[len(prefix):]:
            continue
        head = name[len(prefix):].split("-", 1)[0]
        if head.isdigit() and head.isascii() and len(head) < 10 and _pid_alive(int(head)):
            continue  # a live process (this one included: another thread) is writing it now
        with contextlib.suppress(OSError):
            if e.is_file() and not e.is_symlink():
                e.unlink()
                removed.append(e)
    return removed


def safe_stem(name: str, default: str = "network") -> str:
    """A file name stem made from ``name`` (a network name, say) that cannot leave the folder it is put in:
    letters, digits, '_', '-' and '.' only, no leading dot, at most 100 characters."""
    stem = "".join(c if (c.isascii() and c.isalnum()) or c in "_-." else "_" for c in name)[:100].lstrip(".")
    return stem or default


def fsync_folder(folder: str | os.PathLike[str]) -> None:
    """Make a rename in ``folder`` durable (where the file system supports syncing a folder)."""
    try:
        fd = os.open(str(folder) or ".", os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def resolve_target(path: str | os.PathLike[str]) -> Path:
    """The file a write to ``path`` must replace: a symbolic link's target (links stay links)."""
    p = Path(path)
    if p.is_symlink():
        return Path(os.path.realpath(p))
    return p


def check_output_file(path: str | os.PathLike[str], what: str = "output") -> Path:
    """Check that ``path`` can be written as a file (no folder of that name, its parent a writable folder or
    creatable); returns the resolved target. Raises OutputError naming the path."""
    p = resolve_target(path)
    if p.is_dir():
        raise OutputError(f"{path}: is a folder; the {what} must be a file path")
    if p.exists() and not p.is_file():  # a device, a pipe, a socket: never replaced by a regular file
        raise OutputError(f"{path}: is not a regular file; the {what} must be a file path")
    if p.is_file() and (not os.access(p, os.W_OK) or not p.stat().st_mode & 0o222):  # read-only even for root
        raise OutputError(f"{path}: the file is read-only; the {what} was not written")
    parent = p.parent
    while str(parent) and not parent.exists():
        if parent.is_symlink():
            raise OutputError(f"{path}: {parent} is a broken link")
        if parent == parent.parent:
            break
        parent = parent.parent
    if parent.exists() and not parent.is_dir():
        raise OutputError(f"{path}: {parent} is a file, not a folder")
    if parent.exists() and not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"{path}: the folder {parent} is not writable")
    return p


def check_output_folder(path: str | os.PathLike[str], what: str = "output folder") -> Path:
    """Check that ``path`` can be a folder to write into (not a file; creatable). Raises OutputError."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise OutputError(f"{path}: is a file; the {what} must be a folder")
    check_output_file(p / "_", what)
    return p


def make_folder(path: str | os.PathLike[str], what: str = "output folder") -> Path:
    """Create ``path`` (and its parents) as a folder; errors name the path."""
    p = check_output_folder(path, what)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"{path}: cannot create the {what}: {exc.strerror or exc}") from None
    return p


def refuse_overwrite(output: str | os.PathLike[str], sources: Iterable[str | os.PathLike[str] | None],
                     what: str = "source model") -> None:
    """Refuse to write ``output`` when it is (or links to) one of ``sources``."""
    out = Path(output)
    for src in sources:
        if not src:
            continue
        try:
            same = out.exists() and os.path.samefile(out, src)
        except OSError:
            same = False
        if same:
            raise OutputError(f"{output}: this is the {what} ({src}); choose another output path")


class PendingFile:
    """A file being written under a temporary name in the target's folder (same extension, for writers that
    choose the format by it): :meth:`commit` syncs it and renames it over the target (a symbolic link's target),
    then syncs the folder; :meth:`discard` removes it. Temporary files of killed writes of the same target are
    removed first. Errors name the target, never the temporary file."""

    def __init__(self, path: str | os.PathLike[str], what: str = "file") -> None:
        self.path, self.what = path, what
        self.target = check_output_file(path, what)
        try:
            self.target.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputError(f"{path}: cannot create the folder {self.target.parent}: {exc.strerror or exc}") from None
        clean_stray_temps(self.target)
        self.temp = self.target.parent / (f"{_temp_prefix(self.target)}{os.getpid()}-{secrets.token_hex(4)}"
                                          f".tmp{self.target.suffix}")

    def commit(self, mode: int | None = None) -> Path:
        """Move the written temporary file over the target (keeping the target's permissions)."""
        try:
            if mode is None:
                try:
                    mode = self.target.stat().st_mode & 0o777
                except FileNotFoundError:
                    mode = new_file_mode()
            if not self.temp.is_file():
                raise OutputError(f"{self.path}: the {self.what} could not be written")
            os.chmod(self.temp, mode)
            with open(self.temp, "rb") as fh:
                os.fsync(fh.fileno())
            os.replace(self.temp, self.target)
        except OSError as exc:
            self.discard()
            raise OutputError(f"{self.path}: cannot write the {self.what}: {exc.strerror or exc}") from None
        fsync_folder(self.target.parent)
        return self.target

    def discard(self) -> None:
        """Remove the temporary file (nothing happens to the target)."""
        with contextlib.suppress(OSError):
            if self.temp.exists():
                self.temp.unlink()


def new_file_mode() -> int:
    """The permissions a new file gets from ``open`` here (0o666 less the umask): what a file written through a
    temporary one (created 0o600) is given before it is renamed into place."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def atomic_write(path: str | os.PathLike[str], write: Callable[[Path], object], what: str = "file",
                 mode: int | None = None) -> Path:
    """Write ``path`` atomically: ``write(temp)`` writes the content to a temporary path in the same folder
    (see :class:`PendingFile`), which is then synced and renamed over the target. Returns the target written.
    Errors name ``path``; on any failure the temporary file is removed and the target is unchanged."""
    pending = PendingFile(path, what)
    try:
        write(pending.temp)
        return pending.commit(mode)
    except OSError as exc:
        raise OutputError(f"{path}: cannot write the {what}: {exc.strerror or exc}") from None
    finally:
        pending.discard()


def atomic_write_text(path: str | os.PathLike[str], text: str, what: str = "file") -> Path:
    """:func:`atomic_write` of UTF-8 text."""
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"), what)


@contextlib.contextmanager
def staged_folder(path: str | os.PathLike[str], what: str = "output folder") -> Iterator[Path]:
    """Build a folder's content in a temporary sibling; on success it replaces ``path`` (an older folder of
    that name is removed only then); on failure the temporary folder is removed and ``path`` is unchanged."""
    target = resolve_target(check_output_folder(path, what))  # a link to a folder stays a link
    parent = target.parent
    make_folder(parent, "folder")
    stage = parent / f"{_temp_prefix(target)}{os.getpid()}-{secrets.token_hex(4)}.tmp"
    try:
        stage.mkdir()
        yield stage
        old = None
        if target.exists():
            old = parent / f"{_temp_prefix(target)}{os.getpid()}-{secrets.token_hex(4)}.tmp-old"
            os.replace(target, old)
        os.replace(stage, target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        fsync_folder(parent)
    except OSError as exc:
        raise OutputError(f"{path}: cannot write the {what}: {exc.strerror or exc}") from None
    finally:
        if stage.exists():
            shutil.rmtree(stage, ignore_errors=True)
