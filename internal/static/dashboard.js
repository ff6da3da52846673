// Dashboard behaviour that HTML attributes cannot express, on every page:
// toasts, the database banner, graphs, relative times, and what a swap
// must keep; start() sets the page up and joins the live stream. It loads
// last of the dashboard's scripts (see live-updates.js).
(function () {
  "use strict";

  var flint = (window.flint = window.flint || {});

  // Toasts from HX-Trigger: {"flint:toast": {"message": "...", "kind": "ok"}}.
  document.addEventListener("flint:toast", function (e) {
    var box = document.getElementById("toasts");
    if (!box || !e.detail) return;
    var div = document.createElement("div");
    div.className = "toast" + (e.detail.kind === "bad" ? " toast-bad" : "");
    div.setAttribute("role", "status");
    div.textContent = e.detail.message;
    box.appendChild(div);
    setTimeout(function () {
      div.remove();
    }, 5200);
  });

  // A banner while the database is unreachable or its disk is full: any
  // request answered 503 with X-Flint-Database: unavailable, or any answer
  // with X-Flint-Database: disk-full, shows it naming the cause; the next
  // answer that is not a server error and says neither takes it away.
  document.addEventListener("htmx:afterRequest", function (e) {
    var xhr = e.detail && e.detail.xhr;
    if (!xhr || !xhr.status) return;
    var said = xhr.getResponseHeader("X-Flint-Database");
    var cause = said === "disk-full" ? "disk-full" : xhr.status === 503 && said === "unavailable" ? "unavailable" : "";
    var banner = document.getElementById("db-banner");
    if (banner && cause && banner.getAttribute("data-cause") !== cause) {
      banner.remove();
      banner = null;
    }
    if (cause && !banner) {
      var main = document.getElementById("main");
      if (!main) return;
      banner = document.createElement("div");
      banner.id = "db-banner";
      banner.className = "notice notice-bad db-banner";
      banner.setAttribute("role", "alert");
      banner.setAttribute("data-testid", "db-banner");
      banner.setAttribute("data-cause", cause);
      banner.textContent = cause === "disk-full"
        ? "The database server's disk is full. PostgreSQL refuses writes until space is freed; jobs already accepted are safe, and Flint resumes by itself once there is space."
        : "The database is unreachable. Flint is reconnecting; what you see may be out of date. Jobs already accepted are safe.";
      main.prepend(banner);
    } else if (!cause && banner && xhr.status < 500) {
      banner.remove();
    }
  });

  // centre scrolls box (where it overflows) to put its child sel in the
  // middle.
  function centre(box, sel) {
    var el = box && box.querySelector(sel);
    if (!el) return;
    var br = box.getBoundingClientRect();
    var er = el.getBoundingClientRect();
    if (box.scrollWidth > box.clientWidth) box.scrollLeft += er.left - br.left - (br.width - er.width) / 2;
    if (box.scrollHeight > box.clientHeight) box.scrollTop += er.top - br.top - (br.height - er.height) / 2;
  }

  // A dependency graph larger than its box starts at the job itself, and
  // keeps where the operator scrolled it when the live part is swapped.
  var graphScroll = null;
  function placeGraphs() {
    document.querySelectorAll(".graph:not([data-placed])").forEach(function (g) {
      g.setAttribute("data-placed", "");
      if (graphScroll) {
        g.scrollLeft = graphScroll[0];
        g.scrollTop = graphScroll[1];
      } else {
        centre(g, ".node.self");
      }
    });
    graphScroll = null;
  }
  document.addEventListener("htmx:beforeSwap", function (e) {
    var t = e.detail && e.detail.target;
    var g = t && t.querySelector && t.querySelector(".graph[data-placed]");
    graphScroll = g ? [g.scrollLeft, g.scrollTop] : null;
  });
  document.addEventListener("htmx:afterSettle", placeGraphs);

  // ---------------------------------------------------------------- times

  // Relative times tick in the browser: each <time data-ago> ("10s ago")
  // and <time data-for> (how long something has run) is worked out again
  // from its datetime, against the server's clock as the page last gave
  // it (data-now).
  var skew = 0; // server time minus browser time, in ms
  // Each data-now is read once, when it arrives: a part that stays on the
  // page (a jobs table whose rows are swapped one by one) keeps the time
  // it was rendered at, which read again later would set the clock back
  // by the page's age ("7s ago" for ever, starts "in 12s").
  var read = typeof WeakSet === "function" ? new WeakSet() : null;
  function noteServerNow(root) {
    var els = root.querySelectorAll ? Array.prototype.slice.call(root.querySelectorAll("[data-now]")) : [];
    if (root.hasAttribute && root.hasAttribute("data-now")) els.unshift(root);
    els.forEach(function (el) {
      if (read && read.has(el)) return;
      if (read) read.add(el);
      skew = Date.parse(el.getAttribute("data-now")) - Date.now();
    });
  }
  function short(ms) {
    var s = Math.floor(ms / 1000);
    if (s < 60) return s + "s";
    if (s < 3600) return Math.floor(s / 60) + "m";
    if (s < 48 * 3600) return Math.floor(s / 3600) + "h " + (Math.floor(s / 60) % 60) + "m";
    return Math.floor(s / 86400) + "d";
  }
  function ago(t, now) {
    var d = now - t;
    if (d < 0) return "in " + short(-d);
    if (d < 1000) return "just now";
    return short(d) + " ago";
  }
  function tick() {
    var now = Date.now() + skew;
    document.querySelectorAll("time[data-ago], time[data-for]").forEach(function (el) {
      var t = Date.parse(el.getAttribute("datetime"));
      if (isNaN(t)) return;
      var text = el.hasAttribute("data-for") ? short(Math.max(0, now - t)) : ago(t, now);
      if (el.textContent !== text) el.textContent = text;
    });
  }
  setInterval(tick, 1000);

  // A part swapped in live keeps its disclosures (an open "Edit limits")
  // open: one the operator opened does not close under them.
  var openDetails = [];
  document.addEventListener("htmx:beforeSwap", function (e) {
    var t = e.detail && e.detail.target;
    openDetails = t && t.querySelectorAll
      ? Array.prototype.map.call(t.querySelectorAll("details[open][id]"), function (d) {
          return d.id;
        })
      : [];
  });
  document.addEventListener("htmx:afterSwap", function () {
    openDetails.forEach(function (id) {
      var d = document.getElementById(id);
      if (d && d.tagName === "DETAILS") d.open = true;
    });
    openDetails = [];
  });

  // A part swapped in live keeps what the operator was typing into its
  // forms (a signal's body, a new limit): fields by id whose value they
  // changed come back with it, and the focus too. A form's own submission
  // (not a GET) is answered as the server says.
  var typed = [];
  document.addEventListener("htmx:beforeSwap", function (e) {
    var t = e.detail && e.detail.target;
    var cfg = e.detail && e.detail.requestConfig;
    typed = [];
    if (!t || !t.querySelectorAll || (cfg && cfg.verb && cfg.verb !== "get")) return;
    t.querySelectorAll("textarea[id], input[id]:not([type=hidden]):not([type=checkbox]):not([type=radio])").forEach(function (f) {
      if (f.value !== f.defaultValue) {
        typed.push({ id: f.id, value: f.value, focused: document.activeElement === f });
      }
    });
  });
  document.addEventListener("htmx:afterSwap", function () {
    typed.forEach(function (k) {
      var f = document.getElementById(k.id);
      if (!f || (f.tagName !== "TEXTAREA" && f.tagName !== "INPUT")) return;
      f.value = k.value;
      if (k.focused) f.focus();
    });
    typed = [];
  });

  // A jobs table loaded again ("Show them", a filter, a refill) keeps the
  // rows the operator had selected, where they are still on it, and says
  // how many are not.
  var keptSelection = null;
  var keptLeft = 0; // selected jobs that had already left the page
  document.addEventListener("htmx:beforeSwap", function (e) {
    var t = e.detail && e.detail.target;
    var cfg = e.detail && e.detail.requestConfig;
    keptSelection = null;
    // A bulk action's answer (a POST) shows what the action left: its
    // jobs were acted on, not lost.
    keptLeft = 0;
    if (t && t.id === "jobs-table" && !(cfg && cfg.verb && cfg.verb !== "get")) {
      keptSelection = Array.prototype.map.call(t.querySelectorAll("input[name=ids]:checked"), function (b) {
        return b.value;
      });
      var note = t.querySelector("[data-left-notice]");
      keptLeft = note ? parseInt(note.getAttribute("data-n"), 10) || 0 : 0;
    }
  });
  document.addEventListener("htmx:afterSwap", function () {
    noteServerNow(document);
    if (!keptSelection || (!keptSelection.length && !keptLeft)) return;
    var table = document.getElementById("jobs-table");
    if (table) {
      var gone = 0;
      keptSelection.forEach(function (id) {
        var box = table.querySelector('input[name=ids][value="' + id + '"]');
        if (box) box.checked = true;
        else gone++;
      });
      flint.noteLeft(table, keptLeft + gone);
      var form = table.querySelector("form[data-bulk]");
      if (form) flint.updateBulk(form);
    }
    keptSelection = null;
  });

  function start() {
    noteServerNow(document);
    document.querySelectorAll("[data-live-cached][id]").forEach(function (el) {
      flint.settle(el.id);
    });
    document.querySelectorAll("form[data-bulk]").forEach(flint.updateBulk);
    // On a narrow screen the nav scrolls sideways: show the current page.
    centre(document.querySelector(".nav"), '[aria-current="page"]');
    placeGraphs();
    flint.campaign();
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
