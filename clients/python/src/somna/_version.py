"""The package's version (read by the build backend too)."""

__version__ = "0.1.0"
