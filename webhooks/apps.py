from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class WebhooksConfig(AppConfig):
    name = "webhooks"
    verbose_name = _("Webhooks")

    def ready(self):
        from core import events
        from webhooks import operations  # noqa: F401 - declares the webhook operations
        from webhooks.services import deliveries_for_events

        events.listen(deliveries_for_events)  # every committed event fans out to the subscriptions that may see it
