"""One progress bar for long management commands."""
import sys

WIDTH = 30


def progress_line(done: int, total: int, suffix: str = "") -> str:
    filled = int(WIDTH * min(done, total) / total) if total else WIDTH
    return f"\r[{'#' * filled}{'.' * (WIDTH - filled)}] {done}/{total}{suffix}"


def write_progress(stdout, done: int, total: int, suffix: str = "") -> None:
    stdout.write(progress_line(done, total, suffix), ending="")
    sys.stdout.flush()
