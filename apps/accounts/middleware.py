import zoneinfo

from django.utils import timezone

from .models import Organization


class OrganizationTimezoneMiddleware:
    """Times are stored in UTC and shown (and typed into forms) in the organisation's time zone."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        org = Organization.get()
        # The layout's context processor reads the same row; one query per request.
        request._costsite_org = org
        try:
            timezone.activate(zoneinfo.ZoneInfo(org.time_zone))
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            # A mistyped zone in the admin must not take every page down; UTC is what is stored.
            timezone.activate(zoneinfo.ZoneInfo("UTC"))
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()
