"""The apps' layering holds (issue 15): core <- agents <- jobs <- resources <- knowledge <- ingest <- webhooks <- api | curation."""
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_no_module_imports_from_a_layer_above_its_own():
    lint = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run([str(lint), "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "1 kept, 0 broken" in result.stdout
