"""Small helpers shared by the curation views."""
from dataclasses import dataclass

from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.utils.html import format_html

from rest_framework.exceptions import APIException
from rest_framework.exceptions import PermissionDenied as OperationRefused
from rest_framework.exceptions import ValidationError

from agents.caller import Caller
from core.errors import DomainError, first_message

PAGE_SIZE = 20
# A long list is counted up to here ("more than 1,000 items"): counting 100k rows costs more than showing 20 of them.
COUNT_UP_TO = 1_000


def principal(request) -> str:
    return Caller.for_user(request.user).principal


def caller_of(request) -> Caller:
    """The signed-in person as a caller: the UI runs the same registered operations as the API."""
    return Caller.for_user(request.user)


# What a registered operation refuses with (its input, a domain rule, a permission): shown in the form by `refuse`
REFUSALS = (DomainError, ValidationError, OperationRefused)


def refusal_fields(exc) -> dict:
    """An operation's refusal as {field path, or None: messages}."""
    if isinstance(exc, ValidationError):
        return exc.detail if isinstance(exc.detail, dict) else {None: exc.detail}
    if isinstance(exc, DomainError):
        return exc.api_fields() or {None: [exc.message]}
    return {None: [str(getattr(exc, "detail", exc))]}  # the operation's PermissionDenied (a scope not writable), ...


def refuse(form, exc) -> None:
    """An operation's refusal as errors in `form`: each on its field when the form has it, else above the form."""
    for path, messages in refusal_fields(exc).items():
        name = str(path).split(".")[0] if path else None
        form.add_error(name if name in form.fields else None, first_message(messages))


def refusal_text(exc) -> str:
    """An operation's refusal in one line: each field's first message after the field's name, said once (a
    ChainError's message is already its first field's), else its message."""
    return "; ".join(f"{path}: {first_message(messages)}" if path and path != "non_field_errors" else first_message(messages)
                     for path, messages in refusal_fields(exc).items())


def refusal_response(request, exc) -> HttpResponse:
    """A refusal no view expected (a deployment's filter, a rule added to an operation later), answered instead of a
    500: 403 for a permission, 422 for refused input, else the error's own status. An htmx request gets the reason
    in the page's flash area (swapped there for 409, 410 and 422; htmx flashes its own message for the others)."""
    if isinstance(exc, OperationRefused):
        raise PermissionDenied(str(exc.detail)) from exc
    status = exc.status if isinstance(exc, DomainError) else exc.status_code
    status = 422 if status == 400 else status
    text = refusal_text(exc)
    if request.htmx:
        response = HttpResponse(format_html('<div id="flash" role="alert" aria-live="assertive">{}</div>', text),
                                status=status)
        response["HX-Retarget"], response["HX-Reswap"] = "#flash", "outerHTML"
        return response
    return render(request, "errors/refused.html", {"message": text}, status=status)


# Answered by `refusal_response` when a view lets one through (permissions.require wraps every view)
UNEXPECTED_REFUSALS = (DomainError, APIException)


def paginate(items, page_number, *, per_page: int = PAGE_SIZE):
    return Paginator(items, per_page).get_page(page_number or 1)


@dataclass
class BoundedPage:
    """One page of a list counted only up to COUNT_UP_TO; the pager needs no total to go on (`has_next`)."""

    object_list: list
    number: int
    count: int  # how many there are; with `more`, the bound: there are more than this
    more: bool
    per_page: int
    has_next: bool

    @property
    def has_previous(self) -> bool:
        return self.number > 1

    @property
    def next_page_number(self) -> int:
        return self.number + 1

    @property
    def previous_page_number(self) -> int:
        return self.number - 1

    @property
    def num_pages(self) -> int | None:
        """None when the list was not counted to its end."""
        return None if self.more else pages_for(self.count, self.per_page)


def pages_for(count: int, per_page: int) -> int:
    """How many pages `count` rows fill (one for none: an empty list still has its page)."""
    return max(1, -(-count // per_page))


PAGE_NUMBER_MAX = 100_000  # a page number past it is taken as it: its offset stays within what the database takes


def bounded_page(items, page_number, *, per_page: int = PAGE_SIZE, count_up_to: int | None = None) -> BoundedPage:
    """A page of `items` (a list or a queryset) found by its offset, with how many there are counted up to
    `count_up_to`. A number past the end gives the last page, as Paginator.get_page does (for a long list that
    costs one exact count, only then)."""
    count_up_to = COUNT_UP_TO if count_up_to is None else count_up_to
    try:
        number = min(max(1, int(page_number or 1)), PAGE_NUMBER_MAX)
    except (TypeError, ValueError):
        number = 1
    count = len(items) if isinstance(items, list) else items.order_by()[:count_up_to + 1].count()
    more = count > count_up_to
    if not more:
        number = min(number, pages_for(count, per_page))
    rows = list(items[(number - 1) * per_page:number * per_page + 1])
    if more and not rows and number > 1:
        number = pages_for(items.count(), per_page)
        rows = list(items[(number - 1) * per_page:number * per_page + 1])
    return BoundedPage(object_list=rows[:per_page], number=number, count=min(count, count_up_to), more=more,
                       per_page=per_page, has_next=len(rows) > per_page)


def render_parts(request, template: str, parts: list[str], context: dict, *, status: int = 200) -> HttpResponse:
    """Several partials of one page in one response (the first swaps the target, the rest out of band)."""
    html = "".join(render_to_string(f"{template}#{part}", context, request=request) for part in parts)
    return HttpResponse(html, status=status)
