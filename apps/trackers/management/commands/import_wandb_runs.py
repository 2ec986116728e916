from django.core.management.base import BaseCommand, CommandError

from apps.projects.models import Project
from apps.trackers.models import DEFAULT_RESOURCE_TAGS
from apps.trackers.services import RunMapping, wandb_runs_import
from apps.trackers.wandb import FORMATS, WandbFileError


class Command(BaseCommand):
    help = (
        "Import Weights & Biases runs from a file: the runs table exported as CSV, or the public "
        "API's runs JSON. All runs or none; faults name the row and column."
    )

    def add_arguments(self, parser):
        parser.add_argument("path")
        parser.add_argument("--format", choices=["auto", *FORMATS], default="auto")
        parser.add_argument("--project-tag", default="project")
        parser.add_argument("--default-project", default="", help="A project's slug.")
        parser.add_argument("--resource-tags", default=DEFAULT_RESOURCE_TAGS)
        parser.add_argument("--gpu-count-tag", default="gpu_count")
        parser.add_argument("--loss-metric", default="loss")

    def handle(self, *args, **options):
        default_project = None
        if options["default_project"]:
            default_project = Project.objects.filter(slug=options["default_project"]).first()
            if default_project is None:
                raise CommandError(f"No project with the slug “{options['default_project']}”.")
        mapping = RunMapping(
            project_tag=options["project_tag"],
            default_project=default_project,
            resource_tags=tuple(
                key.strip() for key in options["resource_tags"].split(",") if key.strip()
            ),
            gpu_count_tag=options["gpu_count_tag"],
            loss_metric=options["loss_metric"],
        )
        try:
            with open(options["path"], "rb") as handle:
                data = handle.read()
        except OSError as exc:
            raise CommandError(f"{options['path']}: {exc.strerror}") from exc
        try:
            tally = wandb_runs_import(
                name=options["path"], data=data, mapping=mapping, file_format=options["format"]
            )
        except WandbFileError as exc:
            raise CommandError("Nothing was imported:\n" + "\n".join(exc.errors)) from exc
        self.stdout.write(
            f"{tally.created} run(s) added, {tally.updated} updated, {tally.unchanged} unchanged, "
            f"{tally.unassigned} skipped (no project)."
        )
