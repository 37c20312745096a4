"""Periodic upkeep of the site's own machinery (Celery beat, started by `make run`)."""
from celery import shared_task


@shared_task
def forget_delivered_messages() -> int:
    """The beat's hourly sweep: the default broker's messages workers took more than an hour ago."""
    from knowhub_site.broker import delivered_forget

    return delivered_forget()
