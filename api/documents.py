"""POST/GET /api/documents and GET /api/documents/{id}: ingest.operations' document ingestion over HTTP."""
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser
from rest_framework.views import APIView

from api import schema
from api.views import reply
from ingest.inputs import DocumentIngestInput, DocumentListInput
from ingest.outputs import DocumentListOutput, DocumentOutput


def form_data(request, lists=("scopes", "types")) -> dict:
    """A multipart form as the operation's JSON-like data: lists from repeated fields or one comma-separated value."""
    data = request.data
    if not hasattr(data, "getlist"):
        return data
    plain = {key: data.get(key) for key in data}
    for name in lists:
        values = data.getlist(name)
        if values:
            plain[name] = [v.strip() for value in values for v in value.split(",") if v.strip()]
    for name in ("chunk_size", "chunk_overlap"):  # a number, or left for the serializer to refuse naming the field
        if isinstance(plain.get(name), str) and plain[name].strip().isascii() and plain[name].strip().isdecimal():
            plain[name] = int(plain[name])
    return plain


class DocumentCollectionApi(APIView):
    parser_classes = [MultiPartParser, FormParser, JSONParser]

    @schema.for_operation("document_list", operation_id="document_list", parameters=[DocumentListInput],
                          responses={200: DocumentListOutput, **schema.ERRORS})
    def get(self, request):
        return reply(request, "document_list", data=request.query_params)

    @schema.for_operation("document_ingest",
                          request={"multipart/form-data": DocumentIngestInput, "application/json": DocumentIngestInput},
                          responses={202: DocumentOutput, **schema.errors(409, 413, 415)})
    def post(self, request):
        return reply(request, "document_ingest", data=form_data(request))


class DocumentDetailApi(APIView):
    @schema.for_operation("document_get", operation_id="document_get", responses={200: DocumentOutput, **schema.ERRORS})
    def get(self, request, document_id):
        return reply(request, "document_get", document_id=document_id)
