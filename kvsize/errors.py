"""Every exception kvsize raises on purpose, and the process exit codes they map to."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Process exit codes: the contract scripts and CI pipelines rely on."""

    OK = 0
    CHECK_FAILED = 1  # a capacity check or a verification did not pass
    BAD_INPUT = 2  # bad input or usage
    ENVIRONMENT = 3  # hub unreachable, missing optional extra, no GPU


class KvsizeError(Exception):
    """Expected failure: the CLI prints the message and hint on one line each, with no traceback."""

    exit_code: ExitCode = ExitCode.BAD_INPUT
    line: int | None = None
    """The line of the input file the error is about, when known (capacity files: GitHub annotations)."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        # One line whatever the text quoted from a config or a file holds (line breaks, tabs).
        super().__init__(" ".join(message.split()))
        self.hint = " ".join(hint.split()) if hint else hint


class ConfigError(KvsizeError):
    """A config.json that cannot be read or does not describe a model kvsize can size."""


class ModelNotFound(KvsizeError):
    """A model reference that is neither a local config, a registry entry nor a reachable hub repo."""


class UnknownGpuProfile(KvsizeError):
    """A --gpu name that matches no profile."""


class UsageError(KvsizeError):
    """A command-line value that cannot be parsed (a context length, a dtype, a size)."""


class EnvironmentProblem(KvsizeError):
    """The machine cannot do what was asked: hub unreachable, missing extra, no GPU."""

    exit_code = ExitCode.ENVIRONMENT


class MissingExtra(EnvironmentProblem):
    """An optional dependency group is not installed."""
