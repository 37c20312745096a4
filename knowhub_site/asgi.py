"""The web process: Django, with the MCP server's streamable HTTP transport under /mcp (api/mcp_http.py)."""
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "knowhub_site.settings")
os.environ.setdefault("KNOWHUB_DB_POOL", "true")  # web processes borrow from a bounded pool (settings.py)
os.environ.setdefault("KNOWHUB_SEARCH_LANES", "2")  # a search's statements side by side (knowledge/search/lanes.py)
django_application = get_asgi_application()  # sets Django up before the MCP modules import models

from api.mcp_http import with_mcp  # noqa: E402
from knowhub_site.concurrency import limited  # noqa: E402

# /mcp counts against the same bound as Django's requests: its tool calls run in threads of their own, each holding a
# pooled connection while it works (api/mcp_server.py)
application = limited(with_mcp(django_application))

from knowledge.search.warmup import warm_up_web_process  # noqa: E402

warm_up_web_process()  # load the models before taking requests, not inside the first search
