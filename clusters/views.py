"""The portal's landing page: clusters and what each mirrors, by kind and sync state."""

from django.contrib.auth.mixins import LoginRequiredMixin
from django.db.models import Count
from django.views.generic import TemplateView

from clusters.kinds import all_models
from clusters.models import Cluster


class HomeView(LoginRequiredMixin, TemplateView):
    template_name = "home.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["clusters"] = Cluster.objects.all()
        context["kinds"] = [
            {
                "kind": model.kube.kind,
                "api_version": model.kube.api_version,
                "admin_url": f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist",
                "states": list(model.objects.values("sync_state").annotate(count=Count("id")).order_by("sync_state")),
            }
            for model in all_models()
        ]
        return context
