"""Opaque cursors for newest-first lists: the (created_at, id) of the last item shown."""
import base64
import json
from datetime import datetime


def encode_cursor(created_at: datetime, item_id: str) -> str:
    raw = json.dumps([created_at.isoformat(), item_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    """Raises ValueError for anything that is not a cursor we made."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        created_at, item_id = json.loads(raw)
        return datetime.fromisoformat(created_at), str(item_id)
    except (ValueError, TypeError, json.JSONDecodeError) as exc:
        raise ValueError("bad cursor") from exc
