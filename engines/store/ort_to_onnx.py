"""Convert an ONNX Runtime flatbuffer model (.ort) back to an ONNX model.

Why our own: onnxruntime ships the flatbuffer *reader* (`onnxruntime.tools.ort_format_model`)
but no converter back to ONNX, and TensorRT and the ONNX tools only read ONNX. The .ort format
is a one-to-one serialisation of the ONNX graph (nodes, node args, initializers, nested
subgraphs), so the mapping below is mechanical.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime.tools.ort_format_model  # noqa: F401  (puts ort_flatbuffers_py on sys.path)
from onnx import helper
from ort_flatbuffers_py.fbs.AttributeType import AttributeType
from ort_flatbuffers_py.fbs.DimensionValueType import DimensionValueType
from ort_flatbuffers_py.fbs.InferenceSession import InferenceSession
from ort_flatbuffers_py.fbs.TypeInfoValue import TypeInfoValue

# The flatbuffer TensorDataType enum uses ONNX's TensorProto numbering.
_STRING = onnx.TensorProto.STRING


def convert_ort_file(path: Path) -> onnx.ModelProto:
    """Read an .ort file and return the equivalent ONNX model."""
    buf = bytearray(path.read_bytes())
    if not InferenceSession.InferenceSessionBufferHasIdentifier(buf, 0):
        raise ValueError(f"{path} is not an ONNX Runtime format (.ort) model")
    session = InferenceSession.GetRootAs(buf, 0)
    model = session.Model()
    opsets = [
        helper.make_opsetid(_text(model.OpsetImport(i).Domain()), model.OpsetImport(i).Version())
        for i in range(model.OpsetImportLength())
    ]
    onnx_model = helper.make_model(
        _graph(model.Graph(), name=path.stem),
        opset_imports=opsets,
        producer_name="orin-avatar (from " + (_text(model.ProducerName()) or "ort") + ")",
    )
    onnx_model.ir_version = model.IrVersion()
    return onnx_model


def _text(value: bytes | None) -> str:
    return value.decode() if value else ""


def _graph(graph, name: str) -> onnx.GraphProto:
    value_infos = {}
    for i in range(graph.NodeArgsLength()):
        info = _value_info(graph.NodeArgs(i))
        value_infos[info.name] = info
    inputs = [_text(graph.Inputs(i)) for i in range(graph.InputsLength())]
    outputs = [_text(graph.Outputs(i)) for i in range(graph.OutputsLength())]
    initializers = [_tensor(graph.Initializers(i)) for i in range(graph.InitializersLength())]
    init_names = {t.name for t in initializers}
    nodes = sorted((graph.Nodes(i) for i in range(graph.NodesLength())), key=lambda n: n.Index())
    return helper.make_graph(
        [_node(n) for n in nodes],
        name,
        [value_infos.get(n) or helper.make_empty_tensor_value_info(n) for n in inputs if n not in init_names],
        [value_infos.get(n) or helper.make_empty_tensor_value_info(n) for n in outputs],
        initializer=initializers,
        value_info=[v for n, v in value_infos.items() if n not in inputs and n not in outputs],
    )


def _value_info(arg) -> onnx.ValueInfoProto:
    name = _text(arg.Name())
    type_info = arg.Type()
    if type_info is None or type_info.ValueType() != TypeInfoValue.tensor_type:
        return helper.make_empty_tensor_value_info(name)
    from ort_flatbuffers_py.fbs.TensorTypeAndShape import TensorTypeAndShape

    tensor_type = TensorTypeAndShape()
    table = type_info.Value()
    tensor_type.Init(table.Bytes, table.Pos)
    shape = tensor_type.Shape()
    dims = None
    if shape is not None:
        dims = []
        for d in range(shape.DimLength()):
            value = shape.Dim(d).Value()
            if value is None or value.DimType() == DimensionValueType.UNKNOWN:
                dims.append(None)
            elif value.DimType() == DimensionValueType.VALUE:
                dims.append(value.DimValue())
            else:
                dims.append(_text(value.DimParam()))
    return helper.make_tensor_value_info(name, tensor_type.ElemType(), dims)


def _tensor(tensor) -> onnx.TensorProto:
    name = _text(tensor.Name())
    dims = [int(d) for d in tensor.DimsAsNumpy()] if tensor.DimsLength() else []
    if tensor.DataType() == _STRING:
        strings = [tensor.StringData(i) for i in range(tensor.StringDataLength())]
        return helper.make_tensor(name, _STRING, dims, strings)
    proto = onnx.TensorProto(name=name, data_type=tensor.DataType(), dims=dims)
    raw = tensor.RawDataAsNumpy() if tensor.RawDataLength() else np.zeros(0, np.uint8)
    proto.raw_data = raw.tobytes()
    return proto


def _node(node) -> onnx.NodeProto:
    proto = helper.make_node(
        _text(node.OpType()),
        [_text(node.Inputs(i)) for i in range(node.InputsLength())],
        [_text(node.Outputs(i)) for i in range(node.OutputsLength())],
        name=_text(node.Name()),
        domain=_text(node.Domain()),
    )
    proto.attribute.extend(_attribute(node.Attributes(i)) for i in range(node.AttributesLength()))
    return proto


def _attribute(attr) -> onnx.AttributeProto:
    name = _text(attr.Name())
    kind = attr.Type()
    if kind == AttributeType.FLOAT:
        return helper.make_attribute(name, attr.F())
    if kind == AttributeType.INT:
        return helper.make_attribute(name, attr.I())
    if kind == AttributeType.STRING:
        return helper.make_attribute(name, attr.S())
    if kind == AttributeType.TENSOR:
        return helper.make_attribute(name, _tensor(attr.T()))
    if kind == AttributeType.GRAPH:
        return helper.make_attribute(name, _graph(attr.G(), name))
    if kind == AttributeType.FLOATS:
        return helper.make_attribute(
            name, [float(x) for x in attr.FloatsAsNumpy()], attr_type=onnx.AttributeProto.FLOATS
        )
    if kind == AttributeType.INTS:
        return helper.make_attribute(name, [int(x) for x in attr.IntsAsNumpy()], attr_type=onnx.AttributeProto.INTS)
    if kind == AttributeType.STRINGS:
        return helper.make_attribute(
            name, [attr.Strings(i) for i in range(attr.StringsLength())], attr_type=onnx.AttributeProto.STRINGS
        )
    if kind == AttributeType.TENSORS:
        return helper.make_attribute(name, [_tensor(attr.Tensors(i)) for i in range(attr.TensorsLength())])
    if kind == AttributeType.GRAPHS:
        return helper.make_attribute(name, [_graph(attr.Graphs(i), name) for i in range(attr.GraphsLength())])
    raise ValueError(f"attribute {name!r} has a type ({kind}) the ONNX conversion does not handle")
