"""One source of defaults: device/default.toml. A settings dataclass may not carry a default of its own
that says otherwise (eight of EndpointSettings' did), and every key of the file is a field and back."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from device.settings import DEFAULT_FILE, Settings
from device.toml_file import tomllib

DEFAULTS = tomllib.loads(DEFAULT_FILE.read_text())


def sections() -> list[tuple[str, type]]:
    """([section], its dataclass) for every section of Settings."""
    hints = typing.get_type_hints(Settings)
    return [(field.name, hints[field.name]) for field in dataclasses.fields(Settings)]


def differences(section: str, cls: type, table: dict) -> list[str]:
    found = []
    for field in dataclasses.fields(cls):
        if field.name not in table:
            found.append(f"[{section}] {field.name} is not in device/default.toml")
            continue
        default = field.default if field.default_factory is dataclasses.MISSING else field.default_factory()
        if default is not dataclasses.MISSING and default != table[field.name]:
            found.append(
                f"{cls.__name__}.{field.name} = {default!r} in Python, {table[field.name]!r} in device/default.toml"
            )
    found += [
        f"[{section}] {key} is no field of {cls.__name__}"
        for key in set(table) - {f.name for f in dataclasses.fields(cls)}
    ]
    return found


@pytest.mark.parametrize("section, cls", sections())
def test_the_dataclasses_and_default_toml_agree(section, cls):
    assert differences(section, cls, DEFAULTS[section]) == []


def test_a_python_default_that_differs_is_found():
    @dataclasses.dataclass(frozen=True)
    class Example:
        hangover_ms: int = 400

    assert differences("endpoint", Example, {"hangover_ms": 352}) == [
        "Example.hangover_ms = 400 in Python, 352 in device/default.toml"
    ]
    assert differences("endpoint", Example, {"hangover_ms": 400, "onset_ms": 64}) == [
        "[endpoint] onset_ms is no field of Example"
    ]
