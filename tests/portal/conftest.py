"""The portal pages reuse the access tests' world: two teams, every kind in each team's namespace."""

from tests.accounts.conftest import world  # noqa: F401 - a fixture
