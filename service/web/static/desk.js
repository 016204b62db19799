// The workspace's team panel (service/web/templates/admin/_desk_workspace.html): presence by short polling
// (PUT /api/tickets/<id>/presence: "viewing", or "replying" while the reply box has unsent text), and a warning
// before a reply is sent over a public message that arrived after the page loaded. Plain JavaScript, no build.
(function () {
  "use strict";

  const panel = document.getElementById("team-panel");
  if (!panel) return;
  const ticketId = panel.dataset.ticketId;
  const loadedLatest = Number(panel.dataset.latestPublic || 0);
  const pollMs = Math.max(2, Number(panel.dataset.pollSeconds || 5)) * 1000;
  const csrf = window.supportrag.csrf;  // admin.js, loaded first on every admin page
  const presenceLine = document.getElementById("presence");
  const warning = document.getElementById("newer-message");
  const reply = document.getElementById("reply-body");
  const initialReply = reply ? reply.value : "";
  let latest = loadedLatest;
  let warned = false;

  function activity() {
    const typing = reply && (document.activeElement === reply || reply.value !== initialReply);
    return typing ? "replying" : "viewing";
  }

  function showViewers(viewers) {
    presenceLine.textContent = viewers.map(function (v) { return v.name + " is " + v.activity; }).join(", ");
  }

  async function beat() {
    try {
      const response = await fetch("/api/tickets/" + encodeURIComponent(ticketId) + "/presence", {
        method: "PUT", credentials: "same-origin",
        headers: { "Content-Type": "application/json", "Accept": "application/json", "X-CSRF-Token": csrf },
        body: JSON.stringify({ activity: activity() }),
      });
      if (!response.ok) return;
      const data = await response.json();
      showViewers(data.viewers);
      latest = Math.max(latest, Number(data.latest_public_message_id || 0));
      if (latest > loadedLatest) warning.hidden = false;
    } catch (error) {
      // Offline for a moment: the next beat tries again; presence simply expires meanwhile.
    }
  }

  // Sending a public reply over a newer message: stop once and say so; sending again sends.
  document.querySelectorAll('form[action$="/reply"]').forEach(function (form) {
    if (form.querySelector('input[name="internal"][value="1"]')) return;
    form.addEventListener("submit", function (event) {
      if (latest > loadedLatest && !warned) {
        event.preventDefault();
        warned = true;
        warning.hidden = false;
        warning.focus && warning.focus();
      }
    });
  });

  if (reply) {
    reply.addEventListener("focus", beat);
  }
  beat();
  setInterval(beat, pollMs);
})();
