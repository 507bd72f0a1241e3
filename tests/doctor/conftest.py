"""The doctor tests reuse the solver tests' stand-in nvidia-smi programs (tests/solver/fake_nvidia_smi.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "solver"))
