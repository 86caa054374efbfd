from rest_framework.routers import SimpleRouter

from gitops.api.views import ChangeModeViewSet

router = SimpleRouter()
router.register("gitops/modes", ChangeModeViewSet)
urlpatterns = router.urls
