"""Every bench command answers `--help` with its usage: the first thing a newcomer runs before a benchmark."""
import os
import re
import subprocess
import sys

from tests.conftest import REPO_ROOT as ROOT


def bench_commands() -> list[str]:
    """The modules of bench/ that run as a command (`python -m bench.NAME`)."""
    return sorted(
        path.stem for path in (ROOT / "bench").glob("*.py")
        if re.search(r'^if __name__ == "__main__":', path.read_text(encoding="utf-8"), re.MULTILINE)
    )


def test_every_bench_command_prints_its_usage_for_help():
    commands = bench_commands()
    assert {"search_latency", "precompute", "fusion_study", "ranking", "api_load"} <= set(commands)
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    running = {name: subprocess.Popen([sys.executable, "-m", f"bench.{name}", "--help"], cwd=ROOT, env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for name in commands}
    failed = {}
    for name, process in running.items():
        out, err = process.communicate(timeout=120)
        if process.returncode != 0 or "usage:" not in out:
            failed[name] = (process.returncode, err.strip().splitlines()[-1:] or out[:200])
    assert not failed
