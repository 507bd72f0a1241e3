"""tests/helpers/peers.py fetches a peer at its pinned commit with real git, from a local
repository standing in for GitHub: the pin is what gets checked out, failures leave nothing
behind, and what the user already has is never replaced."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import peers
import pytest

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
NAME = "Pointnet2_PyTorch"
MARKER = peers.PEERS[NAME].marker


def git(*args: str, cwd: Path) -> str:
    env = dict(
        os.environ,
        GIT_AUTHOR_NAME="t",
        GIT_AUTHOR_EMAIL="t@t",
        GIT_COMMITTER_NAME="t",
        GIT_COMMITTER_EMAIL="t@t",
    )
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=env
    ).stdout.strip()


@pytest.fixture
def remote(tmp_path, monkeypatch) -> Path:
    """A repository with two commits; the pin is the first one, the branch tip the second."""
    repo = tmp_path / "remote"
    (repo / Path(MARKER).parent).mkdir(parents=True)
    git("init", "-q", cwd=repo)
    git("config", "uploadpack.allowAnySHA1InWant", "true", cwd=repo)  # GitHub serves commits by hash
    (repo / MARKER).write_text("pinned = True\n")
    git("add", ".", cwd=repo)
    git("commit", "-q", "-m", "pinned", cwd=repo)
    pinned = git("rev-parse", "HEAD", cwd=repo)
    (repo / MARKER).write_text("pinned = False\n")
    git("commit", "-q", "-am", "later", cwd=repo)
    monkeypatch.setitem(peers.PEERS, NAME, peers.Peer(url=repo.as_uri(), commit=pinned, marker=MARKER))
    return repo


def test_the_pinned_commit_is_checked_out_not_the_branch_tip(remote, tmp_path):
    ok, line = peers.fetch(NAME, tmp_path / ".peers")
    checkout = tmp_path / ".peers" / NAME
    assert ok, line
    assert git("rev-parse", "HEAD", cwd=checkout) == peers.PEERS[NAME].commit
    assert (checkout / MARKER).read_text() == "pinned = True\n"
    assert [p.name for p in (tmp_path / ".peers").iterdir()] == [NAME]  # no work folder left


def test_a_commit_the_remote_lacks_fails_and_leaves_nothing(remote, tmp_path, monkeypatch):
    monkeypatch.setitem(peers.PEERS, NAME, peers.Peer(url=remote.as_uri(), commit="0" * 40, marker=MARKER))
    ok, line = peers.fetch(NAME, tmp_path / ".peers")
    assert not ok and "git fetch failed" in line, line
    assert list((tmp_path / ".peers").iterdir()) == []


def test_an_unreachable_remote_fails_in_one_line(remote, tmp_path):
    ok, line = peers.fetch(NAME, tmp_path / ".peers", url=(tmp_path / "nowhere").as_uri())
    assert not ok and line.startswith(f"{NAME}: git fetch failed:") and "\n" not in line, line
    assert list((tmp_path / ".peers").iterdir()) == []


def test_a_checkout_already_there_is_used_as_it_is(remote, tmp_path):
    own = tmp_path / "own-clone"
    (own / Path(MARKER).parent).mkdir(parents=True)
    (own / MARKER).write_text("mine\n")
    (tmp_path / ".peers").mkdir()
    (tmp_path / ".peers" / NAME).symlink_to(own)
    ok, line = peers.fetch(NAME, tmp_path / ".peers")
    assert ok and "present" in line
    assert (tmp_path / ".peers" / NAME).is_symlink() and (own / MARKER).read_text() == "mine\n"


@pytest.mark.parametrize("kind", ["folder without the marker", "dangling link"])
def test_something_else_at_the_target_is_never_replaced(remote, tmp_path, kind):
    target = tmp_path / ".peers" / NAME
    target.parent.mkdir()
    if kind == "dangling link":
        target.symlink_to(tmp_path / "gone")
    else:
        target.mkdir()
        (target / "notes.txt").write_text("keep\n")
    ok, line = peers.fetch(NAME, tmp_path / ".peers")
    assert not ok and "left as it is" in line, line
    if kind == "dangling link":
        assert target.is_symlink() and os.readlink(target) == str(tmp_path / "gone")
    else:
        assert (target / "notes.txt").read_text() == "keep\n"


def test_the_root_may_be_a_link_and_is_written_through(remote, tmp_path):
    real = tmp_path / "elsewhere"
    real.mkdir()
    (tmp_path / ".peers").symlink_to(real)
    ok, line = peers.fetch(NAME, tmp_path / ".peers")
    assert ok, line
    assert (tmp_path / ".peers").is_symlink() and (real / NAME / MARKER).is_file()


def test_the_command_line_reports_each_peer_and_fails_when_one_failed(remote, tmp_path):
    # offline in any case: a target in the way fails before git runs, a checkout present is used
    root = tmp_path / ".peers"
    (root / NAME).mkdir(parents=True)
    run = [sys.executable, str(Path(peers.__file__)), "--root", str(root)]
    blocked = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert blocked.returncode == 1 and blocked.stdout.startswith(f"{NAME}: {root / NAME} exists but"), blocked
    (root / NAME).rmdir()
    assert peers.fetch(NAME, root)[0]  # the stand-in remote's pin
    again = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and again.stdout.strip() == f"{NAME}: present at {root / NAME}", again
    bad = subprocess.run([*run, "NoSuchPeer"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "unknown peer NoSuchPeer" in bad.stderr


def test_the_lookup_prefers_pointops_peers_and_says_how_to_fetch(tmp_path, monkeypatch):
    monkeypatch.setenv("POINTOPS_PEERS", str(tmp_path))
    if peers.peer_checkout(NAME) is None:
        assert "python tests/helpers/peers.py Pointnet2_PyTorch" in peers.missing_reason(NAME)
    (tmp_path / NAME / Path(MARKER).parent).mkdir(parents=True)
    (tmp_path / NAME / MARKER).write_text("")
    assert peers.peer_checkout(NAME) == tmp_path / NAME
