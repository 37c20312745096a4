"""The role fixtures of the curation tests, for the security tests of its pages."""
from tests.curation.conftest import admin_client_, admin_user, roles, viewer, viewer_client  # noqa: F401
