"""API permissions: reading needs a login, writing needs the model's Django permission."""

from rest_framework.permissions import SAFE_METHODS, DjangoModelPermissions


class ReadLoggedInWriteWithModelPermission(DjangoModelPermissions):
    """Any logged-in user may read; add/change/delete need ``app.add_model`` and friends."""

    def has_permission(self, request, view) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        if request.method in SAFE_METHODS:
            return True
        return super().has_permission(request, view)


class ModelPermissionsIncludingView(DjangoModelPermissions):
    """Every method needs its model permission, reading included (``app.view_model``).

    For clusters, which hold credentials and decide what the portal touches: granted per person
    or group (``clusters.change_cluster``...), never implied by ``is_staff``.
    """

    perms_map = {
        **DjangoModelPermissions.perms_map,
        "GET": ["%(app_label)s.view_%(model_name)s"],
        "HEAD": ["%(app_label)s.view_%(model_name)s"],
        "OPTIONS": ["%(app_label)s.view_%(model_name)s"],
    }


class ChangeModelPermission(DjangoModelPermissions):
    """For POST actions that change an existing object (resolve a conflict, wake a model): they need
    ``app.change_model``, not the ``add`` permission DRF maps POST to."""

    perms_map = {**DjangoModelPermissions.perms_map, "POST": ["%(app_label)s.change_%(model_name)s"]}
