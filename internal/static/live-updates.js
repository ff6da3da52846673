// Applying the live stream's updates to the page: each part that shows
// something that changed fetches its fragment again, jobs tables row by
// row (and keep their bulk selection's count), the log tail its new
// entries. flint:long the jobs table's live rules (rows in, rows out, refill, selection) read best in one place
//
// The dashboard's scripts load deferred, in this order, and share the
// window.flint object: live-updates.js (this file; flint.apply,
// flint.settle, flint.updateBulk), live.js (the stream, which calls
// flint.apply; flint.campaign), dashboard.js (the rest, and start). Each
// uses only what the files before it define, so no event can reach a
// function that is not there yet. No inline scripts anywhere: the
// Content-Security-Policy allows only scripts from /static.
(function () {
  "use strict";

  var flint = (window.flint = window.flint || {});

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

  // A save's answer wins over a live refresh. A form or button whose
  // answer replaces a live part (or something in it) may be answered after
  // a live refresh asked for before it: that refresh, swapped first, would
  // leave the save's answer (a 422 saying what to fix, or the new state)
  // to land on a part no longer on the page, or would put older news over
  // it. So while a save is in flight the part's refreshes wait, a refresh
  // asked for before a save is not swapped, and one more follows the save.
  // Only the live refreshes (swapLive's, marked by liveHeader) are held
  // back: what a person asked for (a page, a log) is never dropped.
  var liveHeader = "X-Flint-Live";
  var liveHeaders = {};
  liveHeaders[liveHeader] = "1";
  var saving = {}; // live part id -> saves in flight
  var saves = {}; // live part id -> saves begun, ever
  var deferred = {}; // live part id -> a refresh waits for the saves
  function livePart(t) {
    return t && t.closest ? t.closest("[data-live-url][id]") : null;
  }
  document.addEventListener("htmx:beforeRequest", function (e) {
    var d = e.detail || {};
    var cfg = d.requestConfig;
    var part = livePart(d.target);
    if (!part || !d.xhr) return;
    var id = part.id;
    if (!cfg || !cfg.verb || cfg.verb === "get") {
      if (cfg && cfg.headers && cfg.headers[liveHeader]) d.xhr.flintSaves = saves[id] || 0;
      return;
    }
    saves[id] = (saves[id] || 0) + 1;
    saving[id] = (saving[id] || 0) + 1;
    d.xhr.addEventListener("loadend", function () {
      if (--saving[id] > 0) return;
      delete saving[id];
      if (deferred[id]) {
        delete deferred[id];
        swapLive(id, true);
      }
    });
  });
  document.addEventListener("htmx:beforeSwap", function (e) {
    var d = e.detail || {};
    var part = livePart(d.target);
    if (!part || !d.xhr || d.xhr.flintSaves === undefined) return;
    if (saving[part.id] || d.xhr.flintSaves !== (saves[part.id] || 0)) {
      d.shouldSwap = false;
      if (saving[part.id]) deferred[part.id] = true;
      else swapLive(part.id, true);
    }
  });

  function swapLive(id, last) {
    refresh(id, function () {
      var el = document.getElementById(id);
      if (!el) return;
      if (saving[id]) {
        deferred[id] = true;
        return;
      }
      // A form being edited, or answered with what to fix (a 422 puts
      // aria-invalid on its fields), stays until the person is done: the
      // part is swapped around it where it is kept apart (keptUnits),
      // else not at all.
      if (el.hasAttribute("data-live-form") && !el.hasAttribute("data-live-fresh") && editedForms(el).some(function (f) { return !unitOf(f, el); })) {
        if (!el.querySelector("[data-stale]")) el.insertBefore(staleNotice(), el.firstChild);
        return;
      }
      var done = htmx.ajax("GET", el.getAttribute("data-live-url"), {
        source: el,
        target: el,
        swap: el.getAttribute("data-live-swap") || "outerHTML",
        headers: liveHeaders,
      });
      if (!last && el.hasAttribute("data-live-cached")) settle(id);
      return done;
    });
  }

  // settle fetches a part once more when the server's short cache behind
  // it (data-live-cached) has expired, so the last update of a burst is
  // never left answered from a cache filled just before it.
  var settling = {};
  function settle(id) {
    clearTimeout(settling[id]);
    settling[id] = setTimeout(function () {
      delete settling[id];
      swapLive(id, true);
    }, 1200);
  }

  // A form being edited is not replaced under the user's hands.
  function editedForms(el) {
    return Array.prototype.filter.call(el.querySelectorAll("form"), function (f) {
      return f.hasAttribute("data-dirty") || !!f.querySelector('[aria-invalid="true"]');
    });
  }
  // unitOf is the part of el that keeps form f through a live swap: the
  // nearest element with an id that says what f's values were when saved
  // (data-saved), or null.
  function unitOf(f, el) {
    var u = f.closest("[data-saved][id]");
    return u && el.contains(u) ? u : null;
  }
  // keptUnits are the parts of el a live swap leaves as they are: those
  // holding a form being edited, and open editors (details) the operator
  // is reading.
  function keptUnits(el) {
    var units = editedForms(el).map(function (f) {
      return unitOf(f, el);
    });
    el.querySelectorAll("details[open][data-saved][id]").forEach(function (d) {
      units.push(d);
    });
    return units.filter(function (u, i) {
      return u && units.indexOf(u) === i;
    });
  }

  // A live answer for a part with kept units is swapped in around them
  // (hx-preserve on their fresh copies); a kept form says "Changed
  // elsewhere" only when what it was opened on was saved anew since (not
  // when only the counts beside it changed, nor for an answer older than
  // the form).
  document.addEventListener("htmx:beforeSwap", function (e) {
    var d = e.detail || {};
    var t = d.target;
    var cfg = d.requestConfig;
    if (!d.shouldSwap || !t || !t.hasAttribute || !t.hasAttribute("data-live-form") || t.hasAttribute("data-live-fresh")) return;
    // An answer for a part already replaced (a save answered meanwhile)
    // keeps nothing: its editors' namesakes on the page are not its own.
    if ((cfg && cfg.verb && cfg.verb !== "get") || !document.body.contains(t)) return;
    var units = keptUnits(t);
    if (!units.length) return;
    var tpl = document.createElement("template");
    tpl.innerHTML = d.serverResponse;
    var root = tpl.content.firstElementChild;
    if (!root || root.id !== t.id) return;
    units.forEach(function (u) {
      var fresh = tpl.content.getElementById(u.id);
      if (!fresh) return;
      fresh.setAttribute("hx-preserve", "");
      var said = u.querySelector("[data-stale]");
      if (fresh.getAttribute("data-saved") === u.getAttribute("data-saved")) {
        if (said) said.remove(); // changed back
      } else if (!said && Number(fresh.getAttribute("data-saved-at")) >= Number(u.getAttribute("data-saved-at"))) {
        var form = u.querySelector("form");
        u.insertBefore(staleNotice(), form && form.parentNode === u ? form : null);
      }
    });
    d.serverResponse = tpl.innerHTML;
  });

  function staleNotice() {
    var box = document.createElement("div");
    box.className = "notice notice-info";
    box.setAttribute("role", "status");
    box.setAttribute("data-stale", "");
    box.appendChild(document.createTextNode("Changed elsewhere since you opened this form. "));
    var btn = document.createElement("button");
    btn.type = "button";
    btn.className = "btn btn-sm";
    btn.textContent = "Load the current values";
    box.appendChild(btn);
    return box;
  }
  // "Load the current values" drops what was typed and swaps the part
  // whole, its editors open as they were.
  document.addEventListener("click", function (e) {
    var btn = e.target && e.target.closest && e.target.closest("[data-stale] button");
    var el = btn && btn.closest("[data-live-form][id]");
    if (!el) return;
    el.querySelectorAll("form").forEach(function (f) {
      f.removeAttribute("data-dirty");
      f.reset();
    });
    el.querySelectorAll('form [aria-invalid="true"]').forEach(function (f) {
      f.removeAttribute("aria-invalid");
    });
    el.querySelectorAll("[data-stale]").forEach(function (n) {
      n.remove();
    });
    el.setAttribute("data-live-fresh", "");
    swapLive(el.id, true);
  });
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

  // liveList keeps a jobs table true to its filter: rows it shows are
  // fetched again when their jobs change (and leave when they no longer
  // match), and on a first page the jobs that come to match are fetched
  // and put in their place. Where the update does not say which jobs
  // (an overflow) or the filter cannot be checked here (a search), a
  // banner offers to load the page again.
  function liveList(table, u, all, changed) {
    var onPage = {};
    table.querySelectorAll("tr[data-job-id]").forEach(function (row) {
      var id = row.getAttribute("data-job-id");
      onPage[id] = true;
      if (all || u.overflow || changed[id]) pendingRows[id] = true;
    });
    if (table.hasAttribute("data-first-page") && !all) {
      var kind = table.getAttribute("data-live-list");
      // Jobs come onto a list filtered by state (the DLQ, ?status=), where
      // they would otherwise be missing from it; on the other lists new
      // jobs wait behind the banner, so the page does not move under the
      // operator during a burst.
      var byState = kind === "dlq" || !!table.getAttribute("data-filter-status");
      var checkable = byState && !table.getAttribute("data-filter-q") && !table.getAttribute("data-filter-series");
      if (checkable && (u.overflow || u.kinds_more)) {
        // A burst larger than one update lists: which jobs came to match
        // is not known here, so the page is read again (keeping the
        // selection), rather than left empty behind a banner.
        if (newArrived(table, u, onPage)) refill();
      } else if (checkable) {
        (u.jobs || []).forEach(function (j) {
          if (!onPage[j.id] && belongs(table, j)) pendingRows[j.id] = true;
        });
      } else if (newArrived(table, u, onPage)) {
        table.querySelectorAll("[data-new-banner]").forEach(function (el) {
          el.classList.add("show");
        });
      }
    }
    if (Object.keys(pendingRows).length) refresh("jobs-table-rows", fetchRows);
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
      .then(function (html) {
        swapRows(table, html);
      });
  }

  // matches says whether a fetched row still belongs on the table (a
  // job's type and queue never change; its status does).
  function matches(table, row) {
    var st = row.getAttribute("data-status");
    var kind = table.getAttribute("data-live-list");
    if (kind === "dlq") return st === "dead_letter";
    if (kind === "bin") return true;
    var want = table.getAttribute("data-filter-status");
    return !want || want === st;
  }

  // swapRows puts fetched rows in place of the rows with their ids, each
  // keeping its selection (and focus); a row that no longer matches the
  // filter leaves, and one that newly does is put in its place by id
  // (newest first) on the first page. Nothing else of the table moves.
  function swapRows(table, html) {
    if (!document.body.contains(table)) return;
    var tpl = document.createElement("template");
    tpl.innerHTML = html;
    var form = table.querySelector("form[data-bulk]");
    Array.prototype.slice.call(tpl.content.querySelectorAll("tr[id]")).forEach(function (row) {
      var old = document.getElementById(row.id);
      if (old && old.tagName === "TR") {
        if (!matches(table, row)) {
          leave(old);
          return;
        }
        if (rowKey(old) === rowKey(row)) return; // unchanged: leave it be
        var oldBox = old.querySelector("input[name=ids]");
        var box = row.querySelector("input[name=ids]");
        var focused = oldBox && document.activeElement === oldBox;
        if (oldBox && box) box.checked = oldBox.checked;
        old.replaceWith(row);
        htmx.process(row);
        if (focused && box) box.focus();
        return;
      }
      if (!old && table.hasAttribute("data-first-page") && matches(table, row)) enter(table, row);
    });
    if (form) updateBulk(form);
  }

  // leave takes a row off the table after a moment, so the eye sees it go.
  // A selected row that leaves is said so; a status-filtered first page
  // left short of its size is read again, to fill with the jobs that
  // match now (or say that none do).
  function leave(row) {
    if (row.classList.contains("leaving")) return;
    var table = row.closest("[data-live-list]");
    var box = row.querySelector("input[name=ids]");
    if (box && box.checked) {
      box.checked = false;
      noteLeft(table, 1);
    }
    row.classList.add("leaving");
    row.removeAttribute("data-job-id");
    setTimeout(function () {
      var form = row.closest("form");
      row.remove();
      if (form) updateBulk(form);
      if (table && document.body.contains(table) && fillable(table) &&
          table.querySelectorAll("tr[data-job-id]").length < (parseInt(table.getAttribute("data-page-size"), 10) || 50)) {
        refill();
      }
    }, 700);
  }

  // fillable says whether a table is a first page whose filter the live
  // updates can check: the dead-letter queue, or a list filtered by state.
  function fillable(table) {
    return table.hasAttribute("data-first-page") && !table.getAttribute("data-filter-q") && !table.getAttribute("data-filter-series") &&
      (table.getAttribute("data-live-list") === "dlq" || !!table.getAttribute("data-filter-status"));
  }

  // refill reads the current table's first page again, as "Show them"
  // does (the selection is kept where its jobs are still on the page:
  // dashboard.js).
  function refill() {
    refresh("jobs-table-refill", function () {
      var table = document.getElementById("jobs-table");
      var link = table && table.querySelector("[data-new-banner] a");
      if (!link || !fillable(table)) return;
      return htmx.ajax("GET", link.getAttribute("hx-get"), { source: link, target: "#jobs-table", swap: "outerHTML" });
    });
  }

  // noteLeft says in the bulk bar that n selected jobs left the page: they
  // are no longer selected, and no action will touch them.
  function noteLeft(table, n) {
    var bar = table && table.querySelector(".bulkbar");
    if (!bar || !n) return;
    var note = bar.querySelector("[data-left-notice]");
    if (!note) {
      note = document.createElement("span");
      note.className = "left-notice small";
      note.setAttribute("role", "status");
      note.setAttribute("data-left-notice", "");
      note.setAttribute("data-testid", "left-notice");
      note.setAttribute("data-n", "0");
      bar.appendChild(note);
    }
    var total = (parseInt(note.getAttribute("data-n"), 10) || 0) + n;
    note.setAttribute("data-n", String(total));
    note.textContent = total === 1
      ? "1 selected job left this page (it no longer matches the filter, or moved to a later page) and is no longer selected."
      : total + " selected jobs left this page (they no longer match the filter, or moved to a later page) and are no longer selected.";
  }

  // enter puts a row where its id sorts on a first page, keeping the page
  // to its size; an empty table is loaded again instead.
  function enter(table, row) {
    var body = table.querySelector("tbody");
    if (!body) {
      var link = table.querySelector("[data-new-banner] a");
      if (link) htmx.ajax("GET", link.getAttribute("hx-get"), { source: link, target: "#jobs-table", swap: "outerHTML" });
      return;
    }
    var size = parseInt(table.getAttribute("data-page-size"), 10) || 50;
    var rows = Array.prototype.slice.call(body.querySelectorAll("tr[data-job-id]"));
    var id = row.getAttribute("data-job-id");
    var before = null;
    // A list by failure time, latest first, takes a job where its failure
    // sorts (a job that just failed at the top; one whose news came late,
    // in a burst, below those that failed after it, or on a later page);
    // the others sort by id (creation), newest first. A job without the
    // time sorts as the latest.
    var top = table.getAttribute("data-order") === "top";
    var at = finishedAt(row);
    for (var i = 0; i < rows.length; i++) {
      if (top ? finishedAt(rows[i]) < at : rows[i].getAttribute("data-job-id") < id) {
        before = rows[i];
        break;
      }
    }
    if (!before && rows.length >= size) return; // it sorts onto a later page
    row.classList.add("entering");
    body.insertBefore(row, before);
    htmx.process(row);
    setTimeout(function () {
      row.classList.remove("entering");
    }, 1200);
    rows = body.querySelectorAll("tr[data-job-id]");
    for (var k = rows.length - 1, extra = rows.length - size; k >= 0 && extra > 0; k--) {
      var box = rows[k].querySelector("input[name=ids]");
      if (box && box.checked) continue; // a selected row stays until acted on
      rows[k].remove();
      extra--;
    }
  }

  function finishedAt(row) {
    var ms = parseInt(row.getAttribute("data-finished"), 10);
    return isNaN(ms) ? Infinity : ms;
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

  // --- bulk selection

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

  flint.apply = apply;
  flint.settle = settle;
  flint.updateBulk = updateBulk;
  flint.noteLeft = noteLeft;
})();
