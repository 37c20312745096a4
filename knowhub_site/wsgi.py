import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "knowhub_site.settings")
os.environ.setdefault("KNOWHUB_DB_POOL", "true")  # web processes borrow from a bounded pool (settings.py)
os.environ.setdefault("KNOWHUB_SEARCH_LANES", "2")  # a search's statements side by side (knowledge/search/lanes.py)
from knowhub_site.chunked_body import reading_chunked_bodies  # noqa: E402
from knowhub_site.unread_body import closing_after_unread_body  # noqa: E402

application = reading_chunked_bodies(closing_after_unread_body(get_wsgi_application()))

from knowledge.search.warmup import warm_up_web_process  # noqa: E402

warm_up_web_process()  # load the models before taking requests, not inside the first search
