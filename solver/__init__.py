"""solver: plan consistent conda environments for PyTorch CUDA extensions (pointops)."""

__version__ = "0.1.0"
