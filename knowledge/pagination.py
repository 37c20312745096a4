"""Opaque cursors for newest-first lists: the (created_at, id) of the last item shown."""
import base64
import json
from datetime import UTC, datetime

from knowledge.ids import is_knowledge_id


def encode_cursor(created_at: datetime, item_id: str) -> str:
    raw = json.dumps([created_at.isoformat(), item_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    """Raises ValueError for anything that is not a cursor we made: its time an aware date-time the database can hold
    (a UTC offset pushing it past year 1 or 9999 is refused here, not by the database), its id a knowledge id."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        created_at, item_id = json.loads(raw)
        created_at = datetime.fromisoformat(created_at)
        if created_at.tzinfo is None or not is_knowledge_id(item_id):
            raise ValueError("bad cursor")
        return created_at.astimezone(UTC), item_id
    except (ValueError, TypeError, OverflowError) as exc:  # json.JSONDecodeError is a ValueError
        raise ValueError("bad cursor") from exc
