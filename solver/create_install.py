"""The child's side of `solver make-env --create`: install a solved lock file into a prefix with
py-rattler, reporting progress as it goes.

Run through solver.worker (py-rattler can crash while an interpreter exits, reference rattler.md
G4), so its result comes back as the worker's result line; the progress comes before it, one line
per event on stdout, each starting with PROGRESS_MARKER and followed by a JSON object:

    {"event": "plan", "packages": 20, "download": 17, "bytes": 152909, "cache": "/.../pkgs"}
    {"event": "downloaded", "name": "pytorch", "bytes": 45000000, "done": 47000000}
    {"event": "bytes", "bytes": 1200000}          (bytes downloaded so far, at most 10 a second)
    {"event": "linked", "name": "pytorch"}

    install_prefix(lock="/tmp/x/conda-meta/solver/rattler.lock", platform="linux-64",
                   prefix="/tmp/.env.creating-1", final_prefix="/tmp/env", cache_dirs=["/pkgs"])
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time

from solver.errors import SolverError

PROGRESS_MARKER = "solver-create-progress: "
_BYTES_EVERY_S = 0.1


def emit(event: str, **fields) -> None:
    """One progress line on stdout (the parent reads them as they come)."""
    sys.stdout.write(PROGRESS_MARKER + json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()


class Reporter:
    """py-rattler's InstallerReporter callbacks -> progress lines. The tokens py-rattler hands back
    are indexes into our own lists, so a download and a link can be named."""

    def __init__(self):
        self._lock = threading.Lock()
        self._cache_names: list[str] = []  # populate-cache token -> package name
        self._downloads: list[list] = []  # download token -> [name, bytes so far, total]
        self._links: list[str] = []  # link token -> package name
        self._last_bytes_event = 0.0

    def on_populate_cache_start(self, operation: int, package_name: str) -> int:
        with self._lock:
            self._cache_names.append(package_name)
            return len(self._cache_names) - 1

    def on_download_start(self, cache_entry: int) -> int:
        with self._lock:
            name = self._cache_names[cache_entry] if 0 <= cache_entry < len(self._cache_names) else "?"
            self._downloads.append([name, 0, None])
            return len(self._downloads) - 1

    def on_download_progress(self, download_idx: int, progress: int, total: int | None) -> None:
        with self._lock:
            self._downloads[download_idx][1:] = [progress, total]
            now = time.monotonic()
            if now - self._last_bytes_event < _BYTES_EVERY_S:
                return
            self._last_bytes_event = now
            done = sum(d[1] for d in self._downloads)
        emit("bytes", bytes=done)

    def on_download_completed(self, download_idx: int) -> None:
        with self._lock:
            download = self._downloads[download_idx]
            name, size = download[0], download[2] or download[1]
            download[1] = size
            done = sum(d[1] for d in self._downloads)
        emit("downloaded", name=name, bytes=size, done=done)

    def on_link_start(self, operation: int, package_name: str) -> int:
        with self._lock:
            self._links.append(package_name)
            return len(self._links) - 1

    def on_link_complete(self, index: int) -> None:
        emit("linked", name=self._links[index] if 0 <= index < len(self._links) else "?")


def install_prefix(lock: str, platform: str, prefix: str, final_prefix: str, cache_dirs: list[str]) -> dict:
    """Install the lock file's packages for `platform` into `prefix`, with `final_prefix` written
    into the files (the prefix is renamed there once it is checked). Raises SolverError."""
    import asyncio

    return asyncio.run(_install(lock, platform, prefix, final_prefix, cache_dirs))


async def _install(lock: str, platform: str, prefix: str, final_prefix: str, cache_dirs: list[str]) -> dict:
    from pathlib import Path

    from rattler import LockFile, PackageCache, install

    lock_file = LockFile.from_path(Path(lock))
    # A platform object taken from the lock file: one built here makes py-rattler panic (G6).
    lock_platform = {p.name: p for p in lock_file.platforms()}[platform]
    records = lock_file.default_environment().conda_repodata_records_for_platform(lock_platform)
    cache = PackageCache.new_layered([Path(d) for d in cache_dirs])
    index = await cache.index()
    missing = [r for r in records if not index.contains_record(r)]
    writable = cache.first_writable()
    emit(
        "plan",
        packages=len(records),
        download=len(missing),
        bytes=sum(r.size or 0 for r in missing),
        cache=str(writable) if writable else cache_dirs[0],
    )
    try:
        await install(
            records,
            prefix,
            package_cache=cache,
            reporter=Reporter(),
            show_progress=False,
            alternative_target_prefix=final_prefix,
        )
    except Exception as exc:  # InstallerError and friends: one line that names the cause
        raise SolverError(describe_install_failure(str(exc), prefix, cache_dirs[0])) from None
    return {"packages": len(records), "downloaded": len(missing)}


def describe_install_failure(message: str, prefix: str, cache: str) -> str:
    """py-rattler's multi-line install error -> one line: what failed, why, and the fix."""
    text = message.lower()
    lines = [line.strip().removeprefix("Caused by:").strip() for line in message.splitlines() if line.strip()]
    cause = re.sub(r"\s*for url \(\S+?\)", "", lines[-1] if lines else message)
    if "no space left" in text or "os error 28" in text or "disk quota" in text or "os error 122" in text:
        return (
            f"the disk is full ({cause}) while installing into {prefix} with the package cache {cache}; "
            "free some space, or put the cache on another disk with CONDA_PKGS_DIRS=/path/with/room"
        )
    fetched = re.search(r"failed to fetch (\S+)", message)
    url = re.search(r"url \((\S+?)\)", message)
    if fetched or url:
        what = url.group(1) if url else fetched.group(1)
        return (
            f"downloading {what} failed ({cause}); check the network (and the proxy, or SSL_CERT_FILE "
            "for a re-signing proxy) and that the channel still holds the package, then run the command again"
        )
    if "permission denied" in text or "os error 13" in text:
        return (
            f"permission denied while installing ({cause}); the package cache {cache} and the "
            "environment's directory must be writable (set CONDA_PKGS_DIRS to a cache you own)"
        )
    return f"the install failed: {' '.join(lines) or message}"
