"""toolkits.yaml: per CUDA toolkit, the minimum driver for full compatibility (Linux and Windows
numbered apart), the GPU archs nvcc builds, and the newest host gcc it accepts."""

from __future__ import annotations

from dataclasses import dataclass

from solver.knowledge._fields import need, version_str
from solver.vocabulary import major_minor


@dataclass(frozen=True)
class Toolkit:
    version: str
    linux_min: str
    windows_min: str  # a bare branch ("580") where NVIDIA publishes no Windows build
    gcc_max: int
    archs: tuple[str, ...]

    def min_driver(self, os_name: str) -> str:
        return self.windows_min if os_name == "windows" else self.linux_min


def parse_toolkits(raw: dict) -> dict[str, Toolkit]:
    """toolkits.yaml -> {"12.9": Toolkit, ...}."""
    result = {}
    for version, item in need(raw, "toolkits", "toolkits.yaml").items():
        where = f"toolkits.yaml toolkits.{version}"
        archs = tuple(version_str(a, where) for a in need(item, "archs", where))
        result[version_str(version, where)] = Toolkit(
            version=version,
            linux_min=version_str(need(item, "linux_min", where), where),
            windows_min=version_str(need(item, "windows_min", where), where),
            gcc_max=int(need(item, "gcc_max", where)),
            archs=archs,
        )
    return result


def toolkit_of(toolkits: dict[str, Toolkit], cuda: str) -> Toolkit:
    """The toolkit of a CUDA version ("12.9.1" -> 12.9); KeyError when the tables lack it."""
    key = major_minor(cuda)
    if key not in toolkits:
        raise KeyError(f"no knowledge of CUDA toolkit {cuda}")
    return toolkits[key]
