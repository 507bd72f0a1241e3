"""Channel directories: the current platform and repodata indexing."""

from __future__ import annotations

from pathlib import Path

from solver.channel.errors import ChannelError


def index_channel(channel_dir: Path) -> None:
    """Write repodata.json (and its compressed and sharded forms) for every subdir."""
    import asyncio

    from rattler.index import index_fs

    channel_dir = Path(channel_dir)
    if not channel_dir.is_dir():
        raise ChannelError(f"{channel_dir} is not a directory; build or package into it first")
    (channel_dir / "noarch").mkdir(exist_ok=True)  # every channel needs one, even empty
    asyncio.run(index_fs(channel_dir))


def current_platform() -> str:
    from rattler import Subdir

    return str(Subdir.current())
