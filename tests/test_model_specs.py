"""One specification per model, one name per model everywhere."""

from __future__ import annotations

from engines.model_specs import MODELS

from calibration.targets import TARGETS
from device.bench.models import WORKLOADS


def test_every_models_files_are_in_the_store(store):
    for spec in MODELS.values():
        assert set(spec.files) <= set(store.entries()), spec.name


def test_calibration_targets_and_benchmarks_use_the_models_names():
    assert set(TARGETS) <= set(MODELS) and all(t.model == MODELS[name].model for name, t in TARGETS.items())
    assert set(WORKLOADS) == set(MODELS)


def test_the_conversation_reports_its_runners_under_the_models_names(store):
    from device.app import App
    from device.sound.speakers import RecordingSpeaker

    conversation = App().conversation(lambda rate: RecordingSpeaker(rate), build_engines=False)
    try:
        assert set(conversation.runners()) <= set(MODELS)
        assert all(runner.name == name for name, runner in conversation.runners().items())
    finally:
        conversation.close()
        conversation.speaker.close()
