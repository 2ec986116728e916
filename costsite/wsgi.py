"""The WSGI application: what gunicorn serves (`gunicorn costsite.wsgi`) and runserver runs."""

import gc
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "costsite.settings")
application = get_wsgi_application()


def freeze_what_lives_as_long_as_the_process() -> None:
    """Import every view (the URLconf), drop the start-up's garbage, then move every object made
    so far into the collector's permanent generation (`gc.freeze`).

    Modules, settings, the URLconf and the apps' registries are about 190,000 objects that live
    as long as the process. Left tracked, a full collection walks them all: every 70th request
    or so took 60-70 ms longer (measured on the fleet page, README "Benchmarks"). Frozen, a full
    collection walks only what requests made, about 1 ms."""
    from django.urls import get_resolver

    get_resolver().url_patterns  # noqa: B018 (imports the URLconf and every view)
    gc.collect()
    gc.freeze()


freeze_what_lives_as_long_as_the_process()
