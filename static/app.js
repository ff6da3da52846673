// Flint dashboard behaviour that HTML attributes cannot express. No inline
// scripts anywhere: the Content-Security-Policy allows only this file and
// the vendored htmx.
(function () {
  "use strict";

  // ---------------------------------------------------------------- live
  //
  // One live stream per browser, however many dashboard tabs are open: a
  // browser allows six connections to a host over HTTP/1.1, and a stream
  // per tab would use them up. The tab holding the "flint-live" lock (Web
  // Locks; a plain BroadcastChannel election where locks are missing, as
  // on plain-HTTP addresses other than localhost) opens GET /events and
  // posts what it receives to the other tabs. When it closes, the lock
  // passes to the next tab, which opens the stream and tells every tab to
  // refresh, since events in the hand-over are lost.
  //
  // The stream says what changed ("update" events: jobs, topics; see
  // handlers/live.go); each page fetches the fragments it shows:
  //   [data-live-list]   a jobs table: changed rows are fetched and swapped
  //                      one by one; a first page offers "new jobs"
  //   [data-live-job]    a job page's live part, when that job changes
  //   [data-live-topics] anything else, when one of its topics moves
  //                      ([data-live-logs] adds the log tail's new rows)

  var CHANNEL = "flint-live";
  var bc = typeof BroadcastChannel === "function" ? new BroadcastChannel(CHANNEL) : null;
  var me = Math.random().toString(36).slice(2) + Date.now().toString(36);
  var role = "follower"; // or "leader"
  var state = "connecting"; // connecting | open | reconnecting | closed
  var es = null; // the leader's EventSource
  var releaseLock = null;
  var lockAbort = null;
  var lastMessage = 0; // when the leader last heard from the stream
  var leaderSeen = 0; // when a follower last heard from a leader
  var reopenDelay = 1000;
  var reopenTimer = null;
  var synced = false; // this page refreshed its live parts once the stream was open

  function post(msg) {
    if (bc) {
      msg.from = me;
      bc.postMessage(msg);
    }
  }

  function showState(s) {
    state = s;
    var text = { connecting: "Connecting…", open: "Live", reconnecting: "Reconnecting…", closed: "Disconnected" }[s];
    document.querySelectorAll("[data-live]").forEach(function (el) {
      el.setAttribute("data-state", s === "open" ? "open" : s === "connecting" ? "connecting" : "closed");
      var label = el.querySelector(".live-text");
      if (label) label.textContent = text;
    });
    if (s === "open" && !synced) {
      synced = true;
      apply({ resync: true }); // what changed between rendering and joining
      return true;
    }
    return false;
  }

  function setState(s) {
    showState(s);
    if (role === "leader") post({ t: "state", s: s });
  }

  // --- leader: the stream

  function openStream() {
    clearTimeout(reopenTimer);
    if (es) es.close();
    var src = new EventSource("/events");
    es = src;
    var hadError = false;
    src.addEventListener("open", function () {
      lastMessage = Date.now();
      reopenDelay = 1000;
      // A new connection has missed what happened while there was none.
      post({ t: "update", u: { resync: true } });
      if (hadError || synced) apply({ resync: true });
      setState("open");
    });
    src.addEventListener("ping", function () {
      lastMessage = Date.now();
      post({ t: "ping" });
    });
    src.addEventListener("update", function (e) {
      lastMessage = Date.now();
      var u;
      try {
        u = JSON.parse(e.data);
      } catch (err) {
        return;
      }
      post({ t: "update", u: u });
      apply(u);
    });
    src.addEventListener("ended", function () {
      // The server ended the stream because this session is no longer
      // valid (signed out elsewhere, expired, the account disabled): every
      // tab reloads, which leads to the sign-in page.
      src.close();
      if (es === src) es = null;
      post({ t: "ended" });
      window.location.reload();
    });
    src.addEventListener("error", function () {
      hadError = true;
      if (src.readyState === EventSource.CLOSED) {
        // The browser gave up (an error status, or signed out): retry
        // with a growing delay.
        if (es === src) es = null;
        setState("closed");
        reopenTimer = setTimeout(function () {
          if (role === "leader") openStream();
        }, reopenDelay);
        reopenDelay = Math.min(reopenDelay * 2, 30000);
      } else {
        setState("reconnecting");
      }
    });
  }

  function lead() {
    role = "leader";
    post({ t: "leader" });
    openStream();
  }

  function resign() {
    role = "follower";
    clearTimeout(reopenTimer);
    if (es) {
      es.close();
      es = null;
    }
    if (releaseLock) {
      releaseLock();
      releaseLock = null;
    }
  }

  // The stream pings every 15 s; one silent for 45 s is dead even if the
  // connection looks open (a proxy or a network change can do that).
  setInterval(function () {
    if (role === "leader" && es && state === "open" && Date.now() - lastMessage > 45000) openStream();
    if (role === "follower" && !navigator.locks && bc && Date.now() - leaderSeen > 40000) claim();
  }, 10000);

  // --- election

  function campaign() {
    if (!bc) {
      lead(); // nothing to share with: this tab streams for itself
      return;
    }
    post({ t: "hello" });
    if (navigator.locks && typeof AbortController === "function") {
      lockAbort = new AbortController();
      navigator.locks
        .request(CHANNEL, { signal: lockAbort.signal }, function () {
          return new Promise(function (resolve) {
            releaseLock = resolve;
            lead();
          });
        })
        .catch(function () {}); // aborted when the page goes away
      return;
    }
    // No Web Locks: a tab that hears no leader claims the role; of two
    // claimants the smaller id wins.
    setTimeout(function () {
      if (Date.now() - leaderSeen > 1000) claim();
    }, 400 + Math.random() * 200);
  }

  var claiming = false;
  function claim() {
    if (role === "leader" || claiming) return;
    claiming = true;
    post({ t: "claim" });
    setTimeout(function () {
      claiming = false;
      if (Date.now() - leaderSeen > 500) lead();
    }, 300);
  }

  if (bc) {
    bc.onmessage = function (e) {
      var m = e.data || {};
      switch (m.t) {
        case "hello":
          if (role === "leader") post({ t: "state", s: state });
          return;
        case "claim":
          if (role === "leader") post({ t: "leader" });
          else if (claiming && m.from < me) leaderSeen = Date.now(); // yield to the smaller id
          return;
        case "bye":
          if (!navigator.locks) {
            leaderSeen = 0;
            setTimeout(claim, Math.random() * 200);
          }
          return;
      }
      // Everything else comes from a leader.
      leaderSeen = Date.now();
      if (role === "leader" && !navigator.locks && m.t === "leader" && m.from < me) {
        resign(); // two leaders after a race: the smaller id keeps it
        return;
      }
      if (role === "leader") return;
      if (m.t === "ended") {
        window.location.reload();
        return;
      }
      if (m.t === "state") showState(m.s);
      if (m.t === "update") {
        var justSynced = state !== "open" && showState("open");
        if (!(justSynced && m.u && m.u.resync)) apply(m.u);
      }
      if (m.t === "ping" && state !== "open") showState("open");
    };
  }

  // A page leaving (or entering the back/forward cache) gives up the stream
  // at once; a page coming back from that cache takes part again.
  window.addEventListener("pagehide", function () {
    var wasLeader = role === "leader";
    resign();
    if (lockAbort) lockAbort.abort();
    if (wasLeader) post({ t: "bye" });
  });
  window.addEventListener("pageshow", function (e) {
    if (e.persisted) {
      synced = false;
      showState("connecting");
      campaign();
    }
  });

  // --- applying updates

  var busy = {}; // element id -> true (a fetch in flight) or "again"

  // refresh fetches an element's fragment again; one fetch per element at
  // a time, and one more after it if asked meanwhile.
  function refresh(id, fetcher) {
    if (busy[id]) {
      busy[id] = "again";
      return;
    }
    busy[id] = true;
    Promise.resolve()
      .then(fetcher)
      .catch(function () {})
      .then(function () {
        var again = busy[id] === "again";
        delete busy[id];
        if (again) refresh(id, fetcher);
      });
  }

  function swapLive(id) {
    refresh(id, function () {
      var el = document.getElementById(id);
      if (!el) return;
      if (el.hasAttribute("data-live-form") && el.querySelector("form[data-dirty]")) {
        staleNotice(el);
        return;
      }
      return htmx.ajax("GET", el.getAttribute("data-live-url"), {
        source: el,
        target: el,
        swap: el.getAttribute("data-live-swap") || "outerHTML",
      });
    });
  }

  // A form being edited is not replaced under the user's hands.
  function staleNotice(el) {
    if (el.querySelector("[data-stale]")) return;
    var box = document.createElement("div");
    box.className = "notice notice-info";
    box.setAttribute("role", "status");
    box.setAttribute("data-stale", "");
    box.appendChild(document.createTextNode("Changed elsewhere since you opened this form. "));
    var btn = document.createElement("button");
    btn.type = "button";
    btn.className = "btn btn-sm";
    btn.textContent = "Load the current values";
    btn.addEventListener("click", function () {
      el.querySelectorAll("form[data-dirty]").forEach(function (f) {
        f.removeAttribute("data-dirty");
      });
      swapLive(el.id);
    });
    box.appendChild(btn);
    el.insertBefore(box, el.firstChild);
  }
  document.addEventListener("input", function (e) {
    var form = e.target && e.target.form;
    if (form && form.closest("[data-live-form]")) form.setAttribute("data-dirty", "");
  });

  function hxFetch(url) {
    return fetch(url, { headers: { "HX-Request": "true" }, credentials: "same-origin" }).then(function (r) {
      var to = r.headers.get("HX-Redirect");
      if (to) {
        window.location.href = to; // signed out
        throw new Error("redirected");
      }
      if (!r.ok) throw new Error("status " + r.status);
      return r;
    });
  }

  function apply(u) {
    if (!u) return;
    var all = !!u.resync;
    var topics = u.topics || [];
    var changed = {};
    (u.jobs || []).forEach(function (j) {
      changed[j.id] = true;
    });
    document.querySelectorAll("[data-live-topics]").forEach(function (el) {
      var mine = el.getAttribute("data-live-topics").split(/\s+/);
      if (!all && !mine.some(function (t) { return topics.indexOf(t) >= 0; })) return;
      if (el.hasAttribute("data-live-logs")) logTail(el);
      else if (el.id) swapLive(el.id);
    });
    document.querySelectorAll("[data-live-job]").forEach(function (el) {
      if (all || u.overflow || changed[el.getAttribute("data-live-job")]) swapLive(el.id);
    });
    document.querySelectorAll("[data-live-list]").forEach(function (table) {
      liveList(table, u, all, changed);
    });
  }

  // --- jobs tables

  var pendingRows = {}; // job ids to fetch for the current table

  function liveList(table, u, all, changed) {
    var onPage = {};
    table.querySelectorAll("tr[data-job-id]").forEach(function (row) {
      var id = row.getAttribute("data-job-id");
      onPage[id] = true;
      if (all || u.overflow || changed[id]) pendingRows[id] = true;
    });
    if (Object.keys(pendingRows).length) refresh("jobs-table-rows", fetchRows);
    if (table.hasAttribute("data-first-page") && !all && newArrived(table, u, onPage)) {
      table.querySelectorAll("[data-new-banner]").forEach(function (el) {
        el.classList.add("show");
      });
    }
  }

  function fetchRows() {
    var table = document.querySelector("[data-live-list]");
    var ids = Object.keys(pendingRows).slice(0, 100);
    ids.forEach(function (id) {
      delete pendingRows[id];
    });
    if (!table || !ids.length) return;
    if (Object.keys(pendingRows).length) busy["jobs-table-rows"] = "again";
    var url = "/jobs/rows?kind=" + encodeURIComponent(table.getAttribute("data-live-list")) + "&ids=" + ids.join(",");
    return hxFetch(url)
      .then(function (r) {
        return r.text();
      })
      .then(swapRows);
  }

  // swapRows puts fetched rows in place of the rows with their ids, each
  // keeping its selection (and focus); nothing else of the table moves.
  function swapRows(html) {
    var tpl = document.createElement("template");
    tpl.innerHTML = html;
    var forms = [];
    Array.prototype.slice.call(tpl.content.querySelectorAll("tr[id]")).forEach(function (row) {
      var old = document.getElementById(row.id);
      if (!old || old.tagName !== "TR" || rowKey(old) === rowKey(row)) return; // unchanged: leave it be
      var oldBox = old.querySelector("input[name=ids]");
      var box = row.querySelector("input[name=ids]");
      var focused = oldBox && document.activeElement === oldBox;
      if (oldBox && box) box.checked = oldBox.checked;
      old.replaceWith(row);
      htmx.process(row);
      if (focused && box) box.focus();
      if (row.closest("form") && forms.indexOf(row.closest("form")) < 0) forms.push(row.closest("form"));
    });
    forms.forEach(updateBulk);
  }

  // rowKey is what a row shows, less the relative times that change by
  // themselves.
  function rowKey(row) {
    var c = row.cloneNode(true);
    c.querySelectorAll("time").forEach(function (t) {
      t.textContent = "";
    });
    return c.innerHTML;
  }

  // A job belongs on a filtered first page that does not show it: the
  // banner offers to load them.
  function belongs(table, k) {
    var kind = table.getAttribute("data-live-list");
    var status = table.getAttribute("data-filter-status");
    var type = table.getAttribute("data-filter-type");
    var queue = table.getAttribute("data-filter-queue");
    if (kind === "bin") return false;
    if (kind === "dlq") {
      if (k.status !== "dead_letter") return false;
    } else if (status) {
      if (k.status !== status) return false;
    } else if (!k.new) {
      return false;
    }
    return (!type || type === k.type) && (!queue || queue === k.queue);
  }

  function newArrived(table, u, onPage) {
    if (u.kinds_more && table.getAttribute("data-live-list") !== "bin") return true;
    if (u.overflow) {
      return (u.kinds || []).some(function (k) {
        return belongs(table, k);
      });
    }
    return (u.jobs || []).some(function (j) {
      return !onPage[j.id] && belongs(table, j);
    });
  }

  // --- log tail

  // logTail adds the entries stored since the table's mark at its top,
  // skipping any the table already shows (the page and the tail may both
  // have one written as the page was read).
  function logTail(el) {
    refresh(el.id, function () {
      var cur = document.getElementById(el.id);
      if (!cur || !cur.hasAttribute("data-live-logs")) return;
      var url = cur.getAttribute("data-live-logs") + "&after=" + encodeURIComponent(cur.getAttribute("data-mark") || "0.0");
      var mark;
      return hxFetch(url)
        .then(function (r) {
          mark = r.headers.get("X-Log-Mark");
          return r.text();
        })
        .then(function (html) {
          if (!document.body.contains(cur)) return;
          if (mark) cur.setAttribute("data-mark", mark);
          var tpl = document.createElement("template");
          tpl.innerHTML = html;
          tpl.content.querySelectorAll("tr[id]").forEach(function (row) {
            if (document.getElementById(row.id)) row.remove();
          });
          if (!tpl.content.querySelector("tr")) return;
          var body = cur.querySelector("tbody");
          body.insertBefore(tpl.content, body.firstChild);
          htmx.process(body);
          var rows = body.querySelectorAll("tr");
          for (var i = 500; i < rows.length; i++) rows[i].remove();
          cur.querySelectorAll("[data-log-empty]").forEach(function (e) {
            e.remove();
          });
        });
    });
  }

  // Tests and the curious can ask which tab streams.
  window.flintLive = {
    role: function () {
      return role;
    },
    state: function () {
      return state;
    },
  };

  // ---------------------------------------------------------------- bulk

  // "Select all" checkboxes and the bulk bar's count.
  function updateBulk(form) {
    var n = form.querySelectorAll("input[name=ids]:checked").length;
    form.querySelectorAll("[data-selected-count]").forEach(function (el) {
      el.textContent = n;
    });
    form.querySelectorAll("[data-needs-selection]").forEach(function (el) {
      el.disabled = n === 0;
    });
  }
  document.addEventListener("change", function (e) {
    var t = e.target;
    if (!(t instanceof HTMLInputElement)) return;
    var form = t.form;
    if (!form) return;
    if (t.hasAttribute("data-select-all")) {
      form.querySelectorAll("input[name=ids]").forEach(function (box) {
        box.checked = t.checked;
      });
    }
    if (t.name === "ids" || t.hasAttribute("data-select-all")) updateBulk(form);
  });
  document.addEventListener("htmx:afterSettle", function () {
    document.querySelectorAll("form[data-bulk]").forEach(updateBulk);
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
    setTimeout(function () {
      div.remove();
    }, 5200);
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

  function start() {
    document.querySelectorAll("form[data-bulk]").forEach(updateBulk);
    // On a narrow screen the nav scrolls sideways: show the current page.
    centre(document.querySelector(".nav"), '[aria-current="page"]');
    placeGraphs();
    campaign();
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
