"""A WSGI application for tests of the web server's own settings (knowhub_site/gunicorn_conf.py): it answers the
length of the query string it was given, and under /body the length of the body it read, `?late=S` seconds after the
request came in (a view that reads its body late); a body it could not read is a 408, as the API answers."""
import json
import time
from urllib.parse import parse_qs


def answer(start_response, status: str, content: dict):
    body = json.dumps(content).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


def application(environ, start_response):
    query = environ.get("QUERY_STRING", "")
    if environ["PATH_INFO"] != "/body":
        return answer(start_response, "200 OK", {"query_length": len(query)})
    time.sleep(float(parse_qs(query).get("late", ["0"])[0]))
    try:
        body = environ["wsgi.input"].read()
    except OSError as exc:
        return answer(start_response, "408 Request Timeout", {"error": str(exc)})
    return answer(start_response, "200 OK", {"body_length": len(body)})
