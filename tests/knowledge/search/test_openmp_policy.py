"""The embedding engine's OpenMP threads sleep while they wait: spinning threads starve each other and the rest
of the stack on a machine whose cores are shared."""
import os
import subprocess
import sys

from tests.conftest import REPO_ROOT

SHOW_POLICY = ("import os, django; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'knowhub_site.settings'); "
               "django.setup(); from knowledge.search import embeddings; print(os.environ['OMP_WAIT_POLICY'])")


def _policy_in_a_new_process(**env) -> str:
    clean = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    done = subprocess.run([sys.executable, "-c", SHOW_POLICY], cwd=REPO_ROOT, env={**clean, **env},
                          capture_output=True, text=True, timeout=120, check=True)
    return done.stdout.strip().splitlines()[-1]


def test_a_process_that_loads_the_embedders_lets_openmp_threads_sleep():
    assert _policy_in_a_new_process() == "passive"


def test_an_operators_own_openmp_wait_policy_is_kept():
    assert _policy_in_a_new_process(OMP_WAIT_POLICY="active") == "active"
