"""`{{ text|http_url }}`: the text as an href when it is an http(s) URL, else "" (show it unlinked)."""
from django import template

from curation import links

register = template.Library()


@register.filter
def http_url(value) -> str:
    return links.http_url(value) or ""
