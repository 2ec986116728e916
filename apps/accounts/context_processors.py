from django.http import HttpRequest

from .models import Organization


def organization(request: HttpRequest) -> dict:
    """The organisation's name and settings for the layout (one cached query per request)."""
    if not hasattr(request, "_costsite_org"):
        request._costsite_org = Organization.get()
    return {"organization": request._costsite_org}
