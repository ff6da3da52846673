// The dashboard's live stream: one per browser, whichever tab holds it.
// It loads after live-updates.js, whose flint.apply it calls, and before
// dashboard.js, which calls flint.campaign (see live-updates.js).
(function () {
  "use strict";

  var flint = (window.flint = window.flint || {});

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
  //
  // This file elects the tab and runs the stream; live-updates.js applies
  // what it says to the page (flint.apply).

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
      flint.apply({ resync: true }); // what changed between rendering and joining
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
      if (hadError || synced) flint.apply({ resync: true });
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
      flint.apply(u);
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
        if (!(justSynced && m.u && m.u.resync)) flint.apply(m.u);
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

  // Tests and the curious can ask which tab streams.
  window.flintLive = {
    role: function () {
      return role;
    },
    state: function () {
      return state;
    },
  };

  flint.campaign = campaign;
})();
