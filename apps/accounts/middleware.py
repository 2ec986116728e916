import zoneinfo

from django.utils import timezone
from django.utils.cache import add_never_cache_headers

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


# Browser features no page of the dashboard uses, turned off for every page and what it embeds.
PERMISSIONS_POLICY = ", ".join(
    f"{feature}=()"
    for feature in (
        "accelerometer",
        "camera",
        "geolocation",
        "gyroscope",
        "magnetometer",
        "microphone",
        "payment",
        "usb",
    )
)


class PrivatePagesMiddleware:
    """What a logged-in user is shown (spend, tokens, exports) is never kept by a browser's or a
    proxy's cache: `Cache-Control: no-store` on every answer to a logged-in request, the API's
    included. Every answer carries the Permissions-Policy."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        # request.user is the token's user by now for the API (its auth runs in the view).
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            add_never_cache_headers(response)
        response.headers.setdefault("Permissions-Policy", PERMISSIONS_POLICY)
        return response
