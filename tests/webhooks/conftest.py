"""Webhook tests: deliveries to a receiver on loopback (allow-listed), retries without waiting, sends run inline."""
import pytest

from tests.webhooks.receiver import Receiver


@pytest.fixture
def webhook_settings(settings):
    settings.KNOWHUB_WEBHOOK_ALLOW = ["127.0.0.1"]
    settings.KNOWHUB_WEBHOOK_RETRY_DELAYS = [0, 0]
    settings.KNOWHUB_WEBHOOK_TIMEOUT_SECONDS = 5
    settings.KNOWHUB_WEBHOOK_PAUSE_AFTER = 3
    return settings


@pytest.fixture
def inline_sends(monkeypatch, webhook_settings):
    """`send_delivery` runs in this process when it is sent (a retry at once), instead of going to the broker."""
    from webhooks.tasks import send_delivery

    monkeypatch.setattr(send_delivery, "delay", lambda *args: send_delivery.run(*args))
    monkeypatch.setattr(send_delivery, "apply_async", lambda args, countdown=None: send_delivery.run(*args))


@pytest.fixture
def receiver():
    with Receiver() as server:
        yield server


@pytest.fixture
def committed(django_capture_on_commit_callbacks):
    """Run a block's on-commit work (events, then the deliveries they make) as a real commit would."""
    return lambda: django_capture_on_commit_callbacks(execute=True)
