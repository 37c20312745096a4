"""`/metrics`: the Prometheus text format, for a scraper holding the token or calling from an allowed address.

Access: `Authorization: Bearer <KNOWHUB_METRICS_TOKEN>` (when set), or a client address in
KNOWHUB_METRICS_ALLOW (addresses or networks; loopback by default). Anything else is a
bare 403 that says nothing about the metrics.

Under `manage.py serve` every process writes its metrics to PROMETHEUS_MULTIPROC_DIR
(`prepare_multiproc_dir`, called by serve for all its children) and a scrape sums them
(`MultiProcessCollector`); otherwise the process's own registry is exported.
"""
import hmac
import ipaddress
import os
import shutil
from pathlib import Path

from django.conf import settings
from django.http import HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

from knowhub_site.db_pool import record_pool_use
from knowhub_site.metrics_collectors import ScrapeTimeCollector

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def prepare_multiproc_dir(var_dir: Path) -> dict[str, str]:
    """An empty var/metrics/ (last run's files would be summed in) and the environment naming it for children."""
    path = Path(var_dir) / "metrics"
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return {MULTIPROC_ENV: str(path)}


class _ProcessRegistry:
    """This process's default registry, as one collector of the scrape's registry."""

    def collect(self):
        return REGISTRY.collect()


def forget_dead_processes(multiproc_dir: str) -> None:
    """Drop the live gauges of processes that exited (a web worker gunicorn replaced): `livesum` would keep them."""
    for path in Path(multiproc_dir).glob("gauge_live*_*.db"):
        pid = int(path.stem.rsplit("_", 1)[1])
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            mark_process_dead(pid, multiproc_dir)
        except PermissionError:
            pass  # alive, someone else's


def exposition(multiproc_dir: str | None = None) -> bytes:
    """The scrape's text: scrape-time values first (their errors counted in this scrape), then the metrics."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ScrapeTimeCollector())
    if multiproc_dir:
        forget_dead_processes(multiproc_dir)
        MultiProcessCollector(registry, path=multiproc_dir)
    else:
        registry.register(_ProcessRegistry())
    return generate_latest(registry)


def client_allowed(address: str | None) -> bool:
    if not address:
        return False
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    for allowed in settings.KNOWHUB_METRICS_ALLOW:
        try:
            if ip in ipaddress.ip_network(allowed, strict=False):
                return True
        except ValueError:
            continue  # a malformed entry allows nothing
    return False


def has_token(request) -> bool:
    from agents.auth import is_bearer  # the scheme in any case, as the API takes it

    expected = settings.KNOWHUB_METRICS_TOKEN
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    return bool(expected) and is_bearer(scheme) and hmac.compare_digest(given.strip().encode(), expected.encode())


def metrics_view(request):
    from curation.throttle import client_address  # REMOTE_ADDR, or behind a proxy the address it saw

    if not (has_token(request) or client_allowed(client_address(request))):
        return HttpResponse("forbidden\n", status=403, content_type="text/plain")
    record_pool_use()
    return HttpResponse(exposition(os.environ.get(MULTIPROC_ENV)), content_type=CONTENT_TYPE_LATEST)
