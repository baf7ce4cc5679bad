"""Every TensorRT name the product and the simulator use exists in that release's real bindings.

For each release (8.6 from NVIDIA's v8.6.1 sources; 10.3, 10.16 and 11.4 from the bindings wheels on
PyPI, downloaded once beside the model wheels), a child process runs the product's TensorRT code
through the simulator (probe, build of an INT8 and a plain engine, load, inference, DLA report,
release) and records every public name it touched; the test fails on any name the real bindings of
that release do not define, and on any public name the simulator itself offers that they do not.
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.trt_sim.ground.bindings import VERSIONS, real_names

SIM_PATH = str(REPO / "tests" / "trt_sim")
# The simulator's own controls and helpers, not part of the API it simulates.
SIMULATOR_OWN = {"SIM", "MAJOR", "GPU", "MAGIC", "cache_version_number", "ILayer.name"}

EXERCISE = r"""
import dataclasses, json, sys, tempfile
from pathlib import Path
import tensorrt as trt
from engines import trt_builder
from engines.platform import probe_platform
from engines.model_specs import MODELS
from engines.tensorrt_runner import TensorRTRunner
from engines.store.model_store import ModelStore
from engines.calibration_table import read_table, render_trt_cache
from calibration import TABLES_DIR

store = ModelStore()
probe_platform()
scratch = Path(tempfile.mkdtemp())
table = read_table(TABLES_DIR / "face.json")
strongly_typed = trt.__version__.startswith("11")
if strongly_typed:
    from engines.qdq_model import make_qdq_model
    onnx_path, cache = scratch / "face.qdq.onnx", None
    make_qdq_model(store.path("face.onnx"), table, onnx_path)
else:
    onnx_path, cache = store.path("face.onnx"), render_trt_cache(table, trt.__version__)
for precision, model, path, calibration in (("int8", "face", onnx_path, cache),
                                            ("fp32", "text", store.path("text.onnx"), None)):
    policy = MODELS[model]
    output = scratch / f"{model}.engine"
    request = trt_builder.BuildRequest(policy.model, str(path), precision, calibration, 0 if model == "face" else None,
                                       policy.profile, 256, 512, 1, str(scratch / "timing.cache"), str(output),
                                       fp16_layers=table.fp16_nodes if precision == "int8" else ())
    trt_builder.build_engine(request, lambda line: None)
    runner = TensorRTRunner(model, output, request.dla_core, precision)
    with runner:
        runner.infer(policy.golden())
        if model == "face":
            runner.layers_off_dla()
print(json.dumps(sorted(vars(trt)["SIM"].used)))
"""


def _simulator_surface(module) -> set[str]:
    """Public names the simulated module offers, and the public members of its classes."""
    names = set()
    for name, value in vars(module).items():
        if (
            name.startswith("_")
            or inspect.ismodule(value)
            or getattr(value, "__module__", module.__name__) != module.__name__
        ):
            continue
        names.add(name)
        if inspect.isclass(value):
            names |= {f"{name}.{member}" for member in vars(value) if not member.startswith("_")}
    return names - SIMULATOR_OWN


def _run(version: str, code: str) -> subprocess.CompletedProcess:
    env = {"TRT_SIM_VERSION": version, "PYTHONPATH": f"{SIM_PATH}:{REPO}", "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=600,
        env={**__import__("os").environ, **env},
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_every_tensorrt_name_used_exists_in_the_real_bindings(version):
    real = real_names(version)
    result = _run(version, EXERCISE)
    assert result.returncode == 0, result.stderr[-3000:]
    used = json.loads(result.stdout.strip().splitlines()[-1])
    surface = json.loads(
        _run(
            version,
            "import json, tensorrt, tests.test_tensorrt_bindings as t; "
            "print(json.dumps(sorted(t._simulator_surface(tensorrt))))",
        ).stdout.strip()
    )
    missing_used = [n for n in used if n not in real]
    missing_simulated = [n for n in surface if n.rsplit(".", 1)[-1] not in real]
    print(
        f"TensorRT {version} ({real.source}): {len(used)} names used by the product, "
        f"{len(surface)} offered by the simulator, checked"
    )
    assert len(used) > 40 and len(surface) > 60
    assert not missing_used, f"the product uses names TensorRT {version} does not define: {missing_used}"
    assert not missing_simulated, f"the simulator offers names TensorRT {version} does not define: {missing_simulated}"
