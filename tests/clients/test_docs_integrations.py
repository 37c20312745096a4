"""The README has a section per integration, names every tool, and links examples that exist."""
import re

from knowhub_client.tools import TOOL_NAMES
from tests.conftest import REPO_ROOT

README = (REPO_ROOT / "README.md").read_text()


def test_each_integration_has_a_readme_section():
    for heading in ("### Python client", "### OpenAI function calling", "### Agno", "### MCP server"):
        assert heading in README, heading


def test_every_tool_is_named_in_the_readme():
    missing = [name for name in TOOL_NAMES if f"`{name}" not in README]
    assert not missing, missing


def test_linked_examples_exist():
    linked = re.findall(r"\(examples/([a-z_]+\.py)\)", README)
    assert {"client_quickstart.py", "openai_tools.py", "agno_agent.py", "mcp_client.py"} <= set(linked)
    assert all((REPO_ROOT / "examples" / name).exists() for name in linked)
