"""Reads of resources."""
from core.newest import Newest, newest
from resources.models import Resource, ResourceVersion


def resources_needing_refresh() -> list[dict]:
    """Expired resources and the active knowledge items that depend on them."""
    rows = []
    for resource in Resource.objects.filter(is_expired=True).order_by("expires_at").prefetch_related("knowledge"):
        dependents = [k.id for k in resource.knowledge.all() if k.status == "active"]
        rows.append({"id": resource.id, "title": resource.title, "content_type": resource.content_type,
                     "expires_at": resource.expires_at, "knowledge_ids": dependents})
    return rows


def secrets_of(resources) -> list[str]:
    """Every secret these resources hold or ever held (earlier versions too): none may reach an LLM."""
    resources = list(resources)
    earlier = ResourceVersion.objects.filter(resource__in=resources).only("secure_body")
    return [s for s in dict.fromkeys([*(r.secure_body for r in resources), *(v.secure_body for v in earlier)]) if s]


def resource_versions_newest(*, resource_id: str, limit: int | None) -> Newest:
    """A resource's newest `limit` earlier versions (all of them for None), newest first, with the total."""
    return newest(ResourceVersion.objects.filter(resource_id=resource_id), order_by="-number", limit=limit)
