"""imports pages URLs (filled in by the issue 5 work)."""

urlpatterns = []
