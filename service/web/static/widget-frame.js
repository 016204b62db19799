/* The chat panel inside the widget's iframe (service/widget): ask, stream the answer, hand off, poll replies. */
(function () {
  "use strict";
  var body = document.body;
  var S = JSON.parse(body.dataset.strings);
  var ALLOWED = (body.dataset.origins || "").split(/\s+/).filter(Boolean).concat([location.origin]);
  var log = document.getElementById("log"), status = document.getElementById("status");
  var form = document.getElementById("ask"), question = document.getElementById("question");
  var send = document.getElementById("send"), talk = document.getElementById("talk");
  var email = document.getElementById("email"), emailRow = document.getElementById("email-row");
  var framed = window.parent !== window;
  var parentOrigin = null;
  var token = null, storageKey = "supportrag.widget", identityKey = "", started = false, busy = false;
  var seen = {}, lastAgentId = 0, pollTimer = null, pollFailed = false, pendingHandoff = false, handingOff = false,
      wantFocus = false, refused = false;
  window.supportragWidget = {state: function () { return {token: token, identity: identityKey, started: started}; }};

  if (body.dataset.color) document.documentElement.style.setProperty("--accent", body.dataset.color);

  if (framed) {
    var ancestors = location.ancestorOrigins;
    var candidate = ancestors && ancestors.length ? ancestors[0] : (document.referrer ? new URL(document.referrer).origin : "");
    if (ALLOWED.indexOf(candidate) !== -1) parentOrigin = candidate;
  }

  function toParent(message) {
    if (parentOrigin) window.parent.postMessage(message, parentOrigin);  // the framing site's origin only, never a wildcard
  }

  function say(text) { status.textContent = text || ""; }

  function bubble(role, text, id) {
    var p = document.createElement("div");
    p.className = "message " + role;
    if (id) { p.dataset.id = id; seen[id] = true; }
    var who = document.createElement("span");
    who.className = "who";
    who.textContent = role === "visitor" ? S.you : role === "agent" ? S.agent : S.assistant;
    var text_ = document.createElement("p");
    text_.className = "text";
    text_.textContent = text || "";
    p.appendChild(who);
    p.appendChild(text_);
    log.appendChild(p);
    log.scrollTop = log.scrollHeight;
    return p;
  }

  function citations(box, list) {
    if (!list || !list.length) return;
    var nav = document.createElement("nav");
    nav.className = "sources";
    nav.setAttribute("aria-label", S.sources);
    var ol = document.createElement("ol");
    list.forEach(function (c) {
      var li = document.createElement("li"), a = document.createElement("a");
      a.href = c.url; a.target = "_blank"; a.rel = "noopener";
      a.textContent = "[" + c.number + "] " + (c.section || c.title);
      li.appendChild(a); ol.appendChild(li);
    });
    nav.appendChild(ol);
    box.appendChild(nav);
    log.scrollTop = log.scrollHeight;
  }

  function feedback(box, messageId) {
    var group = document.createElement("div");
    group.className = "feedback";
    group.setAttribute("role", "group");
    var label = document.createElement("span");
    label.textContent = S.feedback_question;
    group.appendChild(label);
    [[S.feedback_yes, true], [S.feedback_no, false]].forEach(function (pair) {
      var b = document.createElement("button");
      b.type = "button"; b.textContent = pair[0];
      b.addEventListener("click", function () {
        api("POST", "/widget/api/feedback", {message_id: messageId, helpful: pair[1]}).then(function () {
          group.textContent = S.feedback_thanks;
          question.focus();
        });
      });
      group.appendChild(b);
    });
    box.appendChild(group);
    log.scrollTop = log.scrollHeight;
  }

  function headers(json) {
    var h = {};
    if (json) h["Content-Type"] = "application/json";
    if (token) h["X-Widget-Token"] = token;
    return h;
  }

  function api(method, path, payload) {
    return fetch(path, {method: method, headers: headers(payload !== undefined), credentials: "omit",
                        body: payload !== undefined ? JSON.stringify(payload) : undefined})
      .then(function (r) { return r.json().then(function (j) { return {status: r.status, body: j}; }); });
  }

  function render(messages) {
    messages.forEach(function (m) {
      if (seen[m.id]) return;
      var box = bubble(m.role, m.body, m.id);
      if (m.role === "assistant") citations(box, m.citations);
      if (m.role === "agent") lastAgentId = Math.max(lastAgentId, parseInt(m.id.slice(1), 10));
    });
  }

  function setEnabled(on) { [question, send, talk, email].forEach(function (el) { el.disabled = !on; }); }

  function start(identity) {
    identityKey = identity && identity.user_id ? String(identity.user_id) : "";
    var saved = null;
    try { saved = JSON.parse(localStorage.getItem(storageKey) || "null"); } catch (e) { saved = null; }
    token = saved && saved.identity === identityKey ? saved.token : null;
    return api("POST", "/widget/api/session", {locale: body.dataset.locale, identity: identity || null})
      .then(function (r) {
        if (r.status === 401 && token) { token = null; return start(identity); }
        if (r.status !== 200) {
          // Refused (identity required, or a wrong user_hash): the controls stay usable, and every attempt is
          // refused by the server again, so the visitor is told why instead of facing dead buttons.
          refused = r.status === 401;
          setEnabled(true);
          say(refused ? S.sign_in_required : S.error);
          return;
        }
        token = r.body.token;
        started = true;
        refused = false;
        setEnabled(true);
        if (wantFocus) question.focus();  // opened before the session was ready
        try { localStorage.setItem(storageKey, JSON.stringify({token: token, identity: identityKey})); } catch (e) {}
        emailRow.hidden = !!r.body.email;
        render(r.body.messages);
        showTickets(r.body.tickets || []);
        if (r.body.ticket) { say(S.handed_off.replace("{reference}", r.body.ticket)); poll(); }
      });
  }

  function showTickets(tickets) {
    var box = document.getElementById("tickets");
    box.hidden = !tickets.length;
    var list = box.querySelector("ul");
    list.textContent = "";
    tickets.forEach(function (t) {
      var li = document.createElement("li");
      li.textContent = t.reference + " · " + t.subject + " · " + t.state;
      list.appendChild(li);
    });
  }

  function parseEvents(buffer, onEvent) {
    var parts = buffer.split("\n\n");
    var rest = parts.pop();
    parts.forEach(function (chunk) {
      var kind = "message", data = "";
      chunk.split("\n").forEach(function (line) {
        if (line.indexOf("event: ") === 0) kind = line.slice(7);
        else if (line.indexOf("data: ") === 0) data += line.slice(6);
      });
      if (data) onEvent(kind, JSON.parse(data));
    });
    return rest;
  }

  function ask(text) {
    busy = true;
    bubble("visitor", text);
    var box = bubble("assistant", ""), out = box.querySelector(".text");
    box.setAttribute("aria-busy", "true");
    say(S.thinking);
    return fetch("/widget/api/ask", {method: "POST", headers: headers(true), credentials: "omit",
                                     body: JSON.stringify({question: text})})
      .then(function (r) {
        if (r.status !== 200) {
          return r.json().then(function () { out.textContent = r.status === 429 ? S.rate_limited : S.error; });
        }
        var reader = r.body.getReader(), decoder = new TextDecoder(), buffer = "";
        function pump() {
          return reader.read().then(function (step) {
            if (step.done) return;
            buffer = parseEvents(buffer + decoder.decode(step.value, {stream: true}), function (kind, data) {
              if (kind === "gate") box.dataset.answerable = data.answerable ? "yes" : "no";
              else if (kind === "delta") { out.textContent += data.text; log.scrollTop = log.scrollHeight; }
              else if (kind === "citations") citations(box, data.citations);
              else if (kind === "done") { box.dataset.id = data.message_id; seen[data.message_id] = true;
                                          if (data.answered) feedback(box, data.message_id); }
              else if (kind === "error") out.textContent = S.error;
            });
            return pump();
          });
        }
        return pump();
      })
      .catch(function () { out.textContent = S.error; })
      .then(function () { box.removeAttribute("aria-busy"); busy = false; say(""); });
  }

  function tryRefused(path, payload) {
    // Without a session the server says no (401); show its reason, never an answer.
    api("POST", path, payload).then(function () { say(S.sign_in_required); }, function () { say(S.sign_in_required); });
  }

  function handoff() {
    if (refused) { tryRefused("/widget/api/handoff", {}); return; }
    var address = email.value.trim();
    if (!emailRow.hidden && !address) { pendingHandoff = true; say(S.email_needed); email.focus(); return; }
    if (handingOff) return;  // a double click makes one ticket
    handingOff = true;
    api("POST", "/widget/api/handoff", address ? {email: address} : {}).then(function (r) {
      handingOff = false;
      if (r.status === 400) { pendingHandoff = true; emailRow.hidden = false; say(S.email_needed); email.focus(); return; }
      if (r.status !== 200 && r.status !== 201) { say(S.error); return; }
      pendingHandoff = false;
      emailRow.hidden = true;
      say(S.handed_off.replace("{reference}", r.body.ticket));
      bubble("assistant", S.handed_off.replace("{reference}", r.body.ticket));
      poll();
    }, function () { handingOff = false; say(S.error); });
  }

  function poll() {
    if (pollTimer) return;
    function tick() {
      // After a failed poll, resync from the start: ids already shown are skipped.
      var after = pollFailed ? 0 : lastAgentId;
      api("GET", "/widget/api/messages?after=" + after).then(function (r) {
        if (r.status === 200) { pollFailed = false; render(r.body.messages); } else { pollFailed = true; }
      }, function () { pollFailed = true; say(S.reconnecting); });
    }
    tick();
    pollTimer = setInterval(tick, 2000);
  }

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    var text = question.value.trim();
    if (!text && pendingHandoff) { handoff(); return; }
    if (text && refused) { tryRefused("/widget/api/ask", {question: text}); return; }
    if (!text || busy || !started) return;
    question.value = "";
    ask(text);
  });
  question.addEventListener("keydown", function (event) {
    if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); form.requestSubmit(); }
  });
  talk.addEventListener("click", handoff);
  document.getElementById("close").addEventListener("click", function () { toParent({type: "supportrag:close"}); });

  // Keyboard: Escape closes the panel; Tab stays inside it.
  document.addEventListener("keydown", function (event) {
    if (event.key === "Escape") { toParent({type: "supportrag:close"}); return; }
    if (event.key !== "Tab") return;
    var items = Array.prototype.filter.call(document.querySelectorAll("button, a[href], input, textarea"),
      function (el) { return !el.disabled && el.offsetParent !== null; });
    if (!items.length) return;
    var first = items[0], last = items[items.length - 1];
    if (event.shiftKey && document.activeElement === first) { event.preventDefault(); last.focus(); }
    else if (!event.shiftKey && document.activeElement === last) { event.preventDefault(); first.focus(); }
  });

  window.addEventListener("message", function (event) {
    // Only the page that framed us, from an allowed origin, may speak; anything else is ignored.
    if (!parentOrigin || event.origin !== parentOrigin || event.source !== window.parent) return;
    var message = event.data || {};
    if (message.type === "supportrag:init" && !started) start(message.identity);
    else if (message.type === "supportrag:identify") { started = false; start(message.identity); }
    else if (message.type === "supportrag:open") { wantFocus = true; question.focus(); }
  });

  setEnabled(false);
  if (parentOrigin) {
    toParent({type: "supportrag:ready"});
    setTimeout(function () { if (!started) start(null); }, 3000);  // a host that never answers: anonymous
  } else {
    start(null);  // opened on its own (the admin's preview)
  }
})();
