import pytest

from threads import limit_blas_threads


@pytest.fixture(scope="session", autouse=True)
def one_blas_thread():
    """numpy's side of every comparison runs on one thread, like the engine."""
    limit_blas_threads(1)


@pytest.fixture(scope="module")
def one_torch_thread():
    """PyTorch's side of a comparison on one thread too (modules that use torch ask for it)."""
    torch = pytest.importorskip("torch")
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
