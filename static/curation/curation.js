// Errors htmx does not swap in place (403, 500, network) get a message a person can act on.
document.addEventListener("htmx:responseError", function (event) {
  var xhr = event.detail.xhr, flash = document.getElementById("flash");
  var text = {403: "You do not have permission to do that: ask an admin for the curator role.",
              404: "That item no longer exists: reload the page."}[xhr.status] ||
             "Something went wrong on the server (" + xhr.status + "); try again, and tell an admin if it persists.";
  flash.textContent = text; flash.hidden = false;
});
document.addEventListener("htmx:sendError", function () {
  var flash = document.getElementById("flash");
  flash.textContent = "The server could not be reached: check your connection and try again.";
  flash.hidden = false;
});
document.addEventListener("htmx:beforeRequest", function () { document.getElementById("flash").hidden = true; });
