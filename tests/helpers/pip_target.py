"""pip installs of a built wheel into a --target folder, as the wheel tests make them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def pip_install_target(wheel: Path | str, site: Path) -> None:
    """`pip install --no-index --no-deps --target site wheel` with this interpreter's pip."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--no-deps",
            "--target",
            str(site),
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
