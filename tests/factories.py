"""factory_boy factories for the core model. Every later app's tests build on these."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import factory
from django.contrib.auth import get_user_model

from apps.accounts.models import Membership, Team
from apps.deployments.models import Deployment, DeploymentResource, Model
from apps.experiments.models import Experiment, ExperimentResource
from apps.projects.models import AllocationRule, Project, TagKeyAlias

PASSWORD = (
    "correct-horse-battery"  # one password for every factory user, for login in browser tests
)


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.com")
    password = factory.django.Password(PASSWORD)


class StaffFactory(UserFactory):
    username = factory.Sequence(lambda n: f"staff{n}")
    is_staff = True
    is_superuser = True


class TeamFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Team

    name = factory.Sequence(lambda n: f"Team {n}")
    slug = factory.Sequence(lambda n: f"team-{n}")


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Membership

    user = factory.SubFactory(UserFactory)
    team = factory.SubFactory(TeamFactory)
    role = Membership.Role.MEMBER


class ProjectFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Project

    team = factory.SubFactory(TeamFactory)
    name = factory.Sequence(lambda n: f"Project {n}")
    slug = factory.Sequence(lambda n: f"project-{n}")
    description = "A project made for a test."
    monthly_budget = Decimal("10000.00")


class ModelFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Model

    project = factory.SubFactory(ProjectFactory)
    name = factory.Sequence(lambda n: f"model-{n}")


class ExperimentFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Experiment

    project = factory.SubFactory(ProjectFactory)
    name = factory.Sequence(lambda n: f"run-{n}")
    kind = Experiment.Kind.TRAINING
    status = Experiment.Status.SUCCEEDED
    started_at = datetime(2025, 3, 1, 8, 0, tzinfo=UTC)
    ended_at = factory.LazyAttribute(
        lambda e: e.started_at + timedelta(hours=10) if e.started_at else None
    )
    instance_type = "p4d.24xlarge"
    gpu_type = "A100-40GB"
    gpu_count = 8
    region = "us-east-1"


class ExperimentResourceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ExperimentResource

    experiment = factory.SubFactory(ExperimentFactory)
    resource_id = factory.Sequence(lambda n: f"i-{n:017x}")


class DeploymentFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Deployment

    model = factory.SubFactory(ModelFactory)
    project = factory.LazyAttribute(lambda d: d.model.project)
    name = factory.Sequence(lambda n: f"serving-{n}")
    instance_type = "g5.2xlarge"
    gpu_type = "A10G"
    gpu_count = 1
    region = "us-east-1"
    replicas = 2
    latency_objective_ms = 300
    started_at = datetime(2025, 2, 1, tzinfo=UTC)

    @classmethod
    def create(cls, **kwargs):
        # A deployment mostly serves a model of its own project: given only the project, the
        # model is made there (given only the model, the deployment goes into the model's project).
        if "project" in kwargs and "model" not in kwargs:
            kwargs["model"] = ModelFactory(project=kwargs["project"])
        return super().create(**kwargs)


class DeploymentResourceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = DeploymentResource

    deployment = factory.SubFactory(DeploymentFactory)
    resource_id = factory.Sequence(lambda n: f"arn:aws:sagemaker:us-east-1:1:endpoint/ep-{n}")


class TagKeyAliasFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = TagKeyAlias

    dimension = TagKeyAlias.Dimension.PROJECT
    key = factory.Sequence(lambda n: f"project-key-{n}")


class AllocationRuleFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = AllocationRule

    name = factory.Sequence(lambda n: f"Rule {n}")
    field = AllocationRule.Field.SERVICE
    pattern = "Amazon S3*"
    project = factory.SubFactory(ProjectFactory)
