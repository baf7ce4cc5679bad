"""The portable calibration table: TensorRT cache rendering, bit-exact round trips, strict reading."""

import dataclasses
import json
import math
import struct

import numpy as np
import pytest

from engines.calibration_table import (
    CalibrationTable,
    CalibrationTableError,
    parse_trt_cache,
    read_table,
    render_trt_cache,
    table_from_trt_cache,
    trt_version_number,
    write_table,
)


def _table(**amax) -> CalibrationTable:
    return CalibrationTable("face.onnx", "ab" * 32, "entropy", amax or {"input": 1.0, "conv/out": 6.123456789})


@pytest.mark.parametrize(
    "version, header", [("8.6.1", "TRT-8601-EntropyCalibration2"), ("10.3.0", "TRT-100300-EntropyCalibration2")]
)
def test_round_trip_through_the_tensorrt_cache_is_bit_exact(tmp_path, version, header):
    rng = np.random.default_rng(0)
    amax = {f"tensor_{i}": float(v) for i, v in enumerate(rng.uniform(1e-3, 300, 200))}
    path = tmp_path / "face.json"
    write_table(path, _table(**amax))
    table = read_table(path)
    text = render_trt_cache(table, version).decode()
    assert text.splitlines()[0] == header
    back = table_from_trt_cache(text, table.model, table.model_sha256, table.method)
    assert back.amax == table.amax  # every float identical, bit for bit
    assert render_trt_cache(back, version).decode() == text
    # Each line is the big-endian float32 of amax / 127.
    name, hexbits = text.splitlines()[1].split(": ")
    assert struct.unpack(">f", bytes.fromhex(hexbits))[0] == np.float32(table.amax[name] / 127)


def test_version_numbers_in_headers():
    assert trt_version_number("8.6.1") == 8601 and trt_version_number("10.3.0") == 100300
    assert trt_version_number("11.4.1") == 110401
    minmax = CalibrationTable("m.onnx", "0" * 64, "minmax", {"x": 1.0})
    assert render_trt_cache(minmax, "10.3.0").startswith(b"TRT-100300-MinMaxCalibration\n")


def test_tensors_kept_out_of_int8_are_missing_from_the_cache():
    text = render_trt_cache(_table(a=1.0, b=2.0, c=3.0), "10.3.0", fp16_tensors={"b"}).decode()
    assert [line.split(":")[0] for line in text.splitlines()[1:]] == ["a", "c"]


def test_malformed_cache_lines_are_reported_with_their_number():
    with pytest.raises(CalibrationTableError, match="line 3"):
        parse_trt_cache("TRT-100300-EntropyCalibration2\ninput: 3c010204\nconv out 3c010204\n")
    with pytest.raises(CalibrationTableError, match="line 2"):
        parse_trt_cache("TRT-100300-EntropyCalibration2\ninput: xyz\n")
    with pytest.raises(CalibrationTableError, match="line 1"):
        parse_trt_cache("input: 3c010204\n")
    with pytest.raises(CalibrationTableError, match="line 2.*finite and above zero"):
        parse_trt_cache("TRT-100300-EntropyCalibration2\ninput: 7fc00000\n")  # NaN


@pytest.mark.parametrize("bad", [math.nan, math.inf, 0.0, -1.0])
def test_nan_infinite_zero_or_negative_ranges_leave_no_table(tmp_path, bad):
    path = tmp_path / "face.json"
    with pytest.raises(CalibrationTableError, match="conv/out"):
        write_table(path, _table(input=1.0, **{"conv/out": bad}))
    assert not path.exists() and not list(tmp_path.iterdir())


def test_a_table_for_another_model_is_refused(tmp_path):
    path = tmp_path / "face.json"
    write_table(path, _table())
    with pytest.raises(CalibrationTableError, match="made for another face.onnx.*orin-avatar calibrate face"):
        read_table(path, model_sha256="cd" * 32)


def test_unknown_tensor_names_are_refused(tmp_path):
    path = tmp_path / "face.json"
    write_table(path, _table())
    with pytest.raises(CalibrationTableError, match="conv/out"):
        read_table(path, tensor_names={"input"})


def test_fp16_layers_that_are_not_weighted_layers_are_refused(tmp_path):
    path = tmp_path / "face.json"
    write_table(path, dataclasses.replace(_table(), fp16_nodes=("conv9",)))
    assert read_table(path, layer_names={"conv9"}).fp16_nodes == ("conv9",)
    with pytest.raises(CalibrationTableError, match="FP16 layer.*conv9.*not weighted layers"):
        read_table(path, layer_names={"conv1"})


def test_broken_table_files(tmp_path):
    path = tmp_path / "face.json"
    path.write_text("{not json")
    with pytest.raises(CalibrationTableError, match="not valid JSON"):
        read_table(path)
    path.write_text(json.dumps({"schema": 2, "model": "face.onnx"}))
    with pytest.raises(CalibrationTableError, match="missing or malformed field"):
        read_table(path)
    path.write_text(json.dumps({"schema": 1, "model": "face.onnx", "fp32_nodes": []}))
    with pytest.raises(CalibrationTableError, match="schema 1.*run 'orin-avatar calibrate'"):
        read_table(path)
    path.write_text(
        json.dumps({"schema": 2, "model": "face.onnx", "model_sha256": "x", "method": "entropy", "amax": {"a": "NaN"}})
    )
    with pytest.raises(CalibrationTableError, match="finite"):
        read_table(path)
