"""A WSGI application for tests of the web server's own settings (knowhub_site/gunicorn_conf.py): it answers the
length of the query string it was given."""
import json


def application(environ, start_response):
    body = json.dumps({"query_length": len(environ.get("QUERY_STRING", ""))}).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]
