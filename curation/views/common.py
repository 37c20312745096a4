"""Small helpers shared by the curation views."""
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.template.loader import render_to_string

from agents.caller import Caller

PAGE_SIZE = 20


def principal(request) -> str:
    return Caller.for_user(request.user).principal


def caller_of(request) -> Caller:
    """The signed-in person as a caller: the UI runs the same registered operations as the API."""
    return Caller.for_user(request.user)


def paginate(items, page_number, *, per_page: int = PAGE_SIZE):
    return Paginator(items, per_page).get_page(page_number or 1)


def render_parts(request, template: str, parts: list[str], context: dict, *, status: int = 200) -> HttpResponse:
    """Several partials of one page in one response (the first swaps the target, the rest out of band)."""
    html = "".join(render_to_string(f"{template}#{part}", context, request=request) for part in parts)
    return HttpResponse(html, status=status)
