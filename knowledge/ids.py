"""Knowledge ids in the seed's form: `knowledge-YYYYMMDD-xxxx`.

The suffix is random lowercase base-36. Four characters give 1.7M ids a day;
a collision is caught by the primary key and retried (see
`knowledge.services.knowledge_create`), growing the suffix after repeated
collisions so ids never collide even on a very busy day.
"""
import re
import secrets
import string
from datetime import datetime

from django.utils import timezone

ALPHABET = string.ascii_lowercase + string.digits
SUFFIX_LENGTH = 4
MAX_SUFFIX_LENGTH = 12
ID_PATTERN = r"^knowledge-[0-9]{8}-[a-z0-9]{4,12}$"
ID_RE = re.compile(ID_PATTERN)


def new_knowledge_id(*, now: datetime | None = None, suffix_length: int = SUFFIX_LENGTH) -> str:
    day = (now or timezone.now()).strftime("%Y%m%d")
    suffix = "".join(secrets.choice(ALPHABET) for _ in range(suffix_length))
    return f"knowledge-{day}-{suffix}"


def is_knowledge_id(value: str) -> bool:
    return bool(ID_RE.match(value))
