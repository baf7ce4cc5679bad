"""What this machine offers TensorRT: versions, GPU, DLA, L4T; and why not, when it offers nothing.

TensorRT and PyCUDA are imported lazily, here and in the TensorRT modules only, so everything
else imports on machines without them.
"""

from __future__ import annotations

import functools
import importlib
import logging
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from engines.trt_builder import process_logger

log = logging.getLogger(__name__)

TEGRA_RELEASE = Path("/etc/nv_tegra_release")
INSTALL_HINT = (
    "TensorRT comes with JetPack: 'sudo apt install python3-libnvinfer' (and create .venv with "
    "--system-site-packages); PyCUDA: '.venv/bin/pip install -e .[jetson]'"
)


@dataclass(frozen=True)
class Platform:
    tensorrt: str | None = None
    cuda: str | None = None
    driver: str | None = None
    l4t: str | None = None
    gpu: str | None = None
    compute_capability: str | None = None
    dla_cores: int = 0
    problem: str | None = None  # why TensorRT cannot be used here, if it cannot

    @property
    def usable(self) -> bool:
        return self.problem is None

    @property
    def trt_major(self) -> int:
        return int(self.tensorrt.split(".")[0]) if self.tensorrt else 0

    def as_dict(self) -> dict:
        return asdict(self)


def l4t_release() -> str | None:
    """'36.3.0' from '# R36 (release), REVISION: 3.0, ...' on a Jetson."""
    if not TEGRA_RELEASE.is_file():
        return None
    match = re.search(r"R(\d+).*REVISION:\s*([\d.]+)", TEGRA_RELEASE.read_text())
    return f"{match.group(1)}.{match.group(2)}" if match else None


def load_tensorrt():
    """The tensorrt module, or None."""
    try:
        return importlib.import_module("tensorrt")
    except ImportError:
        return None


@functools.lru_cache(maxsize=1)
def probe_platform() -> Platform:
    trt = load_tensorrt()
    if trt is None:
        return Platform(l4t=l4t_release(), problem=f"TensorRT is not installed. {INSTALL_HINT}")
    try:
        cuda = importlib.import_module("pycuda.driver")
    except ImportError:
        return Platform(tensorrt=trt.__version__, l4t=l4t_release(), problem=f"PyCUDA is not installed. {INSTALL_HINT}")
    try:
        cuda.init()
        if cuda.Device.count() == 0:
            raise RuntimeError("no CUDA device")
        device = cuda.Device(0)
        version = ".".join(str(v) for v in cuda.get_version())
        driver = str(cuda.get_driver_version())
        major, minor = device.compute_capability()
        # A Runtime, never a Builder: a Builder loads TensorRT's kernel library (about 1.4 GB on 8.6,
        # NVIDIA/TensorRT#3359) and does not give it back, on a device whose CPU and GPU share memory.
        # Builders live only in the build child (engines/trt_builder.py).
        runtime = trt.Runtime(process_logger(trt))
        return Platform(
            trt.__version__,
            version,
            driver,
            l4t_release(),
            device.name(),
            f"{major}.{minor}",
            int(runtime.num_DLA_cores),
        )
    except Exception as exc:  # CUDA raises its own error types
        return Platform(tensorrt=trt.__version__, l4t=l4t_release(), problem=f"no usable CUDA GPU ({exc})")
