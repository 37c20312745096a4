"""Reads of resources."""
from resources.models import Resource


def resources_needing_refresh() -> list[dict]:
    """Expired resources and the active knowledge items that depend on them."""
    rows = []
    for resource in Resource.objects.filter(is_expired=True).order_by("expires_at").prefetch_related("knowledge"):
        dependents = [k.id for k in resource.knowledge.all() if k.status == "active"]
        rows.append({"id": resource.id, "title": resource.title, "content_type": resource.content_type,
                     "expires_at": resource.expires_at, "knowledge_ids": dependents})
    return rows
