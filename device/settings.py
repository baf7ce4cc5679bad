"""Settings: frozen dataclasses per subsystem, loaded from one TOML file over an embedded default.

The embedded `default.toml` is the single place defaults live (and documents every key); a user's
file only overrides. Unknown sections or keys and wrong types are errors that name the file and key.
"""

from __future__ import annotations

import dataclasses
import math
import typing
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engines.engine_manager import EngineSettings
from engines.errors import OrinAvatarError
from engines.model_specs import FRAME, SPEECH_RATE

from device.toml_file import tomllib

DEFAULT_FILE = Path(__file__).with_name("default.toml")
SYSTEM_FILE = Path("/etc/orin-avatar/orin-avatar.toml")


class SettingsError(OrinAvatarError):
    """A settings file is unreadable or has a bad key or value."""


@dataclass(frozen=True)
class ModelSettings:
    store: str  # model store directory; "" means the default location


MAX_THREADS = 64  # ONNX Runtime threads per model; more only oversubscribes the Orin's 12 cores


@dataclass(frozen=True)
class CpuSettings:
    threads: int  # ONNX Runtime intra-op threads per model

    def __post_init__(self) -> None:
        if not 1 <= self.threads <= MAX_THREADS:
            raise ValueError(f"threads must be between 1 and {MAX_THREADS}, got {self.threads}")


@dataclass(frozen=True)
class EndpointSettings:
    """[endpoint] in the settings file (defaults in device/default.toml)."""

    vad_threshold: float  # VAD probability that counts as speech
    onset_ms: int  # speech this long starts an utterance
    hangover_ms: int  # silence this long ends it (without an end-of-turn verdict)
    pre_roll_ms: int  # audio kept from before the speech start
    max_utterance_s: float  # a longer utterance is cut here
    end_of_turn: bool  # judge each pause with the end-of-turn model
    end_of_turn_threshold: float  # its probability from which the visitor has finished
    min_hangover_ms: int  # silence that ends an utterance judged finished
    max_hangover_ms: int  # silence that ends an utterance judged unfinished
    wait_after_open_words: bool  # a pause after "the", "to", "if"... waits max_hangover_ms
    end_on_known_question: bool  # a pause after a question the robot is sure of waits min_hangover_ms
    known_question_threshold: float  # how sure: the dialogue's similarity, at least [dialogue] confident_threshold
    rejoin_within_ms: int  # speech starting this soon after an utterance's end may go on with it (0: never)
    min_level_over_floor_db: float  # speech must be this much louder than the noise floor (0: off)
    array_level_over_floor_db: float  # the same, when the microphone is an array's beam
    level_hysteresis_db: float  # once an utterance has started, a frame goes on with it at this much less
    array_level_hysteresis_db: float  # the same, when the microphone is an array's beam
    array_min_on_axis_db: float  # with an array, speech must hold this much of its level in the beam
    quiet_hangover_ms: int  # hangover_ms where the visitor stands quiet_over_floor_db over the floor (0: off)
    quiet_over_floor_db: float  # the utterance's loudest tenth this far over the floor: a quiet room

    def __post_init__(self) -> None:
        if not 0 < self.vad_threshold < 1:
            raise ValueError(f"vad_threshold must be between 0 and 1, got {self.vad_threshold}")
        for key in (
            "onset_ms",
            "hangover_ms",
            "pre_roll_ms",
            "min_hangover_ms",
            "max_hangover_ms",
            "rejoin_within_ms",
            "quiet_hangover_ms",
        ):
            if not 0 <= getattr(self, key) <= 5000:
                raise ValueError(f"{key} must be between 0 and 5000 ms, got {getattr(self, key)}")
        if not self.min_hangover_ms <= self.hangover_ms <= self.max_hangover_ms:
            raise ValueError(
                f"min_hangover_ms <= hangover_ms <= max_hangover_ms must hold, got {self.min_hangover_ms}, "
                f"{self.hangover_ms}, {self.max_hangover_ms}"
            )
        if self.quiet_hangover_ms and not self.min_hangover_ms <= self.quiet_hangover_ms <= self.hangover_ms:
            raise ValueError(
                f"quiet_hangover_ms must be 0 (off) or between min_hangover_ms and hangover_ms "
                f"({self.min_hangover_ms}-{self.hangover_ms}), got {self.quiet_hangover_ms}"
            )
        if not 0 <= self.quiet_over_floor_db <= 100:
            raise ValueError(f"quiet_over_floor_db must be between 0 and 100 dB, got {self.quiet_over_floor_db}")
        if not 0 < self.known_question_threshold < 1:
            raise ValueError(f"known_question_threshold must be between 0 and 1, got {self.known_question_threshold}")
        if not 0 < self.end_of_turn_threshold < 1:
            raise ValueError(f"end_of_turn_threshold must be between 0 and 1, got {self.end_of_turn_threshold}")
        for key, hysteresis in (
            ("min_level_over_floor_db", "level_hysteresis_db"),
            ("array_level_over_floor_db", "array_level_hysteresis_db"),
        ):
            if not 0 <= getattr(self, key) <= 30:
                raise ValueError(f"{key} must be between 0 and 30 dB, got {getattr(self, key)}")
            if not 0 <= getattr(self, hysteresis) <= getattr(self, key):
                raise ValueError(
                    f"{hysteresis} must be between 0 and {key} ({getattr(self, key):g} dB), "
                    f"got {getattr(self, hysteresis)}"
                )
        if not -30 <= self.array_min_on_axis_db <= 0:
            raise ValueError(
                f"array_min_on_axis_db must be between -30 (any direction) and 0 dB, got {self.array_min_on_axis_db}"
            )
        if not 1 <= self.max_utterance_s <= 60:
            raise ValueError(f"max_utterance_s must be between 1 and 60 s, got {self.max_utterance_s}")

    def through_array(self) -> "EndpointSettings":
        """The endpointing of an array's beam: a hall's talk through it is less even than at one
        microphone (the beam takes out some talkers more than others), so it has its own margins."""
        return dataclasses.replace(
            self,
            min_level_over_floor_db=self.array_level_over_floor_db,
            level_hysteresis_db=self.array_level_hysteresis_db,
        )

    def frames(self, ms: float) -> int:
        return max(1, round(ms / 1000 * SPEECH_RATE / FRAME))


@dataclass(frozen=True)
class DialogueSettings:
    """[dialogue] in the settings file."""

    knowledge: str  # knowledge base TOML; "" is the embedded visitor-centre example
    threshold: float  # cosine similarity below which the visitor is asked to rephrase
    confident_threshold: float  # below it (and at or above threshold) the robot asks back

    def __post_init__(self) -> None:
        if not 0 < self.threshold < 1:
            raise ValueError(f"threshold must be between 0 and 1, got {self.threshold}")
        if not self.threshold <= self.confident_threshold < 1:
            raise ValueError(
                f"confident_threshold must be at least threshold ({self.threshold}) and below 1, "
                f"got {self.confident_threshold}; equal to threshold turns asking back off"
            )


def _check_url(url: str) -> None:
    """An LLM address every turn can reach: scheme, host and a port that exists (urlsplit checks its range)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"url must start with http:// or https://, got {url!r}")
    try:
        parts.port
    except ValueError:
        raise ValueError(f"url {url!r} has no valid port: give one between 1 and 65535") from None
    if not parts.hostname or parts.port == 0:
        raise ValueError(f"url {url!r} names no host and port to reach, e.g. http://10.0.0.5:8000/v1")


@dataclass(frozen=True)
class LlmSettings:
    """[llm] in the settings file."""

    url: str  # base URL, e.g. http://10.0.0.5:8000/v1 ; empty disables the LLM
    model: str
    first_token_s: float  # wait for the reply's first word (and at most between two words)
    reply_s: float  # the whole reply
    knowledge_threshold: float  # a knowledge-base match this close is answered from the knowledge base
    grounding_entries: int  # closest knowledge-base entries sent with each question
    visit_turns: int  # turns of the current visit sent with each question
    temperature: float
    system_prompt: str
    max_words: int

    def __post_init__(self) -> None:
        if self.url:
            _check_url(self.url)
        if not 0.1 <= self.first_token_s <= 10:
            raise ValueError(f"first_token_s must be between 0.1 and 10 s, got {self.first_token_s}")
        if not self.first_token_s <= self.reply_s <= 120:
            raise ValueError(f"reply_s must be between first_token_s and 120 s, got {self.reply_s}")
        if not 0 < self.knowledge_threshold <= 1:
            raise ValueError(f"knowledge_threshold must be above 0 and at most 1, got {self.knowledge_threshold}")
        if not 0 <= self.grounding_entries <= 20:
            raise ValueError(f"grounding_entries must be between 0 and 20, got {self.grounding_entries}")
        if not 0 <= self.visit_turns <= 50:
            raise ValueError(f"visit_turns must be between 0 and 50, got {self.visit_turns}")
        if not 0 <= self.temperature <= 2:
            raise ValueError(f"temperature must be between 0 and 2, got {self.temperature}")
        if not 1 <= self.max_words <= 500:
            raise ValueError(f"max_words must be between 1 and 500, got {self.max_words}")

    @property
    def enabled(self) -> bool:
        return bool(self.url)


@dataclass(frozen=True)
class SpeechSettings:
    """[tts] in the settings file."""

    variability: float  # 0 = the same audio for the same sentence, 1 = the voice's own variation
    length_scale: float  # above 1 speaks slower
    cache: bool  # keep synthesized sentences; prepare the knowledge base's answers at start

    def __post_init__(self) -> None:
        if not 0 <= self.variability <= 1:
            raise ValueError(f"variability must be between 0 and 1, got {self.variability}")
        if not 0.5 <= self.length_scale <= 2:
            raise ValueError(f"length_scale must be between 0.5 and 2, got {self.length_scale}")


def bgr(hex_colour: str) -> tuple[int, int, int]:
    """'#rrggbb' -> OpenCV's (b, g, r)."""
    value = hex_colour.lstrip("#")
    if len(value) != 6:
        raise ValueError(f"colour {hex_colour!r} is not #rrggbb")
    r, g, b = (int(value[i : i + 2], 16) for i in (0, 2, 4))
    return b, g, r


@dataclass(frozen=True)
class AvatarSettings:
    """[avatar] in the settings file."""

    display: str  # window | file | none
    style: str  # cartoon | portrait
    portrait: str  # the portrait style's photo
    width: int
    height: int
    fps: float
    background: str
    skin: str
    hair: str
    clothes: str
    eyes: str
    irises: str
    pupils: str
    mouth: str
    lines: str

    def __post_init__(self) -> None:
        if self.display not in ("window", "file", "none"):
            raise ValueError(f"display must be window, file or none, got {self.display!r}")
        if self.style not in ("cartoon", "portrait"):
            raise ValueError(f"style must be cartoon or portrait, got {self.style!r}")
        if self.style == "portrait" and not self.portrait:
            raise ValueError(
                'style "portrait" needs portrait = the path of a frontal photo '
                "(check it with `orin-avatar avatar check`)"
            )
        if not (160 <= self.width <= 7680 and 120 <= self.height <= 4320):
            raise ValueError(f"width and height must be between 160x120 and 7680x4320, got {self.width}x{self.height}")
        if not 1 <= self.fps <= 120:
            raise ValueError(f"fps must be between 1 and 120, got {self.fps}")
        for key in ("background", "skin", "hair", "clothes", "eyes", "irises", "pupils", "mouth", "lines"):
            try:
                bgr(getattr(self, key))
            except ValueError:
                raise ValueError(f"{key} must be a colour #rrggbb, got {getattr(self, key)!r}") from None

    def colour(self, key: str) -> tuple[int, int, int]:
        """One of the colours as OpenCV's (b, g, r)."""
        return bgr(getattr(self, key))


@dataclass(frozen=True)
class AudioSettings:
    """[audio] in the settings file."""

    input_device: str
    output_device: str
    array_channels: tuple[int, ...]  # the capture channels of an array's microphones, in order round its circle
    array_radius_mm: float
    array_first_deg: float  # the direction of the first listed microphone (0: straight ahead, positive: right)

    def __post_init__(self) -> None:
        channels = tuple(self.array_channels)
        if any(type(c) is not int or c < 0 for c in channels) or len(set(channels)) != len(channels):
            raise ValueError(f"array_channels must list distinct capture channels (0 or more), got {list(channels)}")
        if len(channels) == 1:
            raise ValueError(
                f"array_channels must list 2 or more microphones, or none (one microphone), got {list(channels)}"
            )
        if channels and not 5 <= self.array_radius_mm <= 500:
            raise ValueError(f"array_radius_mm must be between 5 and 500 mm, got {self.array_radius_mm}")
        object.__setattr__(self, "array_channels", channels)  # frozen: a tuple, not the TOML's list


@dataclass(frozen=True)
class EngagementSettings:
    min_face_px: int
    arrive_s: float
    leave_s: float


@dataclass(frozen=True)
class CameraSettings:
    """[camera] in the settings file."""

    source: str
    width: int
    height: int
    fps: float
    detect_hz: float
    min_face_px: int
    arrive_s: float
    leave_s: float
    gate_listening: bool
    field_of_view_deg: float  # horizontal

    def __post_init__(self) -> None:
        if not 20 <= self.field_of_view_deg <= 170:
            raise ValueError(f"field_of_view_deg must be between 20 and 170 degrees, got {self.field_of_view_deg}")
        if not 0.5 <= self.detect_hz <= 30:
            raise ValueError(f"detect_hz must be between 0.5 and 30, got {self.detect_hz}")
        if self.min_face_px < 10:
            raise ValueError(f"min_face_px must be 10 or more, got {self.min_face_px}")
        if self.arrive_s < 0 or self.leave_s <= 0:
            raise ValueError(f"arrive_s must be 0 or more and leave_s above 0, got {self.arrive_s}, {self.leave_s}")

    def engagement(self) -> "EngagementSettings":
        return EngagementSettings(self.min_face_px, self.arrive_s, self.leave_s)

    def direction_of(self, point: tuple[float, float]) -> tuple[float, float]:
        """A point of the picture (-1..1 across and down) as seen from the camera: (azimuth, positive to
        the robot's right; elevation, positive up) in radians, for a pinhole camera with square pixels
        looking straight ahead."""
        half_width = math.tan(math.radians(self.field_of_view_deg) / 2)
        return math.atan(point[0] * half_width), -math.atan(point[1] * half_width * self.height / self.width)


@dataclass(frozen=True)
class BargeInSettings:
    """[bargein]: listening while the robot speaks."""

    enabled: bool  # visitor speech during a reply pauses it; a question cuts it and is answered
    min_speech_ms: int  # speech this long (on the echo-cancelled signal) pauses the reply
    speech_over_room_db: float  # ...and is this much over the room's level during replies (0: any level)
    sound_onset_db: float  # a sound this much over the room's level during replies pauses it at once (0: off)
    min_question_ms: int  # a pausing utterance shorter than this (a cough, "mm-hm") lets the reply go on
    sure_question_ms: int  # shorter than this, it cuts the reply only if the dialogue is sure what it asks
    hold_hangover_ms: int  # the silence that ends an utterance that paused a reply
    echo_canceller: str  # "webrtc" (AEC3) or "none"
    echo_tail_ms: int  # how much of the room's echo AEC3's linear filter covers
    startup_phrase: str  # said once when the daemon starts, for the canceller to learn the room ("": none)

    def __post_init__(self) -> None:
        if not FRAME * 1000 // SPEECH_RATE <= self.min_speech_ms <= 2000:
            raise ValueError(
                f"min_speech_ms must be between {FRAME * 1000 // SPEECH_RATE} and 2000 ms, got {self.min_speech_ms}"
            )
        if not 0 <= self.speech_over_room_db <= 20:
            raise ValueError(
                f"speech_over_room_db must be between 0 (any level) and 20 dB, got {self.speech_over_room_db}"
            )
        if self.sound_onset_db != 0 and not 6 <= self.sound_onset_db <= 40:
            raise ValueError(f"sound_onset_db must be 0 (off) or between 6 and 40 dB, got {self.sound_onset_db}")
        if not 0 <= self.min_question_ms <= 5000:
            raise ValueError(f"min_question_ms must be between 0 and 5000 ms, got {self.min_question_ms}")
        if not self.min_question_ms <= self.sure_question_ms <= 5000:
            raise ValueError(
                f"sure_question_ms must be between min_question_ms ({self.min_question_ms}) and 5000 ms, "
                f"got {self.sure_question_ms}"
            )
        if not 0 <= self.hold_hangover_ms <= 3000:
            raise ValueError(f"hold_hangover_ms must be between 0 and 3000 ms, got {self.hold_hangover_ms}")
        if self.echo_canceller not in ECHO_CANCELLERS:
            raise ValueError(f"echo_canceller must be one of {', '.join(ECHO_CANCELLERS)}, got {self.echo_canceller!r}")
        if not 52 <= self.echo_tail_ms <= 500 or self.echo_tail_ms % 4:
            raise ValueError(f"echo_tail_ms must be a multiple of 4 between 52 and 500 ms, got {self.echo_tail_ms}")
        if len(self.startup_phrase) > 200 or not self.startup_phrase.isprintable():
            raise ValueError(
                f"startup_phrase must be one line of at most 200 characters, got {self.startup_phrase[:40]!r}..."
            )


ECHO_CANCELLERS = ("webrtc", "none")


@dataclass(frozen=True)
class Settings:
    models: ModelSettings
    cpu: CpuSettings
    endpoint: EndpointSettings
    dialogue: DialogueSettings
    tts: SpeechSettings
    llm: LlmSettings
    engines: EngineSettings
    avatar: AvatarSettings
    audio: AudioSettings
    camera: CameraSettings
    bargein: BargeInSettings


_CLASSES = typing.get_type_hints(Settings)


def load_settings(path: Path | None = None) -> Settings:
    """The default settings overlaid by `path` (or /etc/orin-avatar/orin-avatar.toml if present)."""
    merged = _read(DEFAULT_FILE)
    user = path if path is not None else (SYSTEM_FILE if SYSTEM_FILE.is_file() else None)
    if user is not None:
        for section, values in _read(user).items():
            if section not in merged:
                raise SettingsError(f"{user}: unknown section [{section}]; known: {', '.join(merged)}")
            if not isinstance(values, dict):
                raise SettingsError(f"{user}: '{section}' must be a [section] table")
            for key, value in values.items():
                _check_key(user, section, key, value, merged[section])
                merged[section][key] = value
    settings = Settings(**{name: _build(user or DEFAULT_FILE, name, merged[name]) for name in _CLASSES})
    if settings.llm.knowledge_threshold <= settings.dialogue.threshold:
        raise SettingsError(
            f"{user or DEFAULT_FILE}: [llm] knowledge_threshold ({settings.llm.knowledge_threshold}) must be "
            f"above [dialogue] threshold ({settings.dialogue.threshold})"
        )
    return settings


def _read(path: Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise SettingsError(
            f"settings file {path} {'does not exist' if not path.exists() else 'is not a regular file'}"
        )
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SettingsError(f"cannot read the settings file {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise SettingsError(f"settings file {path} is not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"{path}: {exc}") from None


def _check_key(path: Path, section: str, key: str, value: Any, defaults: dict[str, Any]) -> None:
    if key not in defaults:
        raise SettingsError(f"{path}: unknown key '{key}' in [{section}]; known: {', '.join(defaults)}")
    expected = type(defaults[key])
    if type(value) is not expected and not (expected is float and type(value) is int):
        raise SettingsError(f"{path}: [{section}] {key} must be {expected.__name__}, got {value!r}")


def _build(path: Path, section: str, values: dict[str, Any]):
    try:
        return _CLASSES[section](**values)
    except ValueError as exc:
        raise SettingsError(f"{path}: [{section}] {exc}") from None
