"""Ports: how a lower app tells higher apps that something changed without importing them.

A port is an explicit registry (not a Django signal): the lower app announces, and each higher app
registers its handler once, in its `AppConfig.ready()`. `handlers()` says exactly who listens, so a
test can check the wiring.

- `ownership_changed`: who used what changed (an experiment's or a deployment's resource ids or
  their times, a tag key alias, an allocation rule, a project). The core apps announce it through
  `apps.projects.services.ownership_announce`, with `resource_ids` (the ids added, removed or
  whose usage window moved; None: all history may have changed), `reason` (a sentence for the
  run's record) and `created_by` (the user, or None). Billing registers the re-attribution, which
  returns its `AttributionRun` (or None when there was nothing to re-attribute).
- `spend_data_changed`: what is stored about spend changed. Billing announces it after a delivery
  is loaded or replaced and after a re-attribution, gpu after a GPU metrics import, with
  `start` and `end` (dates: the whole UTC days `[start, end)` that changed) and `reason` (a short
  word: "delivery", "reattribution", "gpu_import"). Handlers take exactly
  `(*, start: date, end: date, reason: str)` and only enqueue work (on commit), never do heavy
  work inline.

The spend app registers with both: any change of either moves the data version its cached
figures are keyed by (`apps.spend.figures`).
"""

import contextlib
from collections.abc import Callable, Iterator


class Port:
    """An explicit registry: a lower app announces, higher apps register a handler at startup."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._handlers: list[Callable[..., object]] = []

    def __repr__(self) -> str:
        return f"Port({self.name!r})"

    def register(self, handler: Callable[..., object]) -> None:
        """Add `handler`; registering the same handler again changes nothing."""
        if handler not in self._handlers:
            self._handlers.append(handler)

    def handlers(self) -> tuple[Callable[..., object], ...]:
        return tuple(self._handlers)

    @contextlib.contextmanager
    def muted(self, handler: Callable[..., object]) -> Iterator[None]:
        """Leave `handler` out of the announcements made inside the block, for a caller that does
        the handler's work itself once afterwards (seed_demo recomputes the findings once, after
        loading every file, where each file would have queued a recompute of its own)."""
        if handler not in self._handlers:
            raise ValueError(f"{handler.__qualname__} is not registered with {self!r}")
        index = self._handlers.index(handler)
        self._handlers.remove(handler)
        try:
            yield
        finally:
            self._handlers.insert(index, handler)

    def announce(self, **kwargs) -> list[object]:
        """Call every handler with `kwargs`, in the order they registered; their results."""
        return [handler(**kwargs) for handler in self._handlers]


ownership_changed = Port("ownership changed")
spend_data_changed = Port("spend data changed")
