"""Statements planned by PostgreSQL without parallel workers.

A page's sums read a few thousand rollup rows by their indexes. PostgreSQL priced some of them
in parallel: on this project's two cores the workers took longer to start than they saved, and
took the CPU from the request (or from the figures thread beside it).
"""

from contextlib import contextmanager
from contextvars import ContextVar

from django.db import connection, transaction

_SERIAL = ContextVar("serial_plans", default=False)


@contextmanager
def serial_plans():
    """Statements in the block planned by PostgreSQL without parallel workers, on this
    thread's connection. Measured: the findings' sums of 90 days (the top findings 8.7 ms
    against 5.2 alone, their sums 4.6 against 3.2); the fleet's GPU table over 12 months, on
    the figures thread (15-17 ms with workers against 10-11 without, alone; beside a request's
    own statements, 26 against 21). One transaction for a whole block, however many statements
    it holds (a block inside another adds nothing)."""
    if connection.vendor != "postgresql" or _SERIAL.get():
        yield
        return
    outer = connection.in_atomic_block
    token = _SERIAL.set(True)
    try:
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL max_parallel_workers_per_gather = 0")
            yield
            if outer:  # a caller's transaction would keep the setting after the block
                with connection.cursor() as cursor:
                    cursor.execute("SET LOCAL max_parallel_workers_per_gather TO DEFAULT")
    finally:
        _SERIAL.reset(token)
