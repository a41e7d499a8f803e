"""Exceptions and warnings raised by dpdist."""

from __future__ import annotations

__all__ = ["DataConversionWarning", "NoPrivateResult", "ValidationError"]


class ValidationError(ValueError):
    """A parameter or an input failed validation; raised before any data is read or noised."""


class DataConversionWarning(UserWarning):
    """Input data were converted (for example integers to float64) before processing."""


class NoPrivateResult(RuntimeError):
    """A private test inside a mechanism rejected: the mechanism returned "bottom".

    The privacy budget counts as spent; ``release`` (when set) records the stage that rejected.
    """

    def __init__(self, message: str, *, stage: str | None = None, release=None):
        super().__init__(message)
        self.stage = stage
        self.release = release
