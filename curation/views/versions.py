"""Version history: a diff between any two states, and restoring one."""
from django.http import Http404
from django.shortcuts import render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST, require_safe
from rest_framework.exceptions import ValidationError

from agents import operations
from core.errors import DomainError
from curation import permissions
from curation.diff import diff_rows, state, state_names
from curation.views.common import caller_of, render_parts
from curation.views.knowledge import DETAIL, _item, detail_context


@permissions.require(permissions.VIEW)
@require_safe
def version_diff(request, knowledge_id):
    item = _item(knowledge_id)
    known = state_names(item)
    a, b = request.GET.get("a", ""), request.GET.get("b", "current")
    errors = [_("%(name)s: no version “%(value)s” (choose one of %(known)s)") % {"name": name, "value": value, "known": ", ".join(known)}
              for name, value in (("a", a), ("b", b))
              if value not in known]
    if errors:
        return render(request, f"{DETAIL}#diff", {"item": item, "diff_errors": errors}, status=422)
    return render(request, f"{DETAIL}#diff", {"item": item, "diff_a": a, "diff_b": b,
                                              "diff": diff_rows(state(item, a), state(item, b))})


@permissions.require(permissions.CURATE)
@require_POST
def version_restore(request, knowledge_id, number):
    item = _item(knowledge_id)
    try:
        operations.call("knowledge_restore_version", caller_of(request), knowledge_id=item.id, data={"version": number})
    except ValidationError:  # no such version
        raise Http404(f"{item.id} has no version {number}") from None
    except DomainError as exc:
        if exc.status != 400:  # not about the number (a filter's refusal): answered as any refusal is (permissions.require)
            raise
        raise Http404(f"{item.id} has no version {number}") from None  # refused by the input check: no version 0 exists
    context = detail_context(_item(item.id), oob=True, restored=number)
    return render_parts(request, DETAIL, ["content", "versions", "fields"], context)
