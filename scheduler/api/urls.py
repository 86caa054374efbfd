"""REST API routes (filled in by the planning and right-sizing work)."""

urlpatterns: list = []
