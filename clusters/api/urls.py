from django.urls import path
from rest_framework.routers import SimpleRouter

from clusters.api.apply import ApplyView
from clusters.api.views import ClusterViewSet

router = SimpleRouter()
router.register("clusters", ClusterViewSet)
urlpatterns = [path("apply/", ApplyView.as_view(), name="api-apply"), *router.urls]
