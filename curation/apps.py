from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class CurationConfig(AppConfig):
    name = "curation"
    verbose_name = _("Curation UI")

    def ready(self):
        from core.admin_tools import refuse_bad_lookups_everywhere

        refuse_bad_lookups_everywhere()  # every admin is registered by now: django.contrib.admin's ready ran first
