"""The portal pages reuse the access tests' world (two teams, every kind in each team's namespace) and
the controller tests' managed cluster (live objects)."""

from tests.accounts.conftest import world  # noqa: F401 - a fixture
from tests.controllers.conftest import managed  # noqa: F401 - a fixture
