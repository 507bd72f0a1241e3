"""Compatibility layers that reproduce other libraries' APIs on top of pointops."""
