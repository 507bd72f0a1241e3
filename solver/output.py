"""Write what a command produces (`-o`, `--explicit`, `--lock`, standard output) without losing
anything the user had.

- A regular file (or a new one) is written to a temporary file beside it and renamed over it, so it
  is never left half written. A new file gets the umask's permissions, a replaced one keeps its mode
  (and owner, when allowed).
- A symlink is written through: the file it points to is replaced, the link stays.
- A special file (/dev/null, a FIFO, a terminal) is opened and written to, never replaced. A FIFO
  nobody reads is an error, not a hang.
- A name of one of this process's own descriptors (/dev/stdout, /dev/stderr, /dev/fd/N,
  /proc/self/fd/N, `>(cmd)`, or a symlink to one) is written through that open descriptor, whatever
  it is: `>> log` appends, and what the shell wrote around the command stays where it was.
- `check_destinations` runs before any work: an empty name, a directory, or two flags naming one
  file are usage errors. `write_files` stages every file first and writes none if one cannot be
  staged; if a later step fails, the error says exactly which files were written.
- Messages name the path the user gave, never a temporary file, and the cause with its fix: a
  missing directory (the outermost one), a file used as a directory, no permission or a read-only
  file system where the temporary file is created, a full disk, a directory that takes no new
  files (/proc, /sys).

    check_destinations([Destination("-o", "env.yml"), Destination("--lock", "env.lock")])
    written = write_files([(Destination("-o", "env.yml"), text), ...])   # -> ["env.yml", ...]
    write_stdout(text)
"""

from __future__ import annotations

import argparse
import errno
import os
import re
import secrets
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

from solver.errors import OutputError, UsageError


@dataclass(frozen=True)
class Destination:
    flag: str  # the flag that named it ("-o", "--explicit", "--lock"), for messages
    path: str  # as the user typed it


def path_argument(text: str) -> Path:
    """argparse `type` of a path flag: an empty name would be taken as the current directory (an
    index, a build or a wheel landing there), so it is a usage error, as is a NUL character."""
    if text == "":
        raise argparse.ArgumentTypeError("needs a path, not an empty string")
    if "\0" in text:
        raise argparse.ArgumentTypeError(f"{text!r}: a path cannot contain a NUL character")
    return Path(text)


def text_argument(text: str) -> str:
    """argparse `type` of a name or URL flag (--channel, --owner): not empty, not blank."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is empty; give a value")
    return text


def _identity(path: str) -> tuple:
    """What makes two paths the same file: device and inode when it exists, else the resolved path."""
    try:
        st = os.stat(path)
        return ("inode", st.st_dev, st.st_ino)
    except OSError:
        return ("path", os.path.normcase(os.path.realpath(path)))


def check_destinations(destinations: list[Destination]) -> None:
    """Usage errors in the output paths, found before anything is computed or written."""
    seen: dict[tuple, Destination] = {}
    for dest in destinations:
        if dest.path == "":
            raise UsageError(f"{dest.flag} needs a file name, not an empty string.")
        if "\0" in dest.path:
            raise UsageError(f"{dest.flag} {dest.path!r}: a file name cannot contain a NUL character.")
        if os.path.isdir(dest.path):
            raise UsageError(f"{dest.flag} {dest.path} is a directory; give the name of a file to write.")
        key = _identity(dest.path)
        if key in seen:
            first = seen[key]
            same = dest.path if dest.path == first.path else f"{first.path} and {dest.path}"
            raise UsageError(
                f"{first.flag} and {dest.flag} both name {same}, so one would overwrite the other; "
                "give each its own file."
            )
        seen[key] = dest


def _strerror(exc: OSError) -> str:
    if exc.strerror:
        return exc.strerror
    return os.strerror(exc.errno) if exc.errno else str(exc)


def _first_non_directory(path: str) -> str | None:
    """The first leading part of `path` that exists and is not a directory (ENOTDIR's cause)."""
    parts = os.path.normpath(os.path.abspath(path)).split(os.sep)
    for end in range(2, len(parts)):
        prefix = os.sep.join(parts[:end]) or os.sep
        if os.path.lexists(prefix) and not os.path.isdir(prefix):
            return prefix
    return None


def _missing_directory(directory: str) -> str | None:
    """The outermost folder of `directory` that does not exist, or None when it all exists."""
    missing = None
    current = os.path.abspath(directory)
    while not os.path.isdir(current):
        missing = current
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    return missing


def _cannot(dest: Destination, exc: OSError, creating_in: str | None = None) -> OutputError:
    """The OutputError for `exc`, naming its cause and the fix. `creating_in`: the directory in which
    a temporary file was being created (the file is written beside its target, then renamed)."""
    reason, path, code = _strerror(exc), dest.path, exc.errno
    where = creating_in or "."
    if code in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT):
        return OutputError(f"cannot write {path}: {reason}", "free some space or choose another place")
    if code == errno.EROFS:
        return OutputError(
            f"cannot write {path}: {reason} (its directory {where} is mounted read-only)"
            if creating_in is not None
            else f"cannot write {path}: {reason}",
            "choose a path on a writable file system",
        )
    if code in (errno.EACCES, errno.EPERM):
        if creating_in is not None:
            return OutputError(
                f"cannot write {path}: {reason} creating a file in {where} (the file is written beside "
                "its target and renamed over it)",
                f"choose a directory you may write to, or get write permission on {where}",
            )
        return OutputError(f"cannot write {path}: {reason}", "choose a path you may write to")
    if code == errno.ENOTDIR:
        blocker = _first_non_directory(creating_in if creating_in is not None else path)
        return OutputError(
            f"cannot write {path}: {reason}" + (f" ({blocker} is not a directory)" if blocker else ""),
            "fix the path",
        )
    if code == errno.EISDIR:
        return OutputError(f"cannot write {path}: it is a directory", "give the name of a file to write")
    if code == errno.ENAMETOOLONG:
        return OutputError(f"cannot write {path}: {reason}", "choose a shorter name")
    if code == errno.ELOOP:
        return OutputError(f"cannot write {path}: {reason}", "fix the symbolic link it goes through")
    if code == errno.ENOENT:
        missing = _missing_directory(creating_in if creating_in is not None else os.path.dirname(path) or ".")
        if missing is not None:
            return OutputError(
                f"cannot write {path}: {reason} (the directory {missing} does not exist)",
                "create it first or fix the path",
            )
        if creating_in is not None:
            return OutputError(
                f"cannot write {path}: {where} exists, but no file can be created in it ({reason}; "
                "a virtual file system such as /proc or /sys)",
                "choose a path on an ordinary file system",
            )
    return OutputError(f"cannot write {path}: {reason}")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


# Names of a process's descriptors: /dev/fd/N (a directory of its own on macOS and the BSDs, a
# symlink to /proc/self/fd on Linux) and /proc/PID/fd/N, /proc/PID/task/TID/fd/N.
_FD_NAME = re.compile(r"^/(?:dev/fd|proc/(self|thread-self|\d+)(?:/task/\d+)?/fd)/(\d+)$")
_STANDARD = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}


def _fd_of_name(path: str) -> int | None:
    if path in _STANDARD:
        return _STANDARD[path]
    match = _FD_NAME.match(path)
    if match is None:
        return None
    owner = match.group(1)
    if owner is not None and owner not in ("self", "thread-self") and int(owner) != os.getpid():
        return None  # another process's descriptor: an ordinary path here
    return int(match.group(2))


def own_descriptor(path: str) -> int | None:
    """The descriptor number when `path` names one of this process's open files (directly or
    through symlinks), else None. Opening such a name would start a new open file (offset 0, no
    O_APPEND on Linux), and renaming over it would replace the file the shell opened."""
    if os.name != "posix":
        return None
    current = os.path.normpath(os.path.abspath(path))
    for _ in range(40):  # the kernel's own limit on a chain of symlinks
        fd = _fd_of_name(current)
        if fd is not None:
            return fd
        directory, name = os.path.split(current)
        resolved = os.path.join(os.path.realpath(directory), name)
        fd = _fd_of_name(resolved)
        if fd is not None:
            return fd
        try:
            link = os.readlink(resolved)
        except OSError:
            return None  # not a symlink, or not there: an ordinary path
        current = os.path.normpath(os.path.join(os.path.dirname(resolved), link))
    return None


class _Staged:
    """A file ready to be committed: a temporary file to rename, or a special file to write."""

    def __init__(self, dest: Destination, data: bytes):
        self.dest = dest
        self.data = data
        self.temp: str | None = None
        self.target = dest.path
        self.fd = own_descriptor(dest.path)
        if self.fd is not None:
            self.special = True
            self._check_descriptor()
            return
        try:
            st = os.stat(dest.path)  # follows symlinks, including /dev/fd/N and /proc/self/fd/N
        except FileNotFoundError:
            st = None
        except OSError as exc:
            raise _cannot(dest, exc) from None
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise OutputError(f"cannot write {dest.path}: it is a directory")
        self.special = st is not None and not stat.S_ISREG(st.st_mode)
        if self.special:
            if not os.access(dest.path, os.W_OK):
                raise _cannot(dest, PermissionError(errno.EACCES, os.strerror(errno.EACCES)))
            return
        # A regular file, or a new one: write through symlinks to the file they name.
        self.target = os.path.realpath(dest.path) if os.path.islink(dest.path) else dest.path
        self._write_temp(st)

    def _check_descriptor(self) -> None:
        """The descriptor must be open, and open for writing (a check, so that nothing is renamed
        before a write that cannot succeed)."""
        try:
            st = os.fstat(self.fd)
        except OSError:
            raise OutputError(
                f"cannot write {self.dest.path}: file descriptor {self.fd} is not open",
                f"open it in the shell ({self.fd}> FILE), or name a file",
            ) from None
        if stat.S_ISDIR(st.st_mode):
            raise OutputError(f"cannot write {self.dest.path}: it is a directory")
        try:
            import fcntl

            readonly = fcntl.fcntl(self.fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY
        except (ImportError, OSError):
            readonly = False
        if readonly:
            raise OutputError(
                f"cannot write {self.dest.path}: file descriptor {self.fd} is open for reading only",
                "name a file, or a descriptor opened for writing",
            )

    def _write_temp(self, old: os.stat_result | None) -> None:
        directory, name = os.path.split(self.target)
        temp = os.path.join(directory, f".{name}.{secrets.token_hex(4)}.tmp")
        try:
            # 0o666 through the umask: a new file gets the permissions any program would give it.
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
        except OSError as exc:
            raise _cannot(self.dest, exc, creating_in=directory or ".") from None
        self.temp = temp
        try:
            try:
                _write_all(fd, self.data)
                os.fsync(fd)
            finally:
                os.close(fd)
            if old is not None:
                os.chmod(temp, stat.S_IMODE(old.st_mode))
                if hasattr(os, "chown") and (old.st_uid, old.st_gid) != (os.getuid(), os.getgid()):
                    try:
                        os.chown(temp, old.st_uid, old.st_gid)
                    except OSError:
                        pass  # only root may give a file away; the content is what matters
        except OSError as exc:
            self.discard()
            raise _cannot(self.dest, exc) from None

    def commit(self) -> None:
        if self.fd is not None:
            self._write_descriptor()
        elif self.special:
            self._write_special()
        else:
            os.replace(self.temp, self.target)
            self.temp = None

    def _write_descriptor(self) -> None:
        """Write through the open descriptor, after whatever Python buffered for it."""
        for stream in (sys.stdout, sys.stderr):
            try:
                if stream is not None and stream.fileno() == self.fd:
                    stream.flush()
            except (OSError, ValueError, AttributeError):
                pass
        try:
            _write_all(self.fd, self.data)
        except OSError as exc:
            raise _cannot(self.dest, exc) from None

    def _write_special(self) -> None:
        path = self.dest.path
        try:
            st = os.stat(path)
            flags = os.O_WRONLY | getattr(os, "O_BINARY", 0)
            if stat.S_ISFIFO(st.st_mode) and hasattr(os, "O_NONBLOCK"):
                try:
                    fd = os.open(path, flags | os.O_NONBLOCK)  # ENXIO at once when nobody reads it
                except OSError as exc:
                    if exc.errno == errno.ENXIO:
                        raise OutputError(
                            f"cannot write {path}: no process is reading this FIFO", "start its reader first"
                        ) from None
                    raise
                os.set_blocking(fd, True)
            else:
                fd = os.open(path, flags)
            try:
                _write_all(fd, self.data)
            finally:
                os.close(fd)
        except OSError as exc:
            raise _cannot(self.dest, exc) from None

    def discard(self) -> None:
        if self.temp is not None:
            try:
                os.unlink(self.temp)
            except OSError:
                pass
            self.temp = None


def write_files(items: list[tuple[Destination, str]]) -> list[str]:
    """Write every file or none. Returns the paths written, as the user named them.

    Raises OutputError naming the file that failed and, when some were already written, which."""
    staged: list[_Staged] = []
    try:
        for dest, text in items:
            staged.append(_Staged(dest, text.encode("utf-8")))
    except OutputError as exc:
        for item in staged:
            item.discard()
        raise OutputError(f"{exc}; nothing was written", exc.fix) from None
    # Renames first (they do not fail once the temp file exists), then the special files.
    ordered = [s for s in staged if not s.special] + [s for s in staged if s.special]
    written: list[str] = []
    for position, item in enumerate(ordered):
        try:
            item.commit()
        except (OSError, OutputError) as exc:
            for rest in ordered[position:]:
                rest.discard()
            error = exc if isinstance(exc, OutputError) else _cannot(item.dest, exc)
            done = f"; written: {', '.join(written)}" if written else "; nothing was written"
            raise OutputError(f"{error}{done}", error.fix) from None
        written.append(item.dest.path)
    return written


def write_atomic(path: str | os.PathLike, text: str) -> None:
    """One file, with the same guarantees (for scripts that write a single file)."""
    write_files([(Destination("file", os.fspath(path)), text)])


def write_stdout(text: str, alternative: str = "") -> None:
    """Write to standard output as UTF-8 whatever the locale, and flush; OutputError if it is closed,
    full or a broken pipe. Text UTF-8 cannot hold (a command-line argument that was not UTF-8
    arrives as lone surrogates) is written escaped (backslashreplace), never mistaken for a closed
    stream. `alternative` completes the closed-stream advice for commands that have one ("pass -o
    FILE")."""
    fix = "redirect it to a file" + (f", or {alternative}" if alternative else "")
    stream = sys.stdout
    if stream is None:
        raise OutputError("standard output is closed", fix)
    try:
        stream.flush()
        binary = getattr(stream, "buffer", None)
        if binary is not None:
            binary.write(text.encode("utf-8", "backslashreplace"))
            binary.flush()
        else:
            encoding = getattr(stream, "encoding", None) or "utf-8"
            stream.write(text.encode(encoding, "backslashreplace").decode(encoding, "replace"))
            stream.flush()
    except BrokenPipeError:
        raise OutputError("standard output was closed before everything was written (broken pipe)") from None
    except OSError as exc:
        raise OutputError(f"cannot write to standard output: {_strerror(exc)}") from None
    except ValueError:
        if not getattr(stream, "closed", True):
            raise  # not "I/O operation on closed file": a bug, reported as one
        raise OutputError("standard output is closed", fix) from None


def silence_stdout() -> None:
    """After standard output failed: point it at the null device so that the interpreter's final
    flush cannot print a second error."""
    if sys.stdout is None:
        return
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError, AttributeError):
        pass
