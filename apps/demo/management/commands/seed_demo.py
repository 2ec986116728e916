from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from apps.demo import seed as demo


class Command(BaseCommand):
    help = (
        "Create the demo organisation (teams, users, projects, experiments, models, deployments) "
        "in an empty database, then load its data files. Running it again changes nothing and "
        "prints the logins."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--small", action="store_true", help="A much smaller organisation, for tests."
        )

    def handle(self, *args, small: bool, **options):
        try:
            result = demo.demo_organization_create(small=small)
        except demo.DemoError as error:
            raise CommandError(str(error)) from error

        if result.created:
            self.stdout.write(f"Created the demo organisation {result.organization.name}.")
            demo.demo_data_load(
                directory=settings.COSTSITE_DATA_DIR / "demo", small=small, log=self.stdout.write
            )
            # The price catalogue (the right-size findings compare its instances), then the
            # findings, once, over everything the steps loaded.
            call_command("prices_load", stdout=self.stdout)  # the insights app, by name
            call_command("findings_recompute", stdout=self.stdout)
        else:
            self.stdout.write(
                f"The demo organisation {result.organization.name} already exists; "
                "nothing was changed."
            )

        self.stdout.write("Demo logins (role, team, username, password):")
        for credential in result.credentials:
            self.stdout.write(
                f"  {credential.role:<7} {credential.team or '-':<16} "
                f"{credential.username:<22} {credential.password}"
            )
