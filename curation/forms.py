"""Forms of the curation UI: they name the field that is wrong, shown in place."""
import json

from django import forms
from django.utils.translation import gettext_lazy as _

from core.events import EVENT_TYPES
from curation.labels import choices
from core.safe_json import MAX_DEPTH, json_problem
from knowledge.limits import CONTENT_MAX, EVOLVE_FEEDBACK_MAX, NOTE_MAX, REASON_MAX, TAG_VALUE_MAX, TASK_MAX
from knowledge.models import KNOWLEDGE_TYPES
from knowledge.operations.curators import MERGE_ID_MAX, MERGE_IDS_MAX, merge_ids_problem
from knowledge.serializers import tags_problem
from knowledge.search.filters import FilterError, parse_filter
from knowledge.search.rerank import RANK_MODES

# The API's `rank` values, as the playground shows them (the submitted value stays the API's).
RANK_LABELS = {"quality": _("quality blend (the default)"), "relevance": _("relevance only"), "seed": _("seed (quality first)")}

SORTS = [("relevance", _("Relevance")), ("quality", _("Quality")), ("newest", _("Newest")),
         ("helpful", _("Most helpful")), ("harmful", _("Most harmful"))]
# Without a query there is no relevance to sort by: the default (an empty value) is shown as "Newest", and it
# becomes relevance as soon as a query is typed, unless another order was chosen.
SORTS_WITHOUT_QUERY = [("", _("Newest")), ("quality", _("Quality")), ("helpful", _("Most helpful")),
                       ("harmful", _("Most harmful"))]
TYPES = choices(KNOWLEDGE_TYPES)
STATUSES = [("active", _("Active")), ("archived", _("Archived")), ("merged", _("Merged")),
            ("any", _("Any status"))]


def parse_tags(text: str) -> dict[str, str]:
    """'domain=coding, lang=python' -> {"domain": "coding", "lang": "python"} (any names: the list's tag filter finds
    items by the names they have; an edit checks its names, `EditForm.clean_tags`)."""
    tags = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise forms.ValidationError(_("“%(part)s” is not key=value") % {"part": part})
        tags[key.strip()] = value.strip()
    return tags


def split_list(text: str) -> list[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


class KnowledgeFilterForm(forms.Form):
    """The knowledge list's state; it lives in the URL's query string."""

    q = forms.CharField(required=False, max_length=500, label=_("Search"), widget=forms.SearchInput(
        attrs={"placeholder": _("e.g. selenium login"), "autocomplete": "off"}))
    types = forms.MultipleChoiceField(required=False, choices=TYPES, widget=forms.CheckboxSelectMultiple)
    scopes = forms.CharField(required=False, max_length=500, widget=forms.TextInput(
        attrs={"list": "known-scopes", "placeholder": "org:acme"}))
    tags = forms.CharField(required=False, max_length=500, widget=forms.TextInput(attrs={"placeholder": "domain=coding"}))
    owner = forms.CharField(required=False, max_length=200, widget=forms.TextInput(
        attrs={"placeholder": "agent:research_agent"}))
    status = forms.ChoiceField(required=False, choices=STATUSES)
    score_min = forms.IntegerField(required=False, min_value=1, max_value=5, label=_("Score from"))
    score_max = forms.IntegerField(required=False, min_value=1, max_value=5, label=_("to"))
    sort = forms.ChoiceField(required=False, choices=SORTS)
    page = forms.IntegerField(required=False, min_value=1)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if not self.data.get("q", "").strip():  # not offered; sort=relevance still validates (browse: newest)
            self.fields["sort"].widget.choices = SORTS_WITHOUT_QUERY

    def clean_tags(self):
        return parse_tags(self.cleaned_data["tags"])

    def clean_scopes(self):
        return split_list(self.cleaned_data["scopes"])

    def clean(self):
        data = super().clean()
        low, high = data.get("score_min"), data.get("score_max")
        if low and high and low > high:
            self.add_error("score_max", _("must not be below “Score from”"))
        return data


class EditForm(forms.Form):
    task = forms.CharField(label=_("Task"), widget=forms.Textarea(attrs={"rows": 2}), max_length=TASK_MAX)
    content = forms.CharField(label=_("Content"), widget=forms.Textarea(attrs={"rows": 8}), max_length=CONTENT_MAX)
    tags = forms.CharField(label=_("Tags"), required=False, max_length=2000, help_text=_("key=value, comma-separated"))
    types = forms.MultipleChoiceField(label=_("Types"), choices=TYPES, widget=forms.CheckboxSelectMultiple)
    reason = forms.CharField(label=_("Reason"), required=False, max_length=REASON_MAX,
                             help_text=_("why (kept with the version)"))
    # the item's updated_at when the form was opened: a save after someone else's change is refused, not a revert
    base_updated_at = forms.DateTimeField(required=False, widget=forms.HiddenInput)

    def __init__(self, *args, item=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.kept_tags = item.tags if item is not None else {}  # names the item has may stay, whatever they are

    def clean_tags(self):
        tags = parse_tags(self.cleaned_data["tags"])
        problem = tags_problem(tags, kept=self.kept_tags)
        if problem:
            raise forms.ValidationError(problem)
        long = next((name for name, value in tags.items() if len(value) > TAG_VALUE_MAX), None)
        if long is not None:  # as the API's TagsField refuses it
            raise forms.ValidationError(_("tag %(name)s: a value has at most %(most)d characters")
                                        % {"name": long[:100], "most": TAG_VALUE_MAX})
        return tags

    @staticmethod
    def initial_for(item) -> dict:
        return {"task": item.task, "content": item.content, "types": item.types,
                "tags": ", ".join(f"{k}={v}" for k, v in item.tags.items()),
                "base_updated_at": item.updated_at.isoformat()}  # a string: every microsecond kept


class FeedbackForm(forms.Form):
    kind = forms.ChoiceField(choices=[("helpful", _("Helpful")), ("harmful", _("Harmful"))])
    note = forms.CharField(required=False, max_length=NOTE_MAX)


class ScoreForm(forms.Form):
    score = forms.IntegerField(min_value=1, max_value=5)


class EvolveForm(forms.Form):
    feedback = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), max_length=EVOLVE_FEEDBACK_MAX,
                               help_text=_("what should change, e.g. “the timeout advice is wrong for v2”"))


class MergeForm(forms.Form):
    ids = forms.CharField(widget=forms.HiddenInput)
    task = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}), max_length=TASK_MAX)
    content = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 6}), max_length=CONTENT_MAX)

    def clean_ids(self):
        """The merge operations' rule (`MergeIdsInput`): 2 to MERGE_IDS_MAX ids of at most MERGE_ID_MAX characters,
        each item once."""
        ids = split_list(self.cleaned_data["ids"])
        if len(ids) < 2:
            raise forms.ValidationError(_("a merge needs at least two items"))
        if len(ids) > MERGE_IDS_MAX:
            raise forms.ValidationError(_("at most %(most)d items in one merge") % {"most": MERGE_IDS_MAX})
        long = next((i for i in ids if len(i) > MERGE_ID_MAX), None)
        if long is not None:
            raise forms.ValidationError(_("“%(id)s…” is not an item id (at most %(most)d characters)")
                                        % {"id": long[:MERGE_ID_MAX], "most": MERGE_ID_MAX})
        problem = merge_ids_problem(ids)
        if problem:
            raise forms.ValidationError(problem)
        return ids


class PlaygroundForm(forms.Form):
    token = forms.ModelChoiceField(queryset=None, empty_label=None, label=_("As agent token"))
    q = forms.CharField(max_length=500, label=_("Query"))
    top_k = forms.IntegerField(min_value=1, max_value=50, initial=5)
    min_score = forms.IntegerField(min_value=1, max_value=5, initial=3)
    rank = forms.ChoiceField(choices=[(r, RANK_LABELS.get(r, r)) for r in RANK_MODES], initial="quality")
    types = forms.MultipleChoiceField(required=False, choices=TYPES, widget=forms.CheckboxSelectMultiple)
    scopes = forms.CharField(required=False, max_length=500, help_text=_("comma-separated"))
    filters = forms.CharField(required=False, max_length=5000, widget=forms.Textarea(attrs={"rows": 2}),
                              help_text=_('JSON, e.g. {"op": "EQ", "key": "tags.domain", "value": "coding_style"}'))

    def __init__(self, *args, **kwargs):
        from agents.models import AgentToken

        super().__init__(*args, **kwargs)
        self.fields["token"].queryset = AgentToken.objects.filter(is_active=True)

    def clean_scopes(self):
        return split_list(self.cleaned_data["scopes"])

    def clean_filters(self):
        text = self.cleaned_data["filters"].strip()
        if not text:
            return None
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(_("not valid JSON: %(problem)s at character %(position)s")
                                        % {"problem": exc.msg, "position": exc.pos}) from exc
        except RecursionError:  # json's parser recurses: nesting in the thousands of levels exhausts the stack
            raise forms.ValidationError(_("nests deeper than %(depth)s levels") % {"depth": MAX_DEPTH}) from None
        unsafe = json_problem(value)  # a NUL, a lone surrogate, too deep: as the API refuses them
        if unsafe:
            raise forms.ValidationError("%s: %s" % unsafe)
        try:
            return parse_filter(value)
        except FilterError as exc:
            raise forms.ValidationError(str(exc)) from exc


class DocumentForm(forms.Form):
    """A file or a URL to read into knowledge items (the document_ingest operation checks it further)."""

    file = forms.FileField(label=_("File"), required=False, help_text=_("Markdown, plain text, HTML, PDF or DOCX"))
    url = forms.CharField(required=False, max_length=2000, label="URL",
                          help_text=_("instead of a file: an http(s) page or file to fetch"))
    scopes = forms.CharField(label=_("Scopes"), max_length=500,
                             help_text=_("comma-separated: the items' scopes, e.g. org:acme"),
                             widget=forms.TextInput(attrs={"list": "known-scopes", "placeholder": "org:acme"}))
    types = forms.MultipleChoiceField(required=False, choices=TYPES, widget=forms.CheckboxSelectMultiple,
                                      help_text=_("default: definition"))
    chunk_size = forms.IntegerField(required=False, min_value=1, label=_("Chunk size"),
                                    help_text=_("the most characters of one item (default 1200)"))
    chunk_overlap = forms.IntegerField(required=False, min_value=0, label=_("Chunk overlap"),
                                       help_text=_("characters repeated from the previous chunk (default 150)"))

    def clean_scopes(self):
        scopes = split_list(self.cleaned_data["scopes"])
        if not scopes:
            raise forms.ValidationError(_("name at least one scope (a person has no default scope)"))
        return scopes

    def clean(self):
        data = super().clean()
        if self.errors.get("file") or self.errors.get("url"):
            return data
        if bool(data.get("file")) == bool((data.get("url") or "").strip()):
            self.add_error("file", _("choose a file, or give a URL (one of the two)"))
        return data


class ImportForm(forms.Form):
    """A file to import: our JSON Lines export, a CSV, Markdown or a zip of Markdown."""

    file = forms.FileField(label=_("File"), help_text=_(".jsonl (a KnowHub export), .csv, .md or .zip"))
    scopes = forms.CharField(label=_("Scopes"), required=False, max_length=500,
                             widget=forms.TextInput(attrs={"list": "known-scopes", "placeholder": "org:acme"}),
                             help_text=_("comma-separated: for records that name none (CSV, Markdown); for an export, "
                                             "the only scopes to take from it"))
    types = forms.MultipleChoiceField(required=False, choices=TYPES, widget=forms.CheckboxSelectMultiple,
                                      help_text=_("types of the items made from Markdown (default: definition)"))
    passphrase = forms.CharField(label=_("Passphrase"), required=False, max_length=1000, widget=forms.PasswordInput,
                                 help_text=_("only for an export whose secrets are sealed under one"))

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("auto_id", "import_%s")  # ids apart from the upload form's on the same page
        super().__init__(*args, **kwargs)

    def clean_scopes(self):
        return split_list(self.cleaned_data["scopes"])


class WebhookForm(forms.Form):
    """A URL subscribed to events (the webhook_subscribe operation checks the URL and the scopes further)."""

    url = forms.CharField(max_length=2000, label="URL", help_text=_("https://… receiving a signed POST per event"),
                          widget=forms.TextInput(attrs={"placeholder": "https://ci.example.com/knowhub"}))
    events = forms.MultipleChoiceField(label=_("Events"), choices=[(t, t) for t in EVENT_TYPES],
                                       widget=forms.CheckboxSelectMultiple)
    scopes = forms.CharField(label=_("Scopes"), required=False, max_length=500,
                             help_text=_("comma-separated, e.g. org:acme; empty: every scope"),
                             widget=forms.TextInput(attrs={"list": "known-scopes", "placeholder": "org:acme"}))
    description = forms.CharField(label=_("Description"), required=False, max_length=200)

    def clean_scopes(self):
        return split_list(self.cleaned_data["scopes"])
