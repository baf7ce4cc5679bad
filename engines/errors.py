"""Typed errors that say what failed and what to do about it.

Every error a user can cause or fix derives from `OrinAvatarError`; the command line prints its
message and exits with status 2 instead of a traceback.
"""


class OrinAvatarError(Exception):
    """A failure the user can act on; the message names the thing and the fix."""


class ModelStoreError(OrinAvatarError):
    """The model store is missing, incomplete or does not match its manifest."""


class ModelFetchError(OrinAvatarError):
    """A pinned wheel could not be fetched or did not match its pinned hash."""


class RunnerError(OrinAvatarError):
    """A runner could not be activated or failed during inference."""


class InputError(OrinAvatarError):
    """Input data (audio, image, text) is unusable."""
