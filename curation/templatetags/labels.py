"""`{{ item.status|label }}`: a stored identifier (status, type, kind) as a person reads it (curation.labels)."""
from django import template

from curation import labels

register = template.Library()


@register.filter
def label(value):
    return labels.label(value)


@register.filter
def progress(values):
    """`{{ document.progress|progress }}`: a job's or a document's progress, labelled, " · " between entries."""
    return " · ".join(labels.progress(values))
