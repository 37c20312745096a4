"""What the audit page shows: each API write with a link to its target when that is a knowledge item or a resource."""
from django.urls import reverse

from knowledge.models import Knowledge
from resources.models import Resource


def with_target_urls(events) -> list:
    """The events, each with `target_url`: the target's page, or None when the target is neither (or is gone)."""
    events = list(events)
    targets = {e.target for e in events if e.target}
    urls = {pk: reverse("curation:resource_detail", args=[pk])
            for pk in Resource.objects.filter(pk__in=targets).values_list("pk", flat=True)}
    urls |= {pk: reverse("curation:knowledge_detail", args=[pk])
             for pk in Knowledge.objects.filter(pk__in=targets).values_list("pk", flat=True)}
    for event in events:
        event.target_url = urls.get(event.target)
    return events
