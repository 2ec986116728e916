"""What the spend app stores of its own: the data version its cached figures are keyed by."""

from django.db import models


class SpendDataVersion(models.Model):
    """One row: a counter bumped after every committed change that can move a spend figure.

    It lives in the database, not in the cache, so that every process reads the same one and it
    never goes back when the cache is emptied or evicts it (a version read back as an old number
    would serve the figures cached under it, computed from other data)."""

    value = models.PositiveBigIntegerField(default=0)
    # Moved with `value` by a save or delete of what the cached queries join (names, teams, who
    # may see what), and only then: the findings figures, which read no spend, are keyed by it.
    joined = models.PositiveBigIntegerField(default=0)
    # The findings' version: moved by every change of findings or their hours (the insights app
    # moves it; its figures and the pages' parts that show findings are keyed by it). Kept in this
    # row so that one query reads every version a request keys its figures by.
    findings = models.PositiveBigIntegerField(default=0)
    # The GPU metrics' version: moved with `value` by a GPU metrics import, a host mapped and a
    # GPU edited or deleted, and only then: the runs' and deployments' GPU-hours are keyed by it
    # and `joined` (their registrations), so that a new bill leaves them cached.
    gpu = models.PositiveBigIntegerField(default=0)

    def __str__(self) -> str:
        return f"spend data version {self.value}"
