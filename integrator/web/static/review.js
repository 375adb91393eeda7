// The review pages' one script (the pages allow no other: script-src 'self', no inline).
//
// A login's response hands this tab an action key. It is kept in sessionStorage, which is
// per origin (scheme, host and port) and per tab, and sent as the X-Integrator-Action
// header with every action form (approve, reject): a service on another port of this host
// receives the session cookie but never this key, so it cannot act. Nothing here acts on
// its own: only a form the person submits is sent, and only to the form's own action.
"use strict";

(function () {
  var STORE = "integrator-action";

  function key() {
    try {
      return window.sessionStorage.getItem(STORE);
    } catch (err) {
      return null;
    }
  }

  function forget() {
    try {
      window.sessionStorage.removeItem(STORE);
    } catch (err) {
      // storage is off: there is nothing to forget
    }
  }

  // The page after a login: keep its key, then go where the login was asked from.
  function adopt() {
    var found = document.getElementById("action-key");
    if (!found) {
      return;
    }
    var value = found.getAttribute("data-key") || "";
    var next = found.getAttribute("data-next") || "/";
    found.remove();
    try {
      window.sessionStorage.setItem(STORE, value);
    } catch (err) {
      return; // no storage: this tab can read but not act, and the page says so
    }
    if (next.charAt(0) === "/" && next.charAt(1) !== "/") {
      window.location.replace(next);
    }
  }

  // A logged-in page in a tab without a key says it cannot act here.
  function mark() {
    if (document.body.getAttribute("data-authenticated") !== "1" || key()) {
      return;
    }
    var mode = document.getElementById("mode");
    if (mode) {
      mode.textContent = "logged in; this tab cannot act";
      mode.className = "badge muted";
    }
    var note = document.getElementById("tab-note");
    if (note) {
      note.hidden = false;
    }
  }

  // Show the server's answer in place of this page (scripts in it are not run: this one
  // already is, and keeps listening on the document).
  function show(html) {
    var answer = new DOMParser().parseFromString(html, "text/html");
    document.title = answer.title;
    document.body.replaceWith(document.adoptNode(answer.body));
    mark();
  }

  function send(form) {
    var button = form.querySelector("button[type=submit]");
    if (button) {
      button.disabled = true;
    }
    var headers = { "X-Integrator-Action": key() };
    window
      .fetch(form.action, {
        method: "POST",
        body: new URLSearchParams(new FormData(form)),
        headers: headers,
        credentials: "same-origin",
        cache: "no-store",
        redirect: "follow",
      })
      .then(function (response) {
        return response.text();
      })
      .then(show)
      .catch(function (err) {
        if (button) {
          button.disabled = false;
        }
        show("<title>not sent</title><p class=refusal id=message>not sent: " +
             String(err).replace(/[<&]/g, "") + "</p>");
      });
  }

  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!(form instanceof HTMLFormElement)) {
      return;
    }
    if (form.hasAttribute("data-logout")) {
      forget();
      return;
    }
    // Without a key the form goes as it is, and the server says what is missing.
    if (!form.hasAttribute("data-action") || !key()) {
      return;
    }
    event.preventDefault();
    send(form);
  });

  adopt();
  mark();
})();
