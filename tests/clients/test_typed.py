"""The client ships its types (py.typed) and they check under mypy --strict."""
import subprocess
import sys

from tests.conftest import REPO_ROOT

CLIENT = REPO_ROOT / "clients" / "python"


def test_the_client_package_is_marked_typed():
    assert (CLIENT / "knowhub_client" / "py.typed").exists()


def test_the_client_type_checks_strictly():
    done = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", "knowhub_client"],
                          cwd=CLIENT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
