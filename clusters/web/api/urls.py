from django.urls import path
from rest_framework.routers import SimpleRouter

from clusters.web.api.apply import ApplyView
from clusters.web.api.views import ClusterViewSet

router = SimpleRouter()
router.register("clusters", ClusterViewSet)
urlpatterns = [path("apply/", ApplyView.as_view(), name="api-apply"), *router.urls]
