import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "knowhub_site.settings")
os.environ.setdefault("KNOWHUB_DB_POOL", "true")  # web processes borrow from a bounded pool (settings.py)
application = get_wsgi_application()
