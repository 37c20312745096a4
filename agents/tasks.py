"""Periodic agent upkeep (Celery beat, started by `make run`)."""
from celery import shared_task


@shared_task
def forget_idempotent_replies() -> int:
    from agents.idempotency import idempotent_replies_forget

    return idempotent_replies_forget()
