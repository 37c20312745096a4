"""Typed errors raised by knowledge services; the API maps them to 4xx."""


class KnowledgeError(Exception):
    """Base class. `field` names the input at fault, when there is one."""

    def __init__(self, message: str, *, field: str | None = None):
        super().__init__(message)
        self.message = message
        self.field = field


class UnknownResourceError(KnowledgeError):
    def __init__(self, missing: list[str]):
        super().__init__(f"unknown resource ids: {', '.join(missing)}", field="resource_ids")
        self.missing = missing


class KnowledgeIdConflictError(KnowledgeError):
    def __init__(self, knowledge_id: str):
        super().__init__(f"a knowledge item with id {knowledge_id} already exists", field="id")
