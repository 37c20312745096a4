"""Who is calling: an agent with a token, or a curator with a browser session."""
from dataclasses import dataclass


@dataclass(frozen=True)
class Caller:
    principal: str  # agent:<id> or user:<username>
    agent_id: str
    readable_scopes: tuple[str, ...] | None  # None: every scope (curators)
    writable_scopes: tuple[str, ...] | None
    can_read_secrets: bool = False
    static_filters: object = None

    @classmethod
    def for_token(cls, token) -> "Caller":
        return cls(
            principal=f"agent:{token.agent_id}", agent_id=token.agent_id,
            readable_scopes=tuple(token.readable_scopes), writable_scopes=tuple(token.writable_scopes),
            can_read_secrets=token.can_read_secrets, static_filters=token.static_filters,
        )

    @classmethod
    def for_user(cls, user) -> "Caller":
        return cls(principal=f"user:{user.get_username()}", agent_id=user.get_username(), readable_scopes=None,
                   writable_scopes=None, can_read_secrets=user.has_perm("resources.view_resource") and user.is_superuser)

    def search_filters(self, filters=None):
        """The caller's static filters AND-ed with `filters` (either may be None): they only ever narrow."""
        from knowledge.search.filters import AND, parse_filter

        combined = [f for f in (self.static_filters and parse_filter(self.static_filters), filters) if f]
        return AND(*combined) if combined else None

    def may_write(self, scopes) -> list[str]:
        """The scopes of `scopes` this caller may not write (empty when all are allowed)."""
        if self.writable_scopes is None:
            return []
        return [s for s in scopes if s not in self.writable_scopes]
