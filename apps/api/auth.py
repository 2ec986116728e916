from django.http import HttpRequest
from ninja.errors import AuthenticationError
from ninja.security import HttpBearer

from apps.accounts.models import ApiToken
from apps.accounts.selectors import api_token_for_secret
from apps.accounts.services import api_token_touch


class TokenRejected(AuthenticationError):
    def __init__(self, message: str) -> None:
        super().__init__(status_code=401, message=message)


class BearerToken(HttpBearer):
    """`Authorization: Bearer <token>`, a token made on the API tokens page. The request then acts
    as the token's user, so every access rule of the pages applies unchanged.

    Only this header counts: a browser's session cookie does not authenticate an API call, so the
    API needs no CSRF protection.
    """

    def __call__(self, request: HttpRequest) -> ApiToken:
        header = request.headers.get(self.header, "")
        if not header:
            raise TokenRejected(
                "Send a token as “Authorization: Bearer <token>”; create one on the API tokens "
                "page."
            )
        scheme, _, secret = header.strip().partition(" ")
        secret = secret.strip()
        if scheme.lower() != "bearer" or not secret:
            raise TokenRejected("The Authorization header must read “Bearer <token>”.")
        return self.authenticate(request, secret)

    def authenticate(self, request: HttpRequest, token: str) -> ApiToken:
        found = api_token_for_secret(secret=token)
        if found is None:
            raise TokenRejected("This token is not valid.")
        if found.is_revoked:
            raise TokenRejected("This token has been revoked.")
        if not found.user.is_active:
            raise TokenRejected("This token's user is deactivated.")
        api_token_touch(token=found)
        request.user = found.user
        return found
