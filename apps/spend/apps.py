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
        from apps.deployments.models import Deployment, DeploymentResource, Model
        from apps.experiments.models import Experiment, ExperimentResource
        from apps.gpu.models import Gpu, HostMapping
        from apps.projects.models import Project
        from apps.projects.ports import ownership_changed, spend_data_changed

        from .figures import gpu_version_bump, joined_bump, version_bump

        spend_data_changed.register(version_bump)
        # A claim, a rule, resources registered (in bulk too: bulk_create sends no signal): the
        # project page's runs show how many resources each registered.
        ownership_changed.register(joined_bump)
        # What the cached queries join, spend's and findings' alike: a name, a team, who may see
        # a project, a run's model; and what the project page's runs, models and deployments
        # show (cached by this version alone), their registered resources counted.
        joined = (Team, Membership, Project, Experiment, Deployment, Model)
        for model in (*joined, ExperimentResource, DeploymentResource):
            for signal in (post_save, post_delete):
                signal.connect(joined_bump, sender=model, dispatch_uid=f"spend-{model.__name__}")
        # What the runs' and deployments' cached GPU-hours follow as well (the GPU version): a
        # host's billed resource.
        for signal in (post_save, post_delete):
            signal.connect(gpu_version_bump, sender=HostMapping, dispatch_uid="spend-HostMapping")
        # A GPU's host, label or model changed by hand (an import announces its own changes,
        # new GPUs included, through the port, with the reason that moves the GPU version).
        post_save.connect(_gpu_edited, sender=Gpu, dispatch_uid="spend-Gpu")
        post_delete.connect(gpu_version_bump, sender=Gpu, dispatch_uid="spend-Gpu-deleted")


def _gpu_edited(*, created: bool, **_) -> None:
    from .figures import gpu_version_bump

    if not created:
        gpu_version_bump()
