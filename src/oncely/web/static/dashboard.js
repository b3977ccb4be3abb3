// oncely dashboard: refresh the page's <main> in place while the tab is visible.
// On PostgreSQL the server pushes a "change" event (server-sent events on LISTEN/NOTIFY);
// on SQLite, and as a fallback, the page asks again every few seconds.
(function () {
  "use strict";
  var POLL_MS = 5000;
  var PUSHED_FALLBACK_MS = 30000;
  var live = document.querySelector('meta[name="oncely-live"]').content;
  var base = document.querySelector('meta[name="oncely-base"]').content;
  var timer = null;
  var source = null;
  var pending = false;

  function busy() {
    var active = document.activeElement;
    var main = document.getElementById("live");
    // Someone typing a reason or a range: replacing the form would throw their input away.
    return active && main.contains(active) && /^(INPUT|SELECT|TEXTAREA|BUTTON)$/.test(active.tagName);
  }

  function refresh() {
    if (document.hidden || pending || busy()) return;
    pending = true;
    fetch(window.location.href, { headers: { "X-Oncely-Partial": "1" }, credentials: "same-origin" })
      .then(function (response) { return response.ok ? response.text() : null; })
      .then(function (html) {
        if (html !== null && !busy()) {
          document.getElementById("live").innerHTML = html;
          document.body.dataset.refreshed = String(Date.now());
        }
      })
      .catch(function () {})
      .then(function () { pending = false; });
  }

  function start() {
    stop();
    if (live === "sse" && window.EventSource) {
      source = new EventSource(base + "/events");
      source.addEventListener("change", refresh);
      timer = setInterval(refresh, PUSHED_FALLBACK_MS);
    } else {
      timer = setInterval(refresh, POLL_MS);
    }
  }

  function stop() {
    if (timer !== null) { clearInterval(timer); timer = null; }
    if (source !== null) { source.close(); source = null; }
  }

  document.addEventListener("visibilitychange", function () {
    if (document.hidden) { stop(); } else { refresh(); start(); }
  });

  document.addEventListener("submit", function (event) {
    var form = event.target;
    var question = form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) event.preventDefault();
  });

  if (!document.hidden) start();
})();
