/* supportrag chat widget loader: one launcher button and one iframe; no framework, never blocks the page. */
(function () {
  "use strict";
  var script = document.currentScript;
  if (!script || window.__supportragLoaded) return;
  window.__supportragLoaded = true;
  var ORIGIN = new URL(script.src, location.href).origin;
  var STRINGS = {{ strings|safe }};
  var data = script.dataset;
  var lang = String(data.locale || navigator.language || "en").toLowerCase().split(/[-_]/)[0];
  if (!STRINGS[lang]) lang = "en";
  var s = STRINGS[lang];
  var color = /^#[0-9a-fA-F]{3}([0-9a-fA-F]{3})?$/.test(data.color || "") ? data.color : "#1f5fbf";
  var left = data.position === "left";
  var identity = null, frame = null, button = null, ready = false, isOpen = false;

  function post(message) {
    if (frame && ready) frame.contentWindow.postMessage(message, ORIGIN);  // the widget's own origin only, never a wildcard
  }

  function place(el, styles) { for (var k in styles) el.style.setProperty(k, styles[k]); }

  function layout() {
    if (!frame) return;
    var phone = Math.min(window.innerWidth, screen.width || window.innerWidth) <= 480;
    place(frame, phone ? {top: "0", left: "0", right: "0", bottom: "0", width: "100%", height: "100%",
                          "border-radius": "0"}
                       : {top: "auto", bottom: "88px", left: left ? "20px" : "auto", right: left ? "auto" : "20px",
                          width: "380px", height: "min(600px, calc(100% - 110px))", "border-radius": "12px"});
  }

  function open() {
    if (!frame) return;
    isOpen = true;
    frame.style.display = "block";
    button.setAttribute("aria-expanded", "true");
    layout();
    frame.focus();
    post({type: "supportrag:open"});
  }

  function close() {
    if (!frame || !isOpen) return;
    isOpen = false;
    frame.style.display = "none";
    button.setAttribute("aria-expanded", "false");
    button.focus();  // focus goes back where it came from
  }

  function build() {
    button = document.createElement("button");
    button.type = "button";
    button.setAttribute("aria-label", s.launcher);
    button.setAttribute("aria-expanded", "false");
    button.setAttribute("aria-controls", "supportrag-frame");
    button.textContent = "?";
    place(button, {position: "fixed", bottom: "20px", right: left ? "auto" : "20px", left: left ? "20px" : "auto",
                   width: "56px", height: "56px", "border-radius": "50%", border: "0", background: color,
                   color: "#fff", "font": "bold 24px/56px system-ui, sans-serif", cursor: "pointer",
                   "z-index": "2147483000", "box-shadow": "0 2px 10px rgba(0,0,0,.3)"});
    button.addEventListener("click", function () { isOpen ? close() : open(); });
    frame = document.createElement("iframe");
    frame.id = "supportrag-frame";
    frame.title = s.frame_title;
    var query = "?locale=" + encodeURIComponent(lang) + "&color=" + encodeURIComponent(color)
      + (data.title ? "&title=" + encodeURIComponent(data.title) : "");
    frame.src = ORIGIN + "/widget" + query;
    place(frame, {position: "fixed", display: "none", border: "0", background: "#fff", "z-index": "2147483001",
                  "box-shadow": "0 4px 24px rgba(0,0,0,.25)", "color-scheme": "normal"});
    document.body.appendChild(frame);
    document.body.appendChild(button);
    layout();
    window.addEventListener("resize", layout);
    document.addEventListener("keydown", function (e) { if (e.key === "Escape" && isOpen) close(); });
  }

  window.addEventListener("message", function (event) {
    // Only the widget's own frame may talk to this script.
    if (event.origin !== ORIGIN || !frame || event.source !== frame.contentWindow) return;
    var message = event.data || {};
    if (message.type === "supportrag:ready") {
      ready = true;
      post({type: "supportrag:init", identity: identity});
      if (isOpen) post({type: "supportrag:open"});  // opened while the frame was still loading
    } else if (message.type === "supportrag:close") {
      close();
    }
  });

  function command(name, arg) {
    if (name === "identify") {
      identity = arg && typeof arg === "object" ? {user_id: arg.user_id, user_hash: arg.user_hash,
                                                     email: arg.email, name: arg.name} : null;
      post({type: "supportrag:identify", identity: identity});
    } else if (name === "open") { open(); } else if (name === "close") { close(); }
  }

  var queued = (window.supportrag && window.supportrag.q) || [];
  window.supportrag = command;
  for (var i = 0; i < queued.length; i++) command(queued[i][0], queued[i][1]);
  if (document.body) build(); else document.addEventListener("DOMContentLoaded", build);
})();
