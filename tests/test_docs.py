"""The README documents every setting and every filter operator."""
import re

from knowledge.search.filters import VALID_OPERATORS
from tests.conftest import REPO_ROOT

README = (REPO_ROOT / "README.md").read_text()


def test_every_environment_setting_is_in_the_readme():
    sources = [REPO_ROOT / "knowhub_site" / "settings.py", REPO_ROOT / "knowhub_site" / "management" / "commands" / "serve.py",
               REPO_ROOT / "knowhub_site" / "management" / "commands" / "ensure_curator.py"]
    names = set()
    for path in sources:
        names |= set(re.findall(r'env_(?:str|bool|int|list)\("([A-Z_]+)"', path.read_text()))
        names |= set(re.findall(r'os\.environ\.get\("([A-Z_]+)"', path.read_text()))
    names -= {"DJANGO_SETTINGS_MODULE"}
    assert names, "no settings found: the pattern is stale"
    missing = sorted(name for name in names if f"`{name}`" not in README)
    assert not missing, f"undocumented settings: {missing}"


def test_every_filter_operator_is_in_the_readme():
    missing = [op for op in VALID_OPERATORS if op not in README]
    assert not missing, f"undocumented filter operators: {missing}"
