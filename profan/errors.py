"""The errors profan raises for bad input.

Every error a user can cause is a ``ProfanError``; the CLI prints its message (one clear line or
block, never a traceback) and exits with its ``exit_code``.  Exit codes:

* 0 — success; 1 — a ``profan check`` budget or regression failed (not an error);
* 2 — unusable input: a file that does not parse, a trace that cannot be read, a bad config;
* 3 — an internal error in profan itself (a bug: the CLI asks the user to report it).
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 3


class ProfanError(Exception):
    """Base class of every error caused by the user's input or configuration."""

    exit_code: int = EXIT_BAD_INPUT

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class HloSyntaxError(ProfanError):
    """HLO text that does not parse: where, what was there, and what was expected."""

    label = "HLO syntax error"

    def __init__(
        self,
        reason: str,
        *,
        file: str | None = None,
        line: int | None = None,
        column: int | None = None,
        text: str = "",
        expected: tuple[str, ...] = (),
    ) -> None:
        self.reason = reason
        self.file = file
        self.line = line
        self.column = column
        self.text = text
        self.expected = expected
        super().__init__(self._format())

    def _format(self) -> str:
        where = self.file or "<hlo>"
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        message = f"{where}: {self.label}: {self.reason}"
        if self.expected:
            shown = ", ".join(self.expected[:8])
            more = f" (and {len(self.expected) - 8} more)" if len(self.expected) > 8 else ""
            message += f"; expected one of: {shown}{more}"
        if self.text:
            message += f"\n    {self.text}"
            if self.column is not None:
                message += "\n    " + " " * max(self.column - 1, 0) + "^"
        return message

    def __reduce__(self) -> tuple[object, ...]:
        # Picklable (for worker processes); keyword-only fields go through the state.
        return (type(self), (self.reason,), self.__dict__)

    def with_file(self, file: str) -> HloSyntaxError:
        """The same error, naming the file it came from."""
        return type(self)(
            self.reason,
            file=file,
            line=self.line,
            column=self.column,
            text=self.text,
            expected=self.expected,
        )


class HloInvalidError(HloSyntaxError):
    """HLO text that parses but that XLA's verifier would reject (operand shapes an op does not
    accept, a cycle, a recursive call, an impossible layout or size): where, and what was
    expected."""

    label = "invalid HLO"


class TraceError(ProfanError):
    """A trace file or directory that cannot be read or holds nothing usable."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")

    def __reduce__(self) -> tuple[type[TraceError], tuple[str, str]]:
        # Hosts load in worker processes: the error must cross the process boundary intact.
        return (TraceError, (self.path, self.reason))


class ConfigError(ProfanError):
    """A bad budget file, chip file, baseline or command-line value."""
