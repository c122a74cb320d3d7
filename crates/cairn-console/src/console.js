// Cairn console: live updates, nothing else. A run page that is not
// finished listens to its event stream and, on each event, fetches itself
// again and swaps its #live part (so what it shows is always what is
// stored); the first page of runs refreshes the same way every few seconds.
(function () {
  "use strict";
  var box = document.getElementById("live");
  if (!box) return;

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
        if (then) then(next);
      })
      .catch(function () {});
  }

  if (box.dataset.live) {
    var source = new EventSource(box.dataset.live);
    var pending = null;
    source.onmessage = function () {
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
