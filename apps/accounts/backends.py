from axes.backends import AxesStandaloneBackend


class LoginThrottleBackend(AxesStandaloneBackend):
    """django-axes' lock-out check for logins made through a web request (the login page, the
    admin's). A login without a request (the test client's `login()`, a shell) has no client
    address to count and is left to the next backend, as Django's own backends would."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)
