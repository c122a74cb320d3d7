// Cairn console: live updates, nothing else. A run page that is not
// finished listens to its event stream and, on each stored event, fetches
// itself again and swaps its #live part (so what it shows is always what is
// stored), keeping what a person typed in its forms; `output_delta`
// events (an llm step's text as it streams, never stored) fill the step's
// live box instead. The first page of runs
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

  // What a person typed or chose in the forms of #live (a wait's answer,
  // a signal to send), by form and field, and where the cursor was: a
  // refresh swaps the forms, and must not throw their input away.
  function typedFields() {
    var kept = [];
    box.querySelectorAll("form").forEach(function (f) {
      f.querySelectorAll("input, textarea, select").forEach(function (el) {
        if (!el.name || el.type === "hidden") return;
        var changed = (el.type === "checkbox" || el.type === "radio")
          ? el.checked !== el.defaultChecked
          : el.value !== el.defaultValue;
        if (changed) {
          kept.push({ form: f.getAttribute("action"), name: el.name, value: el.value,
                      checked: el.checked, radio: el.type === "radio" });
        }
      });
    });
    var a = document.activeElement;
    var focus = a && box.contains(a) && a.form ? { form: a.form.getAttribute("action"), name: a.name } : null;
    return { kept: kept, focus: focus };
  }

  function field(form, name, value, radio) {
    var sel = 'form[action="' + form + '"] [name="' + name + '"]';
    if (radio) sel += '[value="' + value + '"]';
    return box.querySelector(sel);
  }

  function restoreFields(typed) {
    typed.kept.forEach(function (k) {
      var el = field(k.form, k.name, k.value, k.radio);
      if (!el) return;
      if (el.type === "checkbox" || el.type === "radio") el.checked = k.checked;
      else el.value = k.value;
    });
    if (typed.focus) {
      var f = field(typed.focus.form, typed.focus.name);
      if (f) f.focus();
    }
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
        var typed = typedFields();
        box.innerHTML = next.innerHTML;
        open.forEach(function (id) {
          var d = document.getElementById(id);
          if (d) d.open = true;
        });
        restoreFields(typed);
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
