"""Solve a plan with py-rattler against the channels, using the target's virtual packages
(__cuda, __cuda_arch, __glibc, __linux / __win / __osx) instead of this machine's.

The solve runs in a child interpreter (solver.worker): py-rattler can crash while an interpreter
exits after a solve, and a stalled channel must not hang the command past a time limit. The child
returns plain data (SolvedPackage fields, the explicit file and the lock file as text), so py-rattler
is never imported by the command itself.

    result = solve_plan(plan, ["pointops", "conda-forge"])   # raises ChannelAccessError / SolveError
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from solver.errors import ChannelAccessError, SolveError, WorkerError
from solver.plan import Plan
from solver.target import virtual_package_strings

SOLVE_TIMEOUT_S = 120  # for the solver itself, inside py-rattler
WORKER_TIMEOUT_S = 300  # for the whole child: fetching repodata, solving, writing the outputs


@dataclass(frozen=True)
class SolvedPackage:
    """One package of a solution, as plain data."""

    name: str
    version: str
    build: str
    url: str
    sha256: str | None = None
    build_number: int = 0
    depends: tuple[str, ...] = ()
    constrains: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        return {
            "name": self.name,
            "version": self.version,
            "build": self.build,
            "url": self.url,
            "sha256": self.sha256,
        }


@dataclass
class SolveResult:
    packages: list[SolvedPackage]
    channels: list[str]  # channel URLs as solved
    virtual_packages: list[str]  # "__cuda=12.4=0", ...
    explicit: str = ""  # CEP 23 explicit file
    lock: str = ""  # rattler lock file (YAML)
    notes: list[str] = field(default_factory=list)


_WINDOWS_DRIVE = re.compile(r"^[A-Za-z]:[\\/]")


def is_local_channel(channel: str) -> bool:
    """A path (./x, ../x, /x, ~/x, C:\\x, or a directory that exists here), not a channel name.

    `owner/label/name` (conda's channel-with-label syntax) is a name unless such a directory exists.
    """
    if re.match(r"^[a-z][a-z0-9+.-]*://", channel):
        return False
    if (
        channel.startswith(("./", "../", "/", "~", ".\\", "..\\"))
        or channel in (".", "..")
        or _WINDOWS_DRIVE.match(channel)
    ):
        return True
    return Path(channel).expanduser().is_dir()


def channel_location(channel: str) -> str:
    """A channel name, URL or local directory -> what rattler's Channel() accepts."""
    if is_local_channel(channel):
        return str(Path(channel).expanduser().resolve())
    return channel


def channel_for_env_file(channel: str) -> str:
    """Channel as env.yml should list it: names and URLs as given, local directories as file:// URLs."""
    if is_local_channel(channel):
        return Path(channel_location(channel)).as_uri()
    return channel


def describe_channel_failure(message: str, channel_hint: str = "") -> str:
    """rattler's multi-line GatewayError -> one line: what failed, why, and the fix."""
    url_match = re.search(r"url \((\S+?)\)", message) or re.search(r"channel '([^']+)'", message)
    where = url_match.group(1) if url_match else channel_hint
    host = re.sub(r"^[a-z]+://([^/]+).*$", r"\1", where) if "://" in where else where
    proxy = next(
        (
            f"{k}={os.environ[k]}"
            for k in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")
            if os.environ.get(k)
        ),
        None,
    )
    text = message.lower()
    for variable in ("SSL_CERT_FILE", "SSL_CERT_DIR"):
        value = os.environ.get(variable)
        if (
            value
            and not os.path.exists(value)
            and ("builder error" in text or "certificate" in text or "tls" in text)
        ):
            return (
                f"{variable}={value} does not exist, so no HTTPS client could be set up; "
                f"point {variable} at your CA bundle or unset it"
            )
    if "certificate" in text or "unknownissuer" in text or "usedasendentity" in text or "tls" in text:
        return (
            f"the TLS certificate of {host} is not trusted ({_last_cause(message)}); if a corporate proxy "
            "re-signs HTTPS, point SSL_CERT_FILE at its CA bundle (SSL_CERT_FILE=/path/to/corporate-ca.pem)"
        )
    if "404" in text or "no such file" in text or "could not find subdir" in text:
        return f"channel {where} was not found ({_last_cause(message)}); check the --channel name or URL"
    if "dns" in text or "lookup address" in text or "name or service not known" in text:
        return (
            f"cannot resolve {host} (no network or no DNS); connect to the network"
            + (f" or check the proxy ({proxy})" if proxy else ", set HTTPS_PROXY if you need a proxy")
            + ", or pass --offline"
        )
    if "connection refused" in text:
        via = f" through the proxy {proxy}" if proxy else ""
        return (
            f"the connection to {host} was refused{via}; check the network"
            + (" and the proxy" if proxy else "")
            + ", or pass --offline"
        )
    if "timed out" in text or "timeout" in text:
        return f"{host} did not answer in time; check the network or proxy, or pass --offline"
    return f"cannot read channel {where}: {_last_cause(message)}; check the --channel value or pass --offline"


def _last_cause(message: str) -> str:
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    last = lines[-1] if lines else message
    return last.removeprefix("Caused by:").strip()


def solve_plan(
    plan: Plan,
    channels: list[str],
    timeout_s: float = SOLVE_TIMEOUT_S,
    worker_timeout_s: float = WORKER_TIMEOUT_S,
) -> SolveResult:
    """Solve the plan's specs for its target in a child interpreter.

    Raises ChannelAccessError (channels unreadable, or the child did not finish) or SolveError."""
    from solver import worker

    request = {
        "specs": plan.specs(),
        "platform": plan.target.platform,
        "virtual_packages": virtual_package_strings(plan.target),
        "channels": [channel_location(c) for c in channels],
        "timeout_s": timeout_s,
    }
    try:
        reply = worker.call("solver.solve:solve_specs", request, worker_timeout_s, what="the solve")
    except WorkerError as exc:
        raise ChannelAccessError(f"{exc}; check the network and channels, or pass --offline") from None
    return SolveResult(
        packages=[
            SolvedPackage(**{**p, "depends": tuple(p["depends"]), "constrains": tuple(p["constrains"])})
            for p in reply["packages"]
        ],
        channels=reply["channels"],
        virtual_packages=request["virtual_packages"],
        explicit=reply["explicit"],
        lock=reply["lock"],
    )


def solve_specs(
    specs: list[str], platform: str, virtual_packages: list[str], channels: list[str], timeout_s: float
) -> dict:
    """The child's side of solve_plan: py-rattler's solve, its records as plain data, and the
    explicit and lock files. Raises ChannelAccessError or SolveError."""
    import asyncio

    return asyncio.run(_solve(specs, platform, virtual_packages, channels, timeout_s))


async def _solve(
    plan_specs: list[str], platform: str, vps: list[str], locations: list[str], timeout_s: float
) -> dict:
    import datetime

    from rattler import BuildString, Channel, GenericVirtualPackage, MatchSpec, PackageName, Version, solve
    from rattler.exceptions import GatewayError, SolverError

    from solver.emit import explicit_file, lock_file

    try:
        rattler_channels = [Channel(loc) for loc in locations]
    except Exception as exc:
        raise ChannelAccessError(f"invalid channel ({exc}); pass a channel name, URL or directory") from None
    virtual = [
        GenericVirtualPackage(PackageName(n), Version(v), BuildString(b))
        for n, v, b in (s.split("=") for s in vps)
    ]
    # MatchSpec objects, not strings: solve() parses strings strictly and rejects "pytorch=*=cuda*".
    specs = [MatchSpec(s) for s in plan_specs]
    try:
        records = await solve(
            rattler_channels,
            specs,
            platforms=[platform, "noarch"],
            virtual_packages=virtual,
            timeout=datetime.timedelta(seconds=timeout_s),
        )
    except GatewayError as exc:
        raise ChannelAccessError(describe_channel_failure(str(exc), locations[0])) from None
    except SolverError as exc:
        if "cancelled" in str(exc):
            raise SolveError(
                f"the solve did not finish within {timeout_s:g} s; retry, or pass --offline"
            ) from None
        raise SolveError(
            await _explain_unsat(plan_specs, platform, rattler_channels, specs, vps, str(exc))
        ) from None
    except Exception as exc:  # e.g. FetchRepoDataError, IoError: still a channel problem
        raise ChannelAccessError(describe_channel_failure(str(exc), locations[0])) from None
    solved_channels = [c.base_url for c in rattler_channels]
    packages = [
        {
            "name": r.name.normalized,
            "version": str(r.version),
            "build": str(r.build),
            "url": str(r.url),
            "sha256": r.sha256.hex() if r.sha256 else None,
            "build_number": int(r.build_number),
            "depends": [str(d) for d in r.depends],
            "constrains": [str(c) for c in r.constrains],
        }
        for r in sorted(records, key=lambda r: r.name.normalized)
    ]
    return {
        "packages": packages,
        "channels": solved_channels,
        "explicit": explicit_file(records, platform),
        "lock": lock_file(records, platform, solved_channels, vps),
    }


async def _explain_unsat(
    plan_specs: list[str], platform: str, channels, specs, vps: list[str], solver_text: str
) -> str:
    """Name the planned spec the channels cannot satisfy, or the virtual package in the way."""
    from rattler import Gateway, MatchSpec

    gateway = Gateway()
    platforms = [platform, "noarch"]
    for spec, text in zip(specs, plan_specs, strict=True):
        name = text.split("=")[0]
        found = await gateway.query(channels, platforms, [spec], recursive=False)
        if not any(len(per_channel) for per_channel in found):
            everything = await gateway.query(channels, platforms, [MatchSpec(name)], recursive=False)
            builds = sorted(
                {
                    f"{r.version} {str(r.build).split('_h')[0]}"
                    for per in everything
                    for r in per
                    if r.name.normalized == name
                }
            )
            have = f"; they have {', '.join(builds[:8])}" if builds else "; they have none at all"
            return (
                f"the channels hold no {name} matching {text} for {platform}{have}. "
                "Pass --channel for a channel that has it, or other --torch/--cuda/--python pins."
            )
    missing = []
    for line in solver_text.splitlines():
        match = re.search(r"([^\s\u2500-\u257f][^,]*), for which no candidates were found", line)
        if match and match.group(1).strip() not in missing:
            missing.append(match.group(1).strip())
    virtual = [m for m in missing if m.startswith("__")]
    real = [m for m in missing if not m.startswith("__")]
    if real:
        return (
            f"the channels lack packages the planned ones depend on: {', '.join(real[:4])}. "
            "Add the channel that has them with --channel (conda-forge by default)."
        )
    have = ", ".join(v.rsplit("=", 1)[0] for v in vps if v.startswith("__"))
    if virtual:
        return (
            f"the solved packages need {', '.join(virtual[:3])}, but the target machine has {have}. "
            "Check --driver and --gpu, or pass --gpu none."
        )
    first = next((line.strip() for line in solver_text.splitlines() if line.strip()), "")
    return f"the solver found no environment for the plan on a machine with {have} ({first}). Check the channels."
