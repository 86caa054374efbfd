from rest_framework.routers import SimpleRouter

from runs_app.api import views

router = SimpleRouter()
router.register("inferenceconfigs", views.InferenceConfigViewSet)
router.register("inferenceruns", views.InferenceRunViewSet)
urlpatterns = router.urls
