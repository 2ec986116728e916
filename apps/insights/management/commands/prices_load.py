import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from apps.insights.catalogue import DATA_DIR, CatalogueError, catalogue_load


class Command(BaseCommand):
    help = (
        "Load (or refresh) the price catalogue from a folder holding gpu_instance_prices.csv, "
        "gpu_type_memory.csv, model_api_prices.json and storage_egress_prices.csv (default: the "
        "copy shipped with costsite). Rows that fail validation are refused and listed by file, "
        "row and column; the others replace the catalogue."
    )

    def add_arguments(self, parser):
        parser.add_argument("--dir", type=Path, default=DATA_DIR, help="Folder of price files.")
        parser.add_argument("--json", action="store_true", help="Print the summary as JSON.")

    def handle(self, *args, dir: Path, json: bool = False, **options):
        try:
            result = catalogue_load(directory=dir)
        except CatalogueError as error:
            raise CommandError(str(error)) from None
        if json:
            self.stdout.write(_json(result.as_json()))
            return
        for table, count in result.loaded.items():
            self.stdout.write(f"{table}: {count} rows loaded")
        for refusal in result.refused:
            self.stdout.write(f"refused: {refusal}")
        self.stdout.write(f"{len(result.refused)} row(s) refused")


def _json(value) -> str:
    return json.dumps(value, sort_keys=True)
