from gpudsl.testing import cuda_snapshot  # noqa: F401
