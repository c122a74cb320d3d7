// Cairn console: live updates, nothing else. A run page that is not
// finished listens to its event stream and, on each stored event, fetches
// itself again and swaps its #live part (so what it shows is always what is
// stored); `output_delta` events (an llm step's text as it streams, never
// stored) fill the step's live box instead. The first page of runs
// refreshes the same way every few seconds.
(function () {
  "use strict";
  var box = document.getElementById("live");
  if (!box) return;

  // Streamed pieces by "idx/attempt": [{after_seq, text}], in arrival order.
  var pieces = {};

  // Each live box shows its step's pieces sent at or after the newest
  // journal item the page shows (data-seq): older ones are in the
  // conversation already, so nothing appears twice.
  function showLive() {
    box.querySelectorAll("pre.live-text").forEach(function (pre) {
      var list = pieces[pre.dataset.idx + "/" + pre.dataset.attempt] || [];
      var seq = Number(pre.dataset.seq);
      pre.textContent = list
        .filter(function (p) { return p.after_seq >= seq; })
        .map(function (p) { return p.text; })
        .join("");
    });
  }

  function refresh(then) {
    fetch(location.href, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (text) {
        if (!text) return;
        var next = new DOMParser().parseFromString(text, "text/html").getElementById("live");
        if (!next) return;
        var open = [];
        box.querySelectorAll("details[open]").forEach(function (d) { if (d.id) open.push(d.id); });
        box.innerHTML = next.innerHTML;
        open.forEach(function (id) {
          var d = document.getElementById(id);
          if (d) d.open = true;
        });
        showLive();
        if (then) then(next);
      })
      .catch(function () {});
  }

  if (box.dataset.live) {
    var source = new EventSource(box.dataset.live);
    var pending = null;
    source.onmessage = function (message) {
      var data = null;
      try { data = JSON.parse(message.data); } catch (e) { data = null; }
      if (data && data.kind === "output_delta") {
        var key = data.idx + "/" + data.attempt;
        (pieces[key] = pieces[key] || []).push({ after_seq: data.after_seq, text: data.text });
        showLive();
        return;
      }
      if (pending) return;
      pending = setTimeout(function () {
        pending = null;
        refresh(function (next) {
          if (!next.dataset.live) source.close();
        });
      }, 150);
    };
  } else if (box.dataset.poll) {
    setInterval(refresh, Number(box.dataset.poll));
  }
})();
