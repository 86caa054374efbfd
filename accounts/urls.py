"""Account pages: teams, grants and the user's API tokens."""

from django.urls import path

from accounts import views

urlpatterns = [
    path("account/", views.account_page, name="account"),
    path("account/token/create/", views.create_token, name="account-token-create"),
    path("account/token/<str:digest>/revoke/", views.revoke_token, name="account-token-revoke"),
]
