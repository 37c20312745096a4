// Errors htmx does not swap in place (403, 500, network) get a message a person can act on,
// in the page's language: the texts are translated by the template (data-msg-* on <body>).
function flashMessage(name, status) {
  var flash = document.getElementById("flash");
  flash.textContent = document.body.dataset[name].replace("%(status)s", status);
  flash.hidden = false;
}
document.addEventListener("htmx:responseError", function (event) {
  var status = event.detail.xhr.status;
  flashMessage({403: "msgForbidden", 404: "msgGone"}[status] || "msgServer", status);
});
document.addEventListener("htmx:sendError", function () { flashMessage("msgOffline", ""); });
document.addEventListener("htmx:beforeRequest", function () { document.getElementById("flash").hidden = true; });
