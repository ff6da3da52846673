// Flint dashboard behaviour that HTML attributes cannot express. No inline
// scripts anywhere: the Content-Security-Policy allows only this file and
// the vendored htmx.
(function () {
  "use strict";

  // Live-connection indicator: the SSE extension reports open and error.
  function setLive(state, text) {
    document.querySelectorAll("[data-live]").forEach(function (el) {
      el.setAttribute("data-state", state);
      var label = el.querySelector(".live-text");
      if (label) label.textContent = text;
    });
  }
  document.addEventListener("htmx:sseOpen", function () { setLive("open", "Live"); });
  document.addEventListener("htmx:sseError", function () { setLive("closed", "Reconnecting…"); });
  document.addEventListener("htmx:sseClose", function () { setLive("closed", "Disconnected"); });

  // "Select all" checkboxes and the bulk bar's count.
  function updateBulk(form) {
    var n = form.querySelectorAll("input[name=ids]:checked").length;
    form.querySelectorAll("[data-selected-count]").forEach(function (el) { el.textContent = n; });
    form.querySelectorAll("[data-needs-selection]").forEach(function (el) { el.disabled = n === 0; });
  }
  document.addEventListener("change", function (e) {
    var t = e.target;
    if (!(t instanceof HTMLInputElement)) return;
    var form = t.form;
    if (!form) return;
    if (t.hasAttribute("data-select-all")) {
      form.querySelectorAll("input[name=ids]").forEach(function (box) { box.checked = t.checked; });
    }
    if (t.name === "ids" || t.hasAttribute("data-select-all")) updateBulk(form);
  });
  document.addEventListener("htmx:afterSettle", function () {
    document.querySelectorAll("form[data-bulk]").forEach(updateBulk);
  });
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("form[data-bulk]").forEach(updateBulk);
  });

  // A "new jobs" banner appears when the live stream reports jobs that are
  // not on the page; the user loads them when ready, keeping scroll and
  // selection until then.
  document.addEventListener("htmx:sseMessage", function (e) {
    if (!e.detail || e.detail.type !== "jobs-new") return;
    document.querySelectorAll("[data-new-banner]").forEach(function (el) { el.classList.add("show"); });
  });

  // Toasts from HX-Trigger: {"flint:toast": {"message": "...", "kind": "ok"}}.
  document.addEventListener("flint:toast", function (e) {
    var box = document.getElementById("toasts");
    if (!box || !e.detail) return;
    var div = document.createElement("div");
    div.className = "toast" + (e.detail.kind === "bad" ? " toast-bad" : "");
    div.setAttribute("role", "status");
    div.textContent = e.detail.message;
    box.appendChild(div);
    setTimeout(function () { div.remove(); }, 5200);
  });
})();
