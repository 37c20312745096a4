"""GET /healthz: database, pgvector, broker, worker and model service status as JSON.

200 when every check passes, 503 with `down` naming the failing checks.
"""
from django.conf import settings
from django.db import connection
from django.http import JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

BROKER_TIMEOUT_SECONDS = 3


def check_database() -> dict:
    with connection.cursor() as cursor:
        cursor.execute("SELECT version()")
        (version,) = cursor.fetchone()
    return {"ok": True, "detail": version.split(" on ")[0]}


def check_pgvector() -> dict:
    with connection.cursor() as cursor:
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        row = cursor.fetchone()
    if not row:
        return {"ok": False, "detail": "the vector extension is not installed; run migrations"}
    return {"ok": True, "detail": f"pgvector {row[0]}"}


def check_broker() -> dict:
    from knowhub_site.celery import app

    with app.connection_for_write(settings.CELERY_BROKER_URL) as conn:
        conn.ensure_connection(max_retries=1, timeout=BROKER_TIMEOUT_SECONDS)
        transport = conn.transport_cls
    return {"ok": True, "detail": f"{transport} broker reachable"}


def check_worker() -> dict:
    from jobs.selectors import workers_alive

    alive = workers_alive()
    if not alive:
        return {
            "ok": False,
            "detail": f"no Celery worker has reported in the last {settings.KNOWHUB_WORKER_STALE_SECONDS}s",
        }
    # A worker restarted under the same hostname is a new instance; the dead one's row ages out.
    return {"ok": True, "detail": f"{len(alive)} alive", "workers": list(dict.fromkeys(w.hostname for w in alive)),
            "instances": [w.instance for w in alive]}


def check_models() -> dict:
    from knowledge.search import model_client

    path = settings.KNOWHUB_MODEL_SERVICE
    if not path:
        return {"ok": True, "detail": "models load in each process (KNOWHUB_MODEL_SERVICE unset)"}
    answer = model_client.ping(path)
    if answer is None:
        return {"ok": False, "detail": f"the model service is not answering at {path}; search falls back to keywords"}
    loaded = answer.get("loaded") or []
    return {"ok": True, "detail": f"pid {answer.get('pid')}, loaded: {', '.join(loaded) or 'loading'}"}


CHECKS = {
    "database": check_database,
    "pgvector": check_pgvector,
    "broker": check_broker,
    "worker": check_worker,
    "models": check_models,
}


def run_checks() -> dict:
    results = {}
    for name, check in CHECKS.items():
        try:
            results[name] = check()
        except Exception as exc:  # noqa: BLE001 - a failed check is a result, not a crash
            results[name] = {"ok": False, "detail": f"{type(exc).__name__}: {exc}".strip()[:500]}
    down = [name for name, result in results.items() if not result["ok"]]
    return {"status": "down" if down else "ok", "down": down, "checks": results}


@never_cache
@require_safe
def healthz(request):
    report = run_checks()
    return JsonResponse(report, status=503 if report["down"] else 200)
