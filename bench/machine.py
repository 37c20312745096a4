"""The machine a benchmark ran on, one line for its report; a local process's parent and CPU time from /proc."""
import os
from pathlib import Path


def describe() -> str:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), "unknown CPU")
    mem = next((int(line.split()[1]) // 1024 // 1024 for line in Path("/proc/meminfo").read_text().splitlines()
                if line.startswith("MemTotal")), 0)
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"Machine: {len(os.sched_getaffinity(0))} cores (nproc), {model}, {mem} GiB; load average {load}"


def process_stat(pid: int | str) -> list[str]:
    """The fields of /proc/<pid>/stat after the command's name (its state first), which may hold spaces and
    parentheses; raises OSError when there is no such local process."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def parent_pid(fields: list[str]) -> int:
    return int(fields[1])


def cpu_seconds(fields: list[str]) -> float:
    """User and system CPU time so far (utime + stime)."""
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
