// fleetform dashboard: live updates over Server-Sent Events and lease ages that count up.
// The pages are whole without this script; it only keeps them current.
(function () {
  "use strict";
  var main = document.getElementById("main");
  if (!main || !document.body.dataset.now) {
    return;
  }
  var live = document.querySelector(".live");
  // The server's clock, not the viewer's, says how old a lease is.
  var offset = Number(document.body.dataset.now) * 1000 - Date.now();

  function age(seconds) {
    seconds = Math.max(0, Math.floor(seconds));
    if (seconds < 60) return seconds + "s";
    if (seconds < 3600) return Math.floor(seconds / 60) + "m";
    if (seconds < 86400) return Math.floor(seconds / 3600) + "h";
    return Math.floor(seconds / 86400) + "d";
  }

  function countAges() {
    var now = (Date.now() + offset) / 1000;
    document.querySelectorAll("[data-renewed]").forEach(function (cell) {
      cell.textContent = age(now - Number(cell.dataset.renewed));
    });
  }
  setInterval(countAges, 1000);

  function say(text) {
    if (live) live.textContent = text;
  }

  function fromHtml(html) {
    var template = document.createElement("template");
    template.innerHTML = html;
    return template.content.firstElementChild;
  }

  // A page whose topic changed is fetched again (from the dashboard's memory, not the API
  // server) and its <main> swapped in, unless the viewer is typing in it.
  var refreshing = false;
  var again = false;
  function refresh() {
    var focused = document.activeElement;
    if (focused && main.contains(focused) && /^(INPUT|SELECT|TEXTAREA)$/.test(focused.tagName)) {
      again = true;
      return;
    }
    if (refreshing) {
      again = true;
      return;
    }
    refreshing = true;
    fetch(location.href, { credentials: "same-origin" })
      .then(function (response) { return response.text(); })
      .then(function (text) {
        var fresh = new DOMParser().parseFromString(text, "text/html").getElementById("main");
        if (fresh) {
          document.body.dataset.version = fresh.ownerDocument.body.dataset.version;
          main.innerHTML = fresh.innerHTML;
          countAges();
        }
      })
      .finally(function () {
        refreshing = false;
        if (again) {
          again = false;
          refresh();
        }
      });
  }
  main.addEventListener("focusout", function () {
    if (again && !refreshing) {
      again = false;
      refresh();
    }
  });

  if (!window.EventSource) return;
  var source = new EventSource("/events");
  source.addEventListener("open", function () {
    document.body.dataset.live = "connected";
  });
  source.addEventListener("error", function () {
    document.body.dataset.live = "reconnecting";
  });
  source.addEventListener("reload", refresh);
  // What changed between this page's rendering and the stream's opening.
  source.addEventListener("hello", function (message) {
    if (message.data !== document.body.dataset.version) refresh();
  });
  source.addEventListener("update", function (message) {
    var update = JSON.parse(message.data);
    var topic = main.dataset.topic;
    if (update.topics.indexOf("*") >= 0 || (topic && update.topics.indexOf(topic) >= 0)) {
      refresh();
      return;
    }
    var changed = 0;
    update.rows.forEach(function (entry) {
      var row = document.getElementById(entry[0]);
      if (!row) return;
      if (entry[1]) {
        row.replaceWith(fromHtml("<table><tbody>" + entry[1] + "</tbody></table>").querySelector("tr"));
      } else {
        row.remove();
      }
      changed += 1;
    });
    var summary = document.getElementById("summary");
    if (summary && update.summary) {
      summary.replaceWith(fromHtml(update.summary));
    }
    if (changed) {
      countAges();
      say(changed === 1 ? "1 spoke changed" : changed + " spokes changed");
    }
  });
})();
