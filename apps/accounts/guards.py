"""The two page guards, written once: staff only, and staff or a team's lead.

Each wraps a function view under `@login_required` (and under `@require_POST` and the like, so
a wrong method still answers 405 first). A refusal is a 404, never a 403 (selectors.py says
why), with the page's own message.
"""

from collections.abc import Callable
from functools import wraps

from django.http import Http404, HttpRequest, HttpResponse

from .selectors import leads_a_team

View = Callable[..., HttpResponse]


def is_staff_or_lead(*, user) -> bool:
    """Staff, or the lead of at least one team (DESIGN.md, Roles)."""
    return user.is_staff or leads_a_team(user=user)


def _guard(allowed: Callable[..., bool], message: str) -> Callable[[View], View]:
    def decorator(view: View) -> View:
        @wraps(view)
        def guarded(request: HttpRequest, *args, **kwargs) -> HttpResponse:
            if not allowed(user=request.user):
                raise Http404(message)
            return view(request, *args, **kwargs)

        return guarded

    return decorator


def staff_only(view: View | None = None, *, message: str = "No such page.") -> View | Callable:
    """`@staff_only` or `@staff_only(message=...)`: anybody but staff gets 404."""
    decorator = _guard(lambda *, user: user.is_staff, message)
    return decorator(view) if view is not None else decorator


def staff_or_lead_only(
    view: View | None = None, *, message: str = "No such page."
) -> View | Callable:
    """`@staff_or_lead_only` or `@staff_or_lead_only(message=...)`: staff and team leads pass,
    members and outsiders get 404."""
    decorator = _guard(is_staff_or_lead, message)
    return decorator(view) if view is not None else decorator
