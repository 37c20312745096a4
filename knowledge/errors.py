"""Typed errors raised by knowledge services; the API maps them to 4xx."""


class KnowledgeError(Exception):
    """Base class. `field` names the input at fault, when there is one."""

    def __init__(self, message: str, *, field: str | None = None):
        super().__init__(message)
        self.message = message
        self.field = field


class UnknownResourceError(KnowledgeError):
    def __init__(self, missing: list[str]):
        super().__init__(f"unknown or unreadable resource ids: {', '.join(missing)}", field="resource_ids")
        self.missing = missing


class ResourceScopeError(KnowledgeError):
    def __init__(self, narrower: list[str], item_scopes: list[str]):
        super().__init__(
            f"resources {', '.join(narrower)} are not readable in every scope of this item ({', '.join(item_scopes)}): "
            "give them those scopes, or narrow the item's",
            field="resource_ids",
        )
        self.narrower = narrower


class KnowledgeStateError(KnowledgeError):
    """The item is not in a state the action applies to (e.g. archiving a merged item): 409."""


class KnowledgeIdConflictError(KnowledgeError):
    def __init__(self, knowledge_id: str):
        super().__init__(f"a knowledge item with id {knowledge_id} already exists", field="id")
