"""Shared test set-up: Hypothesis profiles chosen by HYPOTHESIS_PROFILE (dev by default, ci under CI)."""

from __future__ import annotations

import os
import sys

from hypothesis import HealthCheck, settings

settings.register_profile("dev", max_examples=100, deadline=None)
settings.register_profile(
    "ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.register_profile("thorough", max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))

# Sessions run their cells on the installed kernel venv; the suite runs them on its own interpreter instead (the
# spec's user Python: nothing is installed). Tests of the kernel environment set or remove this themselves.
os.environ.setdefault("EUKHE_KERNEL_PYTHON", sys.executable)
