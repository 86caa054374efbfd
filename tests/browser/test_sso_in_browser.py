"""Single sign-on in Chromium through the tests' real OpenID Provider: the login page's button, the
provider's own login form, back in the portal with the teams of the person's groups; a group
changed at the provider changes what they see at their next login."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from accounts.models import GroupMapping

pytestmark = pytest.mark.django_db(transaction=True)


def sign_in_with_the_provider(page) -> None:
    page.goto("/")
    expect(page).to_have_url(re.compile(r"/login/\?next=/$"))
    page.click("text=Sign in with Test IdP")
    expect(page.locator("#username")).to_be_visible()  # the provider's page, not the portal's
    page.fill("#username", "ada")
    page.fill("#password", "ada-password")
    page.click("button[type=submit]")
    expect(page.locator("h1")).to_have_text("Dashboard")


def test_sign_in_through_the_provider_and_a_group_change_shows_at_the_next_login(page, shoot, world, sso_provider):
    GroupMapping.objects.create(group="ml-vision", team=world.vision)
    GroupMapping.objects.create(group="ml-nlp", team=world.nlp)
    sign_in_with_the_provider(page)
    page.goto("/account/")
    grants = page.locator("table").first
    expect(grants).to_contain_text("vision")
    expect(grants).not_to_contain_text("nlp")
    shoot(page, "sso-account-vision")

    sso_provider.set_groups("u-ada", ["ml-nlp"])
    page.context.clear_cookies()  # signed out
    sign_in_with_the_provider(page)
    page.goto("/account/")
    expect(grants).to_contain_text("nlp")
    expect(grants).not_to_contain_text("vision")
