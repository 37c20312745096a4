"""Schemathesis against the live OpenAPI schema: every operation, no 5xx, no response that breaks the schema.

The light run here (part of the normal suite) takes KNOWHUB_FUZZ_EXAMPLES examples per operation (default 10)
in the examples, fuzzing (positive and negative data) and stateful phases. `make fuzz` runs the same test
with more examples and the coverage phase too. The CLI's JSON report and output are kept in var/fuzz/.

Checked: server errors, status codes, content types, response schemas and headers, unsupported methods,
missing required headers, and the stateful use-after-free and resource-availability checks. Not asserted:
positive_data_acceptance and negative_data_rejection (the schema cannot say everything the server checks,
such as scope patterns or a cursor's content; see docs/RELIABILITY.md).
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.api.conftest import token
from tests.factories import make_knowledge, make_resource

REPO_ROOT = Path(__file__).resolve().parents[2]
ST = Path(sys.executable).with_name("st")
EXAMPLES = int(os.environ.get("KNOWHUB_FUZZ_EXAMPLES", "10"))
PHASES = os.environ.get("KNOWHUB_FUZZ_PHASES", "examples,fuzzing,stateful")
CHECKS = os.environ.get("KNOWHUB_FUZZ_CHECKS", ",".join([
    "not_a_server_error", "status_code_conformance", "content_type_conformance", "response_schema_conformance",
    "response_headers_conformance", "unsupported_method", "missing_required_header", "use_after_free",
    "ensure_resource_availability",
]))
REPORT_DIR = REPO_ROOT / "var" / "fuzz"


def run_schemathesis(url: str, key: str) -> subprocess.CompletedProcess:
    command = [
        str(ST), "run", f"{url}/api/schema/", "--url", url, "--header", f"Authorization: Bearer {key}",
        "--phases", PHASES, "--max-examples", str(EXAMPLES), "--checks", CHECKS, "--seed", "12",
        "--request-timeout", "30", "--max-response-time", "30", "--workers", "1", "--continue-on-failure",
        "--suppress-health-check", "all", "--report", "json", "--report-json-path", str(REPORT_DIR / "report.json"),
    ]
    return subprocess.run(command, capture_output=True, text=True, cwd=REPORT_DIR, timeout=3600)


@pytest.mark.django_db(transaction=True)
def test_schemathesis_finds_no_server_errors_and_no_schema_violations(live_server):
    make_knowledge(scopes=["org:acme"])
    make_resource("code/fuzz/login", scopes=["org:acme"])
    key = token(can_read_secrets=True)
    REPORT_DIR.mkdir(parents=True, exist_ok=True)
    result = run_schemathesis(live_server.url, key)
    (REPORT_DIR / "output.txt").write_text(result.stdout + result.stderr)
    report = json.loads((REPORT_DIR / "report.json").read_text())
    assert report["operations"]["tested"] == report["operations"]["total"] >= 13
    assert report["test_cases"]["generated"] > 0 and report["test_cases"]["errored"] == 0
    assert report["failures"] == [], result.stdout[-15000:]
    assert result.returncode == 0, result.stdout[-15000:] + result.stderr[-3000:]
