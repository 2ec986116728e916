"""Ports: explicit registries through which a lower app announces a change a higher app reacts to.

A lower app (billing, gpu) calls `announce(...)`; a higher app registers a handler in its
`AppConfig.ready()`. No Django signals: every handler is listed here, at startup, by name.
"""

from collections.abc import Callable


class Port:
    """An explicit registry: a lower app announces, higher apps register a handler at startup."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._handlers: list[Callable[..., object]] = []

    def __repr__(self) -> str:
        return f"Port({self.name!r})"

    def register(self, handler: Callable[..., object]) -> None:
        # ready() may run more than once (tests, a reloaded app registry): once is enough.
        if handler not in self._handlers:
            self._handlers.append(handler)

    def handlers(self) -> tuple[Callable[..., object], ...]:
        return tuple(self._handlers)

    def announce(self, **kwargs) -> list[object]:
        return [handler(**kwargs) for handler in self._handlers]


ownership_changed = Port("ownership changed")
# kwargs: start=<date>, end=<date> ([start, end) in whole UTC days), reason=<short word>.
spend_data_changed = Port("spend data changed")
