"""GET /api/export (streamed JSON Lines) and POST /api/import (202 with the import's job): ingest.operations over
HTTP."""
import itertools
import json

from asgiref.sync import sync_to_async
from django.core.serializers.json import DjangoJSONEncoder
from django.http import StreamingHttpResponse
from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework.exceptions import ValidationError
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser
from rest_framework.views import APIView

from agents import operations
from api import schema
from api.documents import form_data
from api.views import caller_of, query_problems, reply
from core.fields import StrictBooleanField
from ingest.inputs import ImportInput
from ingest.outputs import ImportJobOutput

PASSPHRASE_HEADER = "X-KnowHub-Passphrase"


STREAM_BATCH = 200  # records per chunk sent


def header_text(value: str) -> str:
    """A header's value as its sender wrote it: WSGI hands headers over as Latin-1, so a UTF-8 passphrase
    ("pässwort", as an import's form field would carry it) arrived garbled and sealed the secrets under a key
    the same passphrase never opened. Bytes that are not UTF-8 stay as Latin-1 read them."""
    try:
        return value.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return value


def jsonl(records):
    for record in records:
        yield json.dumps(record, ensure_ascii=False, cls=DjangoJSONEncoder) + "\n"


async def jsonl_async(records):
    """The same lines for an ASGI server: each batch is read in Django's sync thread (the database connection's),
    so the export streams instead of being gathered in memory first, as Django does with a sync iterator."""
    lines = jsonl(records)
    take = sync_to_async(lambda: "".join(itertools.islice(lines, STREAM_BATCH)), thread_sensitive=True)
    while chunk := await take():
        yield chunk


EXPORT_PARAMETERS = ("scopes", "vectors")


def check_export_query(params) -> None:
    """GET /api/export takes `scopes` (repeated, or one comma-separated value: a list) and `vectors`, as every other
    input refuses what it does not know (`api.views.query_problems`): 400 naming each other parameter
    (`?scope=team:b` would export every scope), the passphrase among them (it goes in the header: a URL is kept in
    logs and histories, and without the header the secrets would go out unsealed), and one given twice."""
    fields = query_problems(params, EXPORT_PARAMETERS, lists=("scopes",))
    if "passphrase" in params:
        fields["passphrase"] = [_("goes in the %(header)s header, never in the URL") % {"header": PASSPHRASE_HEADER}]
    if fields:
        raise ValidationError(fields)


class ExportApi(APIView):
    @schema.for_operation(
        "knowledge_export", operation_id="knowledge_export",
        parameters=[OpenApiParameter("scopes", str, many=True, description="only these scopes"),
                    OpenApiParameter("vectors", bool, description="the items' vectors too (default true; false: about "
                                                                  "an eighth the size, the importing hub embeds again)"),
                    OpenApiParameter(PASSPHRASE_HEADER, str, OpenApiParameter.HEADER,
                                     description="seal the secrets under this passphrase (a header, never the URL)")],
        responses={(200, "application/x-ndjson"): OpenApiResponse(description="JSON Lines: a header, then resources, "
                                                                  "knowledge items and rejected merge pairs"),
                   **schema.ERRORS})
    def get(self, request):
        check_export_query(request.query_params)
        data = {"scopes": request.query_params.getlist("scopes") or [],
                "passphrase": header_text(request.headers.get(PASSPHRASE_HEADER, ""))}
        data["scopes"] = [s for value in data["scopes"] for s in value.split(",") if s]
        if "vectors" in request.query_params:  # as any query string's boolean: true/false or 1/0, nothing else
            given = request.query_params["vectors"]
            data["vectors"] = StrictBooleanField.QUERY_VALUES.get(given, given)
        records = operations.call("knowledge_export", caller_of(request), data=data)
        first = next(records)  # the header: errors before it surface as a JSON error, not a cut stream
        everything = itertools.chain([first], records)
        streamed = jsonl_async(everything) if hasattr(request, "scope") else jsonl(everything)  # ASGI or WSGI
        response = StreamingHttpResponse(streamed, content_type="application/x-ndjson")
        response["Content-Disposition"] = 'attachment; filename="knowhub-export.jsonl"'
        response["Cache-Control"] = "no-store"
        return response


class ImportApi(APIView):
    parser_classes = [MultiPartParser, FormParser, JSONParser]

    @schema.for_operation("knowledge_import", request={"multipart/form-data": ImportInput, "application/json": ImportInput},
                          responses={202: ImportJobOutput, **schema.WRITE_ERRORS})
    def post(self, request):
        return reply(request, "knowledge_import", data=form_data(request))
