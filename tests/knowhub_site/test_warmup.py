"""A web process loads the models while it boots, not inside its first search."""
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT, database_url_for_subprocess

PROBE = (
    "import knowhub_site.wsgi\n"
    "from knowledge.search import embeddings, text\n"
    "print(text._jieba.cache_info().currsize, text._background_idf.cache_info().currsize,"
    " embeddings._embedder_named.cache_info().currsize)\n"
)


def loaded_at_import(warm_up: str) -> str:
    env = {**os.environ, "DATABASE_URL": database_url_for_subprocess(), "KNOWHUB_WARM_UP": warm_up,
           "DJANGO_SETTINGS_MODULE": "knowhub_site.test_settings"}
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


@pytest.mark.django_db
def test_the_web_entry_point_loads_the_segmenter_the_word_table_and_the_embedder():
    assert loaded_at_import("true") == ["1", "1", "1"]
    assert loaded_at_import("false") == ["0", "0", "0"]
