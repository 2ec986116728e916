import io

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

API_PREFIX = "/api/"


def _content_length(request: HttpRequest) -> int:
    try:
        return max(int(request.META.get("CONTENT_LENGTH") or 0), 0)
    except ValueError:
        return 0  # what Django's own request does with a length it cannot read


class ApiBodyLimitMiddleware:
    """The REST API takes bodies up to settings.API_MAX_BODY_BYTES, the size its schemas allow;
    Django's DATA_UPLOAD_MAX_MEMORY_SIZE is a limit for form posts, and would answer a valid
    metrics batch with an HTML 400 (or a 500 under debug). Over the API's limit: a JSON 413,
    before a byte is read."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path_info.startswith(API_PREFIX):
            length = _content_length(request)
            limit = settings.API_MAX_BODY_BYTES
            if length > limit:
                return JsonResponse(
                    {
                        "detail": f"The request body is {length:,} bytes; the API takes at most "
                        f"{limit:,} bytes per call. Send the points or hours in smaller batches."
                    },
                    status=413,
                )
            form_limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
            if form_limit is not None and length > form_limit:
                # Read it here, within the API's limit, so that request.body does not apply the
                # form limit again (it reads the stream only when it has no body yet).
                request._body = request.read(length)
                request._stream = io.BytesIO(request._body)
        return self.get_response(request)
