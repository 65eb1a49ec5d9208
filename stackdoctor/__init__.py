"""stackdoctor: diagnose, install and prove a machine's PyTorch stack."""

from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["__version__"]
