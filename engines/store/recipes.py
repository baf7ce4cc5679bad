"""How each store file is made from the wheel members it comes from.

A recipe takes the extracted member paths and the destination path and writes the store file.
Each conversion leans on a library where one exists (onnxscript's optimizer folds constants and
inlines the branch of an `If` fixed by a constant, tflite2onnx reads TFLite, piper patches its
own alignment output, ONNX's extractor cuts the voice in two); `ort_to_onnx` and `bert_to_onnx`
say why they are our own.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Callable

import numpy as np

from engines.model_specs import FRAME, SPEECH_RATE, VAD_CONTEXT, VAD_STATE

VAD_SHAPES = {"input": (1, FRAME + VAD_CONTEXT), "state": VAD_STATE}  # one 32 ms frame and its context
FACE_OPSET = 13  # TensorRT and the Q/DQ tools want opset >= 13; tflite2onnx writes 11


def _copy(members: list[Path], dest: Path) -> None:
    shutil.copyfile(members[0], dest)


def _vad_fixed_rate(members: list[Path], dest: Path) -> None:
    """Silero VAD branches on its `sr` input, and its decoder on the rank of a tensor measured with
    a dynamic `Shape`. TensorRT refuses an `If` whose branches give outputs of different ranks unless
    its condition is a build-time constant (onnx-tensorrt's operator table: "the two conditional
    branches must have the same rank"). The VAD always sees one 576-sample window and a 2x1x128
    state, so: fix `sr` at 16 kHz, freeze the input shapes, replace each `Shape` by its (now
    constant) value, and let the optimizer fold the `Equal` and inline the `If`. Outputs stay
    bit-identical (tests/test_conversions.py)."""
    import onnx
    import onnxruntime as ort
    import onnxscript.optimizer
    from onnx import numpy_helper

    model = onnx.load(str(members[0]))
    kept = [i for i in model.graph.input if i.name != "sr"]
    del model.graph.input[:]
    model.graph.input.extend(kept)
    model.graph.initializer.append(numpy_helper.from_array(np.array(SPEECH_RATE, np.int64), "sr"))
    for value in model.graph.input:
        for dim, size in zip(value.type.tensor_type.shape.dim, VAD_SHAPES[value.name]):
            dim.Clear()
            dim.dim_value = size
    model = onnxscript.optimizer.optimize(model)
    shapes = [n for n in model.graph.node if n.op_type == "Shape"]
    if shapes:
        probe = onnx.ModelProto()
        probe.CopyFrom(model)
        probe.graph.output.extend(
            onnx.helper.make_tensor_value_info(n.output[0], onnx.TensorProto.INT64, None) for n in shapes
        )
        options = ort.SessionOptions()
        options.log_severity_level = 3
        session = ort.InferenceSession(probe.SerializeToString(), options, providers=["CPUExecutionProvider"])
        feeds = {name: np.zeros(shape, np.float32) for name, shape in VAD_SHAPES.items()}
        for node, value in zip(shapes, session.run([n.output[0] for n in shapes], feeds)):
            model.graph.node.remove(node)
            model.graph.initializer.append(numpy_helper.from_array(value, node.output[0]))
        model = onnxscript.optimizer.optimize(model)
    left = sorted({n.op_type for n in model.graph.node} & {"If", "Shape", "Equal"})
    if left:
        raise ValueError(f"the VAD still has {', '.join(left)} after freezing its shapes")
    onnx.save(model, str(dest))


def _ort(members: list[Path], dest: Path) -> None:
    """The merged decoder keeps its int8 weights with their dequantisation: folding them triples
    the file (the two `If` branches each get float copies) and was no faster on the CPU."""
    import onnx

    from engines.store.ort_to_onnx import convert_ort_file

    onnx.save(convert_ort_file(members[0]), str(dest))


def _ort_folded(members: list[Path], dest: Path) -> None:
    """Convert, let ONNX Runtime's basic (provider-independent) optimizations fold the weight
    dequantisation and shape arithmetic into constants, then make the written-out layer norms
    `LayerNormalization` (engines.store.layer_norm says why)."""
    import onnx
    import onnxruntime as ort

    from engines.store.layer_norm import fuse_layer_norms
    from engines.store.ort_to_onnx import convert_ort_file

    unfolded, folded = dest.with_suffix(".unfolded.onnx"), dest.with_suffix(".folded.onnx")
    onnx.save(convert_ort_file(members[0]), str(unfolded))
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(folded)
    options.log_severity_level = 3
    ort.InferenceSession(str(unfolded), options, providers=["CPUExecutionProvider"])
    unfolded.unlink()
    model = onnx.load(str(folded))
    fuse_layer_norms(model)
    onnx.save(model, str(dest))
    folded.unlink()


# Piper's VITS graph cut where the text side ends: the noisy latent frames (z_p, already stretched
# to the phonemes' durations) and their mask. Tensor names of the pinned voice (en_US-joe-medium).
PIPER_LATENT, PIPER_MASK = "/Add_output_0", "/Cast_2_output_0"


def _piper_front(members: list[Path], dest: Path) -> None:
    """The voice's text side (phonemes -> durations -> latent frames): exposes the per-phoneme
    sample counts (the lip-sync timings) as an output, and ends at the latent frames, which the
    vocoder (`_piper_vocoder`) turns into sound piece by piece, so a reply's first sound does not
    wait for its whole sentence (device/models/tts.py)."""
    import onnx
    from piper.patch_voice_with_alignment import add_alignment_output

    model = onnx.load(str(members[0]))
    alignment = add_alignment_output(model)
    # piper appends the output without a type; the ONNX checker and TensorRT's parser want one.
    model.graph.output[-1].CopyFrom(
        onnx.helper.make_tensor_value_info(alignment, onnx.TensorProto.FLOAT, ["batch_size", 1, "phonemes"])
    )
    front = _cut(model, [i.name for i in model.graph.input], [PIPER_LATENT, alignment])
    _rename(front, PIPER_LATENT, "latent")
    onnx.checker.check_model(front)
    onnx.save(front, str(dest))


def _piper_vocoder(members: list[Path], dest: Path) -> None:
    """The voice's sound side (latent frames -> samples: the flow, then the HiFi-GAN decoder): only
    convolutions over frames, so a piece of frames with enough frames of context on each side gives
    the same samples as the whole sentence (engines.model_specs.VOCODER_CONTEXT)."""
    import onnx

    model = onnx.load(str(members[0]))
    vocoder = _cut(model, [PIPER_LATENT, PIPER_MASK], [o.name for o in model.graph.output[:1]])
    _rename(vocoder, PIPER_LATENT, "latent")
    _rename(vocoder, PIPER_MASK, "mask")
    onnx.checker.check_model(vocoder)
    onnx.save(vocoder, str(dest))


def _cut(model, inputs: list[str], outputs: list[str]):
    """The part of `model` from `inputs` to `outputs` (ONNX's own extractor)."""
    import onnx

    made = {name for node in model.graph.node for name in node.output} | {i.name for i in model.graph.input}
    missing = [name for name in inputs + outputs if name not in made]
    if missing:
        raise ValueError(
            f"the voice has no tensor {', '.join(missing)}: the cut points are those of the pinned Piper voice"
        )
    return onnx.utils.Extractor(onnx.shape_inference.infer_shapes(model)).extract_model(inputs, outputs)


def _rename(model, old: str, new: str) -> None:
    """Give a tensor at the cut a name that says what it is."""
    for node in model.graph.node:
        node.input[:] = [new if name == old else name for name in node.input]
        node.output[:] = [new if name == old else name for name in node.output]
    for value in (*model.graph.input, *model.graph.output, *model.graph.value_info):
        if value.name == old:
            value.name = new


def _tflite(members: list[Path], dest: Path) -> None:
    import onnx
    import tflite2onnx
    from onnx import version_converter

    logging.getLogger("tflite2onnx").setLevel(logging.ERROR)  # one warning per float16 weight
    converted = dest.with_suffix(".opset11.onnx")
    tflite2onnx.convert(str(members[0]), str(converted))
    model = version_converter.convert_version(onnx.load(str(converted)), FACE_OPSET)
    converted.unlink()
    # tflite2onnx emits initializers in set order, which changes with Python's hash seed: sort them,
    # so every robot converts to the same bytes and the shipped calibration table's sha256 matches.
    ordered = sorted(model.graph.initializer, key=lambda t: t.name)
    del model.graph.initializer[:]
    model.graph.initializer.extend(ordered)
    onnx.checker.check_model(model)
    onnx.save(model, str(dest))


def _bert(members: list[Path], dest: Path) -> None:
    import onnx

    from engines.store.bert_to_onnx import build_bert_encoder

    onnx.save(build_bert_encoder(members[0], members[1]), str(dest))


def _float_biases(members: list[Path], dest: Path) -> None:
    """Smart Turn's "-cpu" model is quantized with Q/DQ pairs, its biases stored as INT32 behind a
    `DequantizeLinear`. TensorRT's parser refuses a DequantizeLinear of INT32 (onnx-tensorrt's
    operator table: DequantizeLinear takes INT8, FP8, INT4), so each such bias is dequantized here,
    once, into the FP32 constant the node would compute (int32 x scale, zero point 0): the same
    values, and the weights' and activations' Q/DQ pairs stay for TensorRT's explicit quantization."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(members[0]))
    constants = {t.name: t for t in model.graph.initializer}
    kept = []
    for node in model.graph.node:
        source = constants.get(node.input[0]) if node.op_type == "DequantizeLinear" else None
        if source is None or source.data_type != onnx.TensorProto.INT32:
            kept.append(node)
            continue
        values = numpy_helper.to_array(source).astype(np.float64) * numpy_helper.to_array(constants[node.input[1]])
        model.graph.initializer.append(numpy_helper.from_array(values.astype(np.float32), node.output[0]))
    del model.graph.node[:]
    model.graph.node.extend(kept)
    used = {name for node in kept for name in node.input}
    unused = [
        t for t in model.graph.initializer if t.name not in used and t.name not in {o.name for o in model.graph.output}
    ]
    for tensor in unused:
        model.graph.initializer.remove(tensor)
    onnx.checker.check_model(model)
    onnx.save(model, str(dest))


RECIPES: dict[str, Callable[[list[Path], Path], None]] = {
    "float_biases": _float_biases,
    "copy": _copy,
    "vad_fixed_rate": _vad_fixed_rate,
    "ort": _ort,
    "ort_folded": _ort_folded,
    "piper_front": _piper_front,
    "piper_vocoder": _piper_vocoder,
    "tflite": _tflite,
    "bert": _bert,
}
