"""Fixtures of the code generation tests: ``cuda_snapshot`` (from gpudsl.testing)."""
from gpudsl.testing import cuda_snapshot  # noqa: F401
