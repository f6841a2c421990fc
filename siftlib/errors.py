"""Exceptions raised by siftlib, under one root.

    SiftError
     ├── ConfigError       a config, client or secret file is invalid
     ├── QueryError        the caller's query or parameters are invalid
     ├── NoResultsError    no source could answer (nothing enabled, or every one failed)
     ├── AuthError         the sift server refused our token (client mode)
     └── UnreachableError  the sift server could not be reached (client mode)

A failing *source* is never an exception outside the pipeline: it becomes a warning.
"""


class SiftError(Exception):
    """Something sift cannot do, with a sentence fit for the user."""


class ConfigError(SiftError):
    """A configuration file or value is invalid."""


class QueryError(SiftError):
    """The query or its parameters are invalid."""


class NoResultsError(SiftError):
    """No source produced results."""

    def __init__(self, message: str, warnings: list[str] | None = None) -> None:
        super().__init__(message)
        self.warnings = list(warnings or [])


class AuthError(SiftError):
    """The sift server refused the credentials."""


class UnreachableError(SiftError):
    """The sift server could not be reached."""
