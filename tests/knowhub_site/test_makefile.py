"""`make run` installs what running needs; the test targets and `make install` add the test extras and the client."""
import subprocess

import pytest

from tests.conftest import REPO_ROOT


def installs(target: str, venv) -> list[str]:
    """The pip installs `make <target>` would run into a fresh venv (make -n: nothing runs)."""
    done = subprocess.run(["make", "-n", target, f"VENV={venv}"], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    return [line.split(" -m pip install ", 1)[1].split() for line in done.stdout.splitlines() if "pip install" in line]


def test_make_run_installs_the_runtime_dependencies_only(tmp_path):
    run = installs("run", tmp_path / ".venv")
    assert ["--quiet", "-e", "."] in run
    assert not [args for args in run if any("[test]" in arg or "clients/python" in arg for arg in args)]


@pytest.mark.parametrize("target", ["test", "test-slow", "test-all", "fuzz", "install"])
def test_the_test_targets_add_the_test_extras_and_the_client_package(tmp_path, target):
    found = installs(target, tmp_path / ".venv")
    assert ["--quiet", "-e", "'.[test]'"] in found or ["--quiet", "-e", ".[test]"] in found
    assert ["--quiet", "-e", "./clients/python"] in found
