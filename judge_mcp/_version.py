"""The version, a leaf any module may import (the package face imports the Python API on first use)."""

__version__ = "0.1.0"
