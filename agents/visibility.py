"""The one visibility rule: a caller sees the rows that share one of its readable scopes.

`readable_scopes` None means every scope (a person with a role); an empty tuple means
none. Knowledge and resources use `ScopedQuerySet` as their manager; a job is visible
through its item's scopes or to whoever asked for it (`jobs.models.JobQuerySet`).
"""
from django.db import models


def scope_filter(readable_scopes, field: str = "scopes") -> models.Q:
    """The condition for rows readable with `readable_scopes` (an empty Q: no restriction)."""
    if readable_scopes is None:
        return models.Q()
    return models.Q(**{f"{field}__overlap": list(readable_scopes)})


def may_read(readable_scopes, scopes) -> bool:
    """The same rule for one row already in hand."""
    return readable_scopes is None or bool(set(scopes) & set(readable_scopes))


class ScopedQuerySet(models.QuerySet):
    def readable_with(self, readable_scopes):
        return self.filter(scope_filter(readable_scopes))

    def visible_to(self, caller):
        """What `caller` (agents.caller.Caller) may read."""
        return self.readable_with(caller.readable_scopes)
