"""The machine a benchmark ran on, one line for its report."""
import os
from pathlib import Path


def describe() -> str:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), "unknown CPU")
    mem = next((int(line.split()[1]) // 1024 // 1024 for line in Path("/proc/meminfo").read_text().splitlines()
                if line.startswith("MemTotal")), 0)
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"Machine: {len(os.sched_getaffinity(0))} cores (nproc), {model}, {mem} GiB; load average {load}"
