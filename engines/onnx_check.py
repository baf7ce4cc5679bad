"""Checks on an ONNX file before TensorRT's parser sees it.

The store already vouches for the file's hash; these bound what a parser will be asked to chew
(size, node count, initializer sizes) and refuse external-data paths that point outside the
store, so a tampered or hand-placed model cannot make the builder read arbitrary files.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import onnx

from engines.errors import ModelStoreError

MAX_FILE_BYTES = 2 << 30
MAX_NODES = 100_000
MAX_INITIALIZER_BYTES = 1 << 30


def check_onnx(path: Path, root: Path) -> onnx.ModelProto:
    """The model's graph (weights not loaded), or ModelStoreError naming what is wrong."""
    # here, not at the top: onnx (ml_dtypes) takes over a second to import, and most commands never read a graph
    import onnx

    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise ModelStoreError(
            f"{path} is {size / 1e9:.1f} GB, more than the {MAX_FILE_BYTES / 1e9:.0f} GB an engine build accepts"
        )
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # protobuf raises its own DecodeError
        raise ModelStoreError(f"{path} is not a readable ONNX model ({exc}); run 'orin-avatar models sync'") from None
    nodes = len(model.graph.node)
    if nodes > MAX_NODES:
        raise ModelStoreError(f"{path} has {nodes} nodes, more than the {MAX_NODES} allowed")
    store = root.resolve()
    for tensor in model.graph.initializer:
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            location = next((e.value for e in tensor.external_data if e.key == "location"), "")
            target = (path.parent / location).resolve()
            if store not in target.parents:
                raise ModelStoreError(f"{path}: initializer {tensor.name} points outside the model store ({location})")
            size = target.stat().st_size if target.is_file() else 0
        else:
            size = len(tensor.raw_data) or tensor.ByteSize()
        if size > MAX_INITIALIZER_BYTES:
            raise ModelStoreError(f"{path}: initializer {tensor.name} is {size / 1e9:.1f} GB, more than allowed")
    return model
