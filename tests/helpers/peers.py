"""The peers' own code that the drop-in tests run: fetched into .peers/ (git-ignored, never
committed), each pinned to one commit. git checks every object it fetches against its hash, so a
checkout whose HEAD is the pin is exactly the code these tests were written against.

    python tests/helpers/peers.py [--root DIR] [NAME ...]    # fetch what is missing (tests/run.sh)

Without network the fetch fails in a line and the tests that need a peer skip, saying so.
A checkout already there (a folder, or a link to the user's own clone) is used as it is and
never replaced, whatever its commit.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Peer:
    url: str
    commit: str
    marker: str  # a file of the checkout the tests read: its presence means "checked out"


PEERS = {
    "Pointnet2_PyTorch": Peer(
        url="https://github.com/erikwijmans/Pointnet2_PyTorch",
        commit="b5ceb6d9ca0467ea34beb81023f96ee82228f626",
        marker="pointnet2/models/__init__.py",
    ),
}


def roots() -> list[Path]:
    """Where checkouts are looked for: $POINTOPS_PEERS, then .peers/ of this repository."""
    return [Path(p) for p in filter(None, [os.environ.get("POINTOPS_PEERS"), str(REPO / ".peers")])]


def peer_checkout(name: str) -> Path | None:
    for root in roots():
        candidate = root / name
        if (candidate / PEERS[name].marker).is_file():
            return candidate
    return None


def missing_reason(name: str) -> str:
    """The skip message of a test that needs `name` and found no checkout."""
    places = " and ".join(str(r) for r in roots())
    return (
        f"no {name} checkout: looked for {name}/{PEERS[name].marker} in {places} "
        f"(fetch it with `python tests/helpers/peers.py {name}`, or point $POINTOPS_PEERS at a folder holding it)"
    )


def _git(*args: str, cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    env = dict(
        os.environ, GIT_TERMINAL_PROMPT="0", GIT_HTTP_LOW_SPEED_LIMIT="1000", GIT_HTTP_LOW_SPEED_TIME="30"
    )
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


def fetch(name: str, root: Path, url: str | None = None, timeout: float = 300) -> tuple[bool, str]:
    """Fetch `name` at its pinned commit into root/name, unless a checkout is there. Returns
    (usable, one line saying what happened). Nothing is left behind when it fails."""
    peer = PEERS[name]
    target = root / name
    if (target / peer.marker).is_file():
        return True, f"{name}: present at {target}"
    if target.exists() or target.is_symlink():
        return (
            False,
            f"{name}: {target} exists but holds no {peer.marker}; left as it is (move it away to fetch)",
        )
    if shutil.which("git") is None:
        return False, f"{name}: git is not installed"
    root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=root))
    try:
        steps = [
            ("init", "-q"),
            ("fetch", "-q", "--depth", "1", url or peer.url, peer.commit),
            ("-c", "advice.detachedHead=false", "checkout", "-q", "--detach", "FETCH_HEAD"),
        ]
        for args in steps:
            proc = _git(*args, cwd=work, timeout=timeout)
            if proc.returncode != 0:
                said = (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
                return False, f"{name}: git {args[0] if args[0] != '-c' else 'checkout'} failed: {said}"
        head = _git("rev-parse", "HEAD", cwd=work, timeout=60).stdout.strip()
        if head != peer.commit:
            return False, f"{name}: fetched {head or 'nothing'}, not the pinned {peer.commit}"
        if not (work / peer.marker).is_file():
            return False, f"{name}: commit {peer.commit} has no {peer.marker}"
        work.rename(target)
        return True, f"{name}: fetched {peer.commit[:12]} into {target}"
    except subprocess.TimeoutExpired:
        return False, f"{name}: git took longer than {timeout:.0f} s"
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Fetch the peers the drop-in tests run, at their pinned commits."
    )
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"default: all ({', '.join(PEERS)})")
    parser.add_argument(
        "--root", type=Path, default=REPO / ".peers", help="folder of the checkouts (default: .peers)"
    )
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in PEERS]
    if unknown:
        parser.error(f"unknown peer {', '.join(unknown)}; known: {', '.join(PEERS)}")
    status = 0
    for name in args.names or list(PEERS):
        ok, line = fetch(name, args.root)
        print(line)
        status |= 0 if ok else 1
    return status


if __name__ == "__main__":
    sys.exit(main())
