"""POST /api/resource and GET /api/resource/{id} (seed 003, scenarios 1-4)."""
from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import APIException, PermissionDenied
from rest_framework.response import Response
from rest_framework.views import APIView

from agents.caller import Caller
from agents.chain import invoke
from knowledge.api import schema
from knowledge.api.idempotency import idempotent_response
from knowledge.api.safe_json import text_problem
from knowledge.api.serializers import StrictBooleanField
from knowledge.api.views import caller_of
from knowledge.serializers import SCOPE_RE
from resources.models import RESOURCE_ID_PATTERN, Resource, ResourceContentType
from resources.services import ResourceExistsError, SecretExpired, resource_create, resource_reveal, resource_save_version


class ResourceInput(serializers.Serializer):
    id = serializers.RegexField(RESOURCE_ID_PATTERN, max_length=255,
                                error_messages={"invalid": "must be path-like, e.g. code/selenium/login"})
    title = serializers.CharField(max_length=300)
    body = serializers.CharField(required=False, allow_blank=True, default="", max_length=1_000_000)
    secure_body = serializers.CharField(required=False, allow_blank=True, default="", max_length=100_000)
    content_type = serializers.ChoiceField(choices=ResourceContentType.values, default="text")
    metadata = serializers.DictField(required=False, default=dict)
    scopes = serializers.ListField(child=serializers.RegexField(SCOPE_RE.pattern, max_length=200), required=False, min_length=1)
    expires_at = serializers.DateTimeField(required=False, allow_null=True, default=None)

    def validate(self, attrs):
        # Seed scenario 3 puts a cookie's expiry in metadata: honour it there too.
        if attrs.get("expires_at") is None and attrs.get("metadata", {}).get("expires_at"):
            try:
                attrs["expires_at"] = serializers.DateTimeField().to_internal_value(attrs["metadata"]["expires_at"])
            except serializers.ValidationError as exc:
                raise serializers.ValidationError({"metadata": {"expires_at": exc.detail}}) from exc
        return attrs


class ResourceGetInput(serializers.Serializer):
    reveal = StrictBooleanField(default=False, help_text="include secure_body (tokens with secret access only)")


class ResourceOutput(serializers.Serializer):
    id = serializers.CharField()
    title = serializers.CharField()
    body = serializers.CharField()
    content_type = serializers.CharField()
    metadata = serializers.DictField()
    scopes = serializers.ListField(child=serializers.CharField())
    owner = serializers.CharField()
    expires_at = serializers.DateTimeField(allow_null=True)
    has_secret = serializers.BooleanField()
    version = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


    def get_version(self, resource) -> int:
        return resource.versions.count() + 1


class Gone(APIException):
    status_code = status.HTTP_410_GONE
    default_code = "expired"


def resource_data(resource: Resource, *, secret: str | None = None) -> dict:
    data = ResourceOutput(resource).data
    if secret is not None:
        data["secure_body"] = secret
    return data


def _save(*, context, **data):
    """Create, or save a new version of an id the caller may write (the old one is kept)."""
    caller: Caller = context["caller"]
    existing = Resource.objects.filter(pk=data["id"]).first()
    if existing is not None:
        visible = caller.readable_scopes is None or set(existing.scopes) & set(caller.readable_scopes)
        if not visible:
            raise ResourceExistsError(data["id"])  # the id is taken; say no more about it
        if not caller.may_write_any(existing.scopes):
            raise PermissionDenied(f"this caller may not write to the scopes of {existing.pk}")
        data.pop("scopes", None)  # a new version keeps who may see it
        return resource_save_version(resource_id=data.pop("id"), replaced_by=caller.principal, **data)
    scopes = data.pop("scopes", None) or list(caller.writable_scopes or ())[:1]
    refused = caller.may_write(scopes) if scopes else ["(none)"]
    if refused:
        raise PermissionDenied(f"this caller may not write to scope(s): {', '.join(refused)}")
    return resource_create(resource_id=data.pop("id"), scopes=scopes, owner=caller.principal, **data)


class ResourceCollectionApi(APIView):
    @extend_schema(request=ResourceInput, responses={201: ResourceOutput, **schema.WRITE_ERRORS})
    def post(self, request):
        caller = caller_of(request)

        def save():
            return status.HTTP_201_CREATED, resource_data(invoke("resource_save", _save, {"data": request.data},
                                                                 {"caller": caller}))

        return idempotent_response(request, caller, "resource_save", save)


class ResourceDetailApi(APIView):
    @extend_schema(operation_id="resource_get", parameters=[ResourceGetInput],
                   responses={200: ResourceOutput, **schema.errors(410)})
    def get(self, request, resource_id):
        query = ResourceGetInput(data=request.query_params)
        query.is_valid(raise_exception=True)
        reveal = query.validated_data["reveal"]
        return Response(resource_fetch(caller=caller_of(request), resource_id=resource_id, reveal=reveal,
                                       remote_addr=request.META.get("REMOTE_ADDR"),
                                       user_agent=request.META.get("HTTP_USER_AGENT", "")))


def resource_fetch(*, caller: Caller, resource_id: str, reveal: bool, remote_addr: str | None, user_agent: str) -> dict:
    """A resource the caller can see; with `reveal`, its secret (audited), for tokens with secret access."""
    if text_problem(resource_id):  # no such id can exist (MCP passes any text)
        raise Http404
    resources = Resource.objects.all()
    if caller.readable_scopes is not None:
        resources = resources.filter(scopes__overlap=list(caller.readable_scopes))
    resource = resources.filter(pk=resource_id).first()
    if resource is None:
        raise Http404
    if not reveal:
        return resource_data(resource)
    if not caller.can_read_secrets:
        raise PermissionDenied("this caller may not reveal secrets (a token with secret access, or the admin role)")
    try:
        secret = resource_reveal(resource=resource, principal=caller.principal, remote_addr=remote_addr,
                                 user_agent=user_agent)
    except SecretExpired as exc:
        raise Gone(f"this {resource.content_type} expired at {exc.expires_at.isoformat()}") from exc
    return resource_data(resource, secret=secret)
