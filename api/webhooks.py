"""/api/webhooks: webhooks.operations over HTTP (curators: the curator role or a curator token)."""
from rest_framework.views import APIView

from api import schema
from api.resources import unstored_if_secret
from api.views import reply
from webhooks.operations import (
    ChangeInput, DeletedOutput, DeliveryOutput, GetInput, SubscribeInput, SubscriptionCreatedOutput,
    SubscriptionDetailOutput, SubscriptionListOutput, SubscriptionOutput,
)


class WebhookCollectionApi(APIView):
    @schema.for_operation("webhook_list", operation_id="webhook_list",
                          responses={200: SubscriptionListOutput, **schema.ERRORS})
    def get(self, request):
        return reply(request, "webhook_list")

    @schema.for_operation("webhook_subscribe", request=SubscribeInput,
                          responses={201: SubscriptionCreatedOutput, **schema.WRITE_ERRORS})
    def post(self, request):
        return unstored_if_secret(reply(request, "webhook_subscribe", data=request.data), "secret")


class WebhookDetailApi(APIView):
    @schema.for_operation("webhook_get", operation_id="webhook_get", parameters=[GetInput],
                          responses={200: SubscriptionDetailOutput, **schema.ERRORS})
    def get(self, request, webhook_id):
        return unstored_if_secret(reply(request, "webhook_get", data=request.query_params, webhook_id=str(webhook_id)),
                                  "secret")

    @schema.for_operation("webhook_change", request=ChangeInput,
                          responses={200: SubscriptionOutput, **schema.WRITE_ERRORS})
    def patch(self, request, webhook_id):
        return reply(request, "webhook_change", data=request.data, webhook_id=str(webhook_id))

    @schema.for_operation("webhook_delete", request=None, responses={200: DeletedOutput, **schema.ERRORS})
    def delete(self, request, webhook_id):
        return reply(request, "webhook_delete", webhook_id=str(webhook_id))


class WebhookResendApi(APIView):
    @schema.for_operation("webhook_resend", request=None, responses={202: DeliveryOutput, **schema.errors(409)})
    def post(self, request, webhook_id, delivery_id):
        return reply(request, "webhook_resend", webhook_id=str(webhook_id), delivery_id=str(delivery_id))
