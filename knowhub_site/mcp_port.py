"""/mcp on the web server: the MCP server runs in a process of its own (`make run`), on MCP_PORT.

Behind a proxy /mcp is routed there and never reaches this view; on a bare `make run` an MCP host pointed at
the web server's port gets a clear answer naming the right address instead of a curation page's 404.
"""
from django.conf import settings
from django.http import JsonResponse
from django.http.request import split_domain_port
from django.utils.translation import gettext as _
from django.views.decorators.csrf import csrf_exempt


@csrf_exempt
def mcp_elsewhere(request):
    domain, _port = split_domain_port(request.get_host())
    shown = f"[{domain}]" if ":" in domain else domain
    url = f"{request.scheme}://{shown}:{settings.MCP_PORT}/mcp"
    message = _("the MCP server listens on its own port: %(url)s") % {"url": url}
    return JsonResponse({"error": {"code": "mcp_elsewhere", "message": message, "fields": {}}, "mcp_url": url},
                        status=421)
