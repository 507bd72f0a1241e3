"""What of pointops is published, and the way around what is not: make-env's files name the
`pointops` channel and the pointops wheels on PyPI, and neither holds anything yet; nor does PyPI
hold the pure-Python pointnet2_ops wheel (`pure_wheels:` of solver/knowledge/pointops_builds.yaml).

    conda_note(["pointops", "conda-forge"])   # -> "the pointops channel ... has no packages yet ..."
    wheel_note(wheel)                          # -> "pointops-cu13 is not on PyPI yet ..."
    wheel_note(kb.pointops_table.pure_wheel("pointnet2_ops"))   # -> "pointnet2_ops is not on PyPI yet ..."

When the first packages are uploaded, set CHANNEL_PUBLISHED / WHEELS_PUBLISHED /
PURE_WHEELS_PUBLISHED and the notes go.
"""

from __future__ import annotations

CHANNEL = "pointops"
CHANNEL_URL = f"https://conda.anaconda.org/{CHANNEL}"
CHANNEL_PUBLISHED = False  # nothing uploaded to anaconda.org/pointops yet
WHEELS_PUBLISHED = False  # pointops, pointops-cu12, pointops-cu13: nothing on PyPI yet
PURE_WHEELS_PUBLISHED = False  # pointnet2_ops: not on PyPI yet

# A plan is written for a target machine, often not this one, and its files are compared
# across checkouts (envs/): the source route names where the user's checkout is, not ours.
SOURCE_PLACEHOLDER = "/ABSOLUTE/PATH/TO/pointops"


def source_tree(relative: str = "ops-src") -> str:
    """The absolute path, with the checkout's root to fill in, of a source tree to build from
    (`relative`: from the checkout's root); pip takes a relative path from the current folder
    only, so the route never uses one."""
    return f"{SOURCE_PLACEHOLDER}/{relative}"


def from_source_command() -> str:
    """pip's source build: against the torch already installed (no isolation), nothing else pulled."""
    return f"pip install --no-build-isolation --no-deps {source_tree()}"


def names_pointops_channel(channels: list[str]) -> bool:
    return any(c.rstrip("/") in (CHANNEL, CHANNEL_URL) for c in channels)


def conda_note(channels: list[str]) -> str | None:
    """For an env.yml that names the pointops channel while it is empty."""
    if CHANNEL_PUBLISHED or not names_pointops_channel(channels):
        return None
    return (
        f"the {CHANNEL} channel on anaconda.org has no packages yet (pointops is not yet published), so "
        "conda cannot create this environment as written. Build a local channel: `solver channel "
        "package-local -o out/channel` (this machine's build) or `solver channel build -o out/channel` "
        "(every variant, needs conda-forge), then plan again with `--channel ./out/channel --channel "
        f"conda-forge`; or drop pointops from the file and build it into the environment: "
        f"{from_source_command()}"
    )


def wheel_note(wheel) -> str | None:
    """For a requirements file or uv project that names a pointops wheel while PyPI has none
    (`wheel`: solver.knowledge.PointopsWheel, or PureWheel for pointnet2_ops)."""
    from solver.knowledge.pointops import PureWheel

    if isinstance(wheel, PureWheel):
        return _pure_wheel_note(wheel)
    if WHEELS_PUBLISHED:
        return None
    from solver.wheels.naming import file_name_of

    nvcc = f" with nvcc {wheel.cuda_version}" if wheel.cuda_version else ""
    return (
        f"{wheel.distribution} is not on PyPI yet (pointops is not yet published), so the install cannot "
        f"find it. Install torch as this file says, then build the wheel here{nvcc}: `solver wheels build "
        f"{wheel.distribution} -o out/wheels` and `pip install out/wheels/{file_name_of(wheel.distribution)}-"
        f"*.whl`; or build from source: {from_source_command()}"
    )


def _pure_wheel_note(wheel) -> str | None:
    """pointnet2_ops: built on any machine in seconds; installed without its extras, since the
    pointops wheel it needs is not on PyPI either."""
    if PURE_WHEELS_PUBLISHED:
        return None
    from solver.wheels.naming import file_name_of

    return (
        f"{wheel.distribution} is not on PyPI yet, so the install cannot find it. Build it here (pure "
        f"Python, any platform): `solver wheels build {wheel.distribution} -o out/wheels` and `pip install "
        f"--no-deps out/wheels/{file_name_of(wheel.distribution)}-*.whl` beside a pointops wheel; or from "
        f"source: pip install --no-deps {source_tree(wheel.source)}"
    )
