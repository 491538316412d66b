import pytest

from threads import limit_blas_threads


@pytest.fixture(scope="session", autouse=True)
def one_blas_thread():
    """numpy's side of every comparison runs on one thread, like the engine."""
    limit_blas_threads(1)
