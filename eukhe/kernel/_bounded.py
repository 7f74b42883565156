"""The output bounder the kernel uses: eukhe.output (S2 "Limits" 4), named once here for the kernel modules."""

from __future__ import annotations

from eukhe.output import BoundedOutput, BoundedResult

__all__ = ["BoundedOutput", "BoundedResult"]
