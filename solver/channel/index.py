"""Channel directories: the current platform and repodata indexing."""

from __future__ import annotations

from pathlib import Path

from solver import worker
from solver.channel.errors import ChannelError
from solver.errors import WorkerError

# Indexing a channel of a few hundred packages takes seconds; this bounds a stuck one.
INDEX_TIMEOUT_S = 600


def index_channel(channel_dir: Path) -> None:
    """Write repodata.json (and its compressed and sharded forms) for every subdir. py-rattler's
    indexer runs in a child interpreter (solver.worker): after it, the interpreter crashes on exit
    in a good part of the runs (rattler.md G4), which made a successful command exit 134 or 139."""
    channel_dir = Path(channel_dir)
    if not channel_dir.is_dir():
        raise ChannelError(f"{channel_dir} is not a directory; build or package into it first")
    (channel_dir / "noarch").mkdir(exist_ok=True)  # every channel needs one, even empty
    try:
        worker.call(
            "solver.channel.index:index_in_this_process",
            {"channel_dir": str(channel_dir.resolve())},
            INDEX_TIMEOUT_S,
            what=f"indexing {channel_dir}",
        )
    except WorkerError as exc:
        raise ChannelError(str(exc)) from None


def index_in_this_process(channel_dir: str) -> None:
    """The indexing itself; run by index_channel in a child interpreter."""
    import asyncio

    from rattler.index import index_fs

    asyncio.run(index_fs(Path(channel_dir)))


def current_platform() -> str:
    from rattler import Subdir

    return str(Subdir.current())
