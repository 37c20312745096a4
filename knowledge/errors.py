"""Typed errors raised by knowledge services; core.errors maps them to 4xx (`status`, `code`)."""
from django.utils.translation import gettext as _

from core.errors import DomainError


class KnowledgeError(DomainError):
    """Base class: a 400. `field` names the input at fault, when there is one."""


class UnknownResourceError(KnowledgeError):
    def __init__(self, missing: list[str]):
        super().__init__(_("unknown or unreadable resource ids: %(ids)s") % {"ids": ", ".join(missing)}, field="resource_ids")
        self.missing = missing


class ResourceScopeError(KnowledgeError):
    def __init__(self, narrower: list[str], item_scopes: list[str]):
        super().__init__(
            _("resources %(ids)s are not readable in every scope of this item (%(scopes)s): "
              "give them those scopes, or narrow the item's") % {"ids": ", ".join(narrower), "scopes": ", ".join(item_scopes)},
            field="resource_ids",
        )
        self.narrower = narrower


class KnowledgeStateError(KnowledgeError):
    """The item is not in a state the action applies to (e.g. archiving a merged item): 409."""

    status = 409
    code = "conflict"


class KnowledgeIdConflictError(KnowledgeError):
    status = 409
    code = "conflict"
    def __init__(self, knowledge_id: str):
        super().__init__(_("a knowledge item with id %(id)s already exists") % {"id": knowledge_id}, field="id")
