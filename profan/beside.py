"""Running one pure computation in a thread beside the caller's own.

The timeline passes of a report (steps, the busy-time split, overlap) are numpy sorts, scans and
gathers over every op execution, which release the GIL: two of them in two threads take about
the time of the longer, where a second CPU is free.  Only for pure functions of inputs that
neither side changes while both run.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Beside(Generic[T]):
    """``function(*args)`` running in a thread; ``result()`` waits for it and returns its value
    or raises its exception.  It runs in a copy of the caller's context: what the caller has in
    force there (the user's chip and kernel tables, the memory space counted) holds in it too."""

    def __init__(self, function: Callable[..., T], *args: object) -> None:
        self._function, self._args = function, args
        self._context = contextvars.copy_context()
        self._value: T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="profan-beside", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._value = self._context.run(self._function, *self._args)
        except BaseException as error:  # handed to the caller by result()
            self._error = error

    def result(self) -> T:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]
