"""Reads of the inference levers for the pages: a deployment's lever findings (the model's
build-or-call page lists them) and what they save together, the largest counting, as the
savings total counts alternatives on one subject."""

from dataclasses import dataclass
from decimal import Decimal

from .models import INFERENCE_LEVER_KINDS, Finding, Status
from .selectors import findings_visible_to


@dataclass(frozen=True)
class DeploymentLevers:
    findings: list[Finding]  # by saving, largest first
    largest: dict[str, Decimal]  # per currency: what the levers save together (the largest)


def deployment_levers(*, user, deployment) -> DeploymentLevers:
    """The deployment's open, acknowledged or snoozed lever findings the user sees."""
    findings = list(
        findings_visible_to(user=user).filter(
            deployment=deployment,
            kind__in=INFERENCE_LEVER_KINDS,
            status__in=[Status.OPEN, Status.ACKNOWLEDGED, Status.SNOOZED],
        )
    )

    def saving(finding: Finding) -> Decimal:
        return max((Decimal(a) for a in finding.savings_per_month.values()), default=Decimal(0))

    findings.sort(key=lambda finding: (-saving(finding), finding.kind))
    largest: dict[str, Decimal] = {}
    for finding in findings:
        for currency, amount in finding.savings_per_month.items():
            largest[currency] = max(largest.get(currency, Decimal(0)), Decimal(amount))
    return DeploymentLevers(findings=findings, largest=largest)
