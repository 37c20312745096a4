"""Field limits, one place: the API's serializers, the curation UI's forms and the LLM schemas use these."""
import re

TASK_MAX = 10_000
QUERY_MAX = 2_000  # a search's question (`q`), the API's and the UI's explain panel's
CONTENT_MAX = 100_000
REASON_MAX = 2_000  # why an edit, archive or restore was made
TAG_VALUE_MAX = 500
# A tag's name: what a filter can name (`tags.<name>`), so every tag an item is saved with can be filtered on.
TAG_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")
TAGS_MAX = 50  # tags on one item
SCOPE_MAX = 200
EVOLVE_FEEDBACK_MAX = 10_000
NOTE_MAX = 2_000  # a curator's note on a feedback case
RESOURCE_IDS_MAX = 100  # resources one item links to
BULK_SAVE_MAX = 500  # items in one POST /api/knowledge/bulk
