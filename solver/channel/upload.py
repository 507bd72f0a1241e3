"""Upload a channel directory's packages to anaconda.org."""

from __future__ import annotations

from pathlib import Path

from solver.channel.errors import ChannelError, require_rattler_build


def upload_channel(channel_dir: Path, owner: str, api_key: str | None) -> list[Path]:
    """Upload every .conda under <channel_dir>/<subdir>/ to anaconda.org/<owner>."""
    require_rattler_build()
    from rattler_build import upload_package_to_anaconda

    packages = sorted(Path(channel_dir).glob("*/*.conda"))
    if not packages:
        raise ChannelError(f"no .conda packages under {channel_dir}/<subdir>/; build or package them first")
    if not api_key:
        raise ChannelError(
            f"set ANACONDA_API_KEY to an anaconda.org token that may upload to the {owner} channel"
        )
    try:
        upload_package_to_anaconda([str(p) for p in packages], owner, api_key=api_key)
    except Exception as exc:
        raise ChannelError(f"uploading to anaconda.org/{owner} failed: {exc}") from exc
    return packages
