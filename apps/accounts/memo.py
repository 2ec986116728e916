"""Values read once per request and kept for the rest of it.

A page asks some questions several times (which projects someone sees, whether they lead a team):
its role, its figures' keys and its sections each ask. A `RequestMemo` answers each key once per
request and forgets everything when the request ends, or at once when one of the models its
answers read is saved or deleted in the request. Outside a request (a task, a command) it keeps
nothing: every call computes.
"""

import threading
from collections.abc import Callable, Hashable
from typing import TypeVar

from django.core.signals import request_finished, request_started
from django.db.models.signals import post_delete, post_save

T = TypeVar("T")


class RequestMemo:
    def __init__(self, name: str, *, models: tuple[type, ...]) -> None:
        self._local = threading.local()
        request_started.connect(self._started, weak=False, dispatch_uid=f"memo-{name}-started")
        request_finished.connect(self._finished, weak=False, dispatch_uid=f"memo-{name}-finished")
        for model in models:
            for signal, done in ((post_save, "saved"), (post_delete, "deleted")):
                signal.connect(
                    self._forget,
                    sender=model,
                    weak=False,
                    dispatch_uid=f"memo-{name}-{done}-{model.__name__}",
                )

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        """`compute()`, or what it gave for `key` earlier in this request."""
        values = getattr(self._local, "values", None)
        if values is not None and key in values:
            return values[key]
        value = compute()
        if values is not None:
            values[key] = value
        return value

    def _started(self, **_) -> None:
        self._local.values = {}

    def _forget(self, **_) -> None:
        if getattr(self._local, "values", None):
            self._local.values = {}

    def _finished(self, **_) -> None:
        self._local.values = None
