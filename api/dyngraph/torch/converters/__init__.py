"""ATen op converters, one module per op family; each registers its ops in
:data:`CONVERTERS`."""

from . import attention  # noqa: F401
from . import complex  # noqa: F401
from . import compare  # noqa: F401
from . import elementwise  # noqa: F401
from . import fft  # noqa: F401
from . import generate  # noqa: F401
from . import indexing  # noqa: F401
from . import layout  # noqa: F401
from . import matmul  # noqa: F401
from . import moe  # noqa: F401
from . import norm  # noqa: F401
from . import quantize  # noqa: F401
from . import reduce  # noqa: F401
from . import scalar  # noqa: F401
# vision / audio: convolution, pooling, channel norms, interpolation
from . import channel_norm  # noqa: F401
from . import conv  # noqa: F401
from . import interpolate  # noqa: F401
from . import pad  # noqa: F401
from . import pool  # noqa: F401
from . import unfold  # noqa: F401
from .registry import CONVERTERS, Args, Missing, Unsupported, bind, converter, converter_of, kept_whole

__all__ = ["CONVERTERS", "Args", "Missing", "Unsupported", "bind", "converter", "converter_of", "kept_whole"]
