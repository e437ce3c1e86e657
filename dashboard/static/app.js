// ingestq dashboard: live updates. The server says on /ui/live (server-sent
// events) when the queue changed; the page then fetches its own address
// again and swaps in its main part. One fetch at a time: changes that come
// meanwhile cause one more fetch after it. A fetch begins no sooner than the
// last one's end plus as long as it took. No timer polls anything.
(function () {
  "use strict";
  // After an action's POST the address is the job's page: make reloading
  // it a GET, not the form sent again.
  history.replaceState(null, "", location.href);

  const main = document.getElementById("live");
  const status = document.getElementById("live-status");
  if (!main || !status || !main.dataset.live || !window.EventSource) {
    return;
  }
  const say = function (text, cls) {
    status.textContent = text;
    status.className = "live-status " + cls;
  };

  let busy = false;
  let again = false;
  // When the next fetch may begin: the last one's end, plus as long as it
  // took, so that a page open on a busy queue has its daemon reading half
  // the time at most, however the changes come (performance.now: a clock
  // set meanwhile moves no rest).
  let rested = 0;
  const editing = function () {
    const el = document.activeElement;
    return el && main.contains(el) && (el.tagName === "INPUT" || el.tagName === "TEXTAREA");
  };
  const refresh = async function () {
    if (busy || editing()) {
      again = true; // after the fetch under way, or once the field is left
      return;
    }
    busy = true;
    try {
      do {
        const rest = rested - performance.now();
        if (rest > 0) {
          await new Promise(function (done) { setTimeout(done, rest); });
          if (editing()) {
            again = true; // once the field is left
            break;
          }
        }
        again = false; // changes from here on need another fetch
        const began = performance.now();
        const resp = await fetch(location.href, { headers: { "X-Live": "1" }, cache: "no-store" });
        main.innerHTML = await resp.text(); // the server's own page, escaped by its templates
        main.dataset.refreshed = String(Date.now());
        const now = performance.now();
        rested = now + (now - began);
      } while (again && !editing());
    } catch (e) {
      say("offline", "down");
    } finally {
      busy = false;
    }
  };
  main.addEventListener("focusout", function () {
    if (again) {
      refresh();
    }
  });

  let lost = false;
  const source = new EventSource("/ui/live");
  source.addEventListener("change", refresh);
  source.addEventListener("open", function () {
    say("live", "up");
    if (lost) {
      lost = false;
      refresh(); // changes made while the stream was down
    }
  });
  source.addEventListener("error", function () {
    lost = true;
    say("reconnecting…", "down");
  });
  window.addEventListener("pagehide", function () {
    source.close();
  });
})();
