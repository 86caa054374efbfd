from rest_framework.routers import SimpleRouter

from models_app.api import views

router = SimpleRouter()
router.register("inferencemodels", views.InferenceModelViewSet)
router.register("kubeai-models", views.KubeAIModelViewSet)
router.register("modelservices", views.ModelServiceViewSet)
urlpatterns = router.urls
