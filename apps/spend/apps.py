from django.apps import AppConfig


class SpendConfig(AppConfig):
    """Everything that reads spend: the rollup plan, periods, the spend selectors, the overview,
    unattributed and claim pages, the spend charts and the CSV exports. Its one model is the data
    version its cached figures are keyed by (`figures.py`)."""

    name = "apps.spend"
    label = "spend"

    def ready(self) -> None:
        from django.db.models.signals import post_delete, post_save

        from apps.accounts.models import Membership, Team
        from apps.deployments.models import Deployment, Model
        from apps.experiments.models import Experiment
        from apps.projects.models import Project
        from apps.projects.ports import ownership_changed, spend_data_changed

        from .figures import version_bump

        spend_data_changed.register(version_bump)
        ownership_changed.register(version_bump)
        # What the cached queries join: a name, a team, who may see a project, a run's model.
        for model in (Team, Membership, Project, Experiment, Deployment, Model):
            for signal in (post_save, post_delete):
                signal.connect(version_bump, sender=model, dispatch_uid=f"spend-{model.__name__}")
