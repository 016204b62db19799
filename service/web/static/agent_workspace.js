// The agent's workspace (/admin/inbox/<id>), issue 25 item 1: typed work is never lost.
// The reply being typed is saved to the server as it is typed (debounced PUT /api/tickets/<id>/composer) and
// restored on reload; an internal note is saved without leaving the page; a canned reply is inserted at the
// cursor; leaving with unsent text asks first; sending clears it (on the server, with the reply).
(function () {
  "use strict";

  const SAVE_DELAY_MS = 600;
  const flash = window.supportrag.flash;  // admin.js, loaded first on every admin page

  function send(method, url, body, keepalive) {
    return window.supportrag.api(method, url, body, { keepalive: keepalive });
  }

  function initComposer(form) {
    const ticketId = form.dataset.ticketId;
    const textarea = document.getElementById("reply-body");
    const status = document.getElementById("composer-saved");
    const composerUrl = "/api/tickets/" + ticketId + "/composer";
    const initial = textarea.value;
    const restored = form.dataset.restored === "true";
    let saved = restored ? initial : null;  // what the server holds (null: unknown, e.g. the AI draft shown)
    let timer = null;
    let leaving = false;  // a submit of this page's own forms: the text is saved, nothing to ask
    let inFlight = null;  // issue 34: the autosave on its way, if any (a send waits for it)
    let sending = false;

    function unsent() {
      return textarea.value.trim() !== "" && (restored || textarea.value !== initial);
    }

    async function save(keepalive) {
      clearTimeout(timer);
      timer = null;
      const body = textarea.value;
      if (leaving || body === saved || (saved === null && body === initial)) return;
      // after_message_id: a save that arrives after this agent's next reply is refused (409), not restored.
      const request = send("PUT", composerUrl,
                           { body: body, after_message_id: Number(form.dataset.lastReplyId || 0) }, keepalive);
      inFlight = request;
      try {
        const data = await request;
        saved = body;
        const when = data.composer.updated_at ? new Date(data.composer.updated_at).toLocaleTimeString() : "";
        status.textContent = data.composer.body ? "Saved " + when + "." : "";
        status.dataset.saved = "true";
      } catch (error) {
        status.textContent = "Not saved: " + error.message;
        status.dataset.saved = "false";
      } finally {
        if (inFlight === request) inFlight = null;
      }
    }

    textarea.addEventListener("input", function () {
      status.dataset.saved = "pending";
      clearTimeout(timer);
      timer = setTimeout(save, SAVE_DELAY_MS);
    });

    let submitted = false;  // a double click sends once (the server also keeps the form's idempotency key)
    form.addEventListener("submit", function (event) {
      if (sending) return;  // the send resumed after the autosave landed
      if (submitted) {  // a second click while the first is on its way: ignored
        event.preventDefault();
        return;
      }
      const notice = document.getElementById("draft-notice");
      const line = notice ? notice.dataset.notice : "";
      if (line && textarea.value.includes(line) &&
          !window.confirm("Your reply still says the knowledge base has nothing above the threshold. Send it anyway?")) {
        event.preventDefault();
        return;
      }
      clearTimeout(timer);
      submitted = true;
      leaving = true;  // sent: the server clears the saved text with the reply
      if (inFlight) {
        // Issue 34: an autosave still on its way could land after the reply and refill the composer: send after it.
        event.preventDefault();
        sending = true;
        const submitter = event.submitter;
        inFlight.catch(function () {}).then(function () { form.requestSubmit(submitter); });
      }
    });

    // The page's other forms reload this page (assign, regenerate, the no-script canned fallback): save first.
    document.querySelectorAll("form").forEach(function (other) {
      if (other === form || other.id === "note-form" || other.id === "canned-form") return;
      other.addEventListener("submit", async function (event) {
        if (other.querySelector('[name="instruction"]') && unsent() &&
            !window.confirm("A new draft replaces the text in the reply box. Continue?")) {
          event.preventDefault();
          return;
        }
        event.preventDefault();
        await save(true);
        leaving = true;
        HTMLFormElement.prototype.submit.call(other);
      });
    });

    window.addEventListener("beforeunload", function (event) {
      if (leaving || !unsent()) return;
      save(true);
      event.preventDefault();
      event.returnValue = "";  // the browser asks "Leave site? Changes you made may not be saved."
    });

    return { textarea: textarea, save: save };
  }

  // A blank line between the inserted text and whatever is already on either side of the cursor
  // ("…Tallybook Support" + "Hi Maria," must not run together).
  function separated(before, text, after) {
    const lead = before.trim() === "" ? "" : before.endsWith("\n\n") ? "" : before.endsWith("\n") ? "\n" : "\n\n";
    const tail = after.trim() === "" ? "" : after.startsWith("\n\n") ? "" : after.startsWith("\n") ? "\n" : "\n\n";
    return lead + text.trim() + tail;
  }

  function insertAtCursor(textarea, text) {
    const start = textarea.selectionStart, end = textarea.selectionEnd;
    const value = textarea.value;
    textarea.setRangeText(separated(value.slice(0, start), text, value.slice(end)), start, end, "end");
    textarea.focus();
    textarea.dispatchEvent(new Event("input", { bubbles: true }));
  }

  function initCanned(form, composer) {
    const data = document.getElementById("canned-data");
    if (!data) return;
    const replies = JSON.parse(data.textContent);
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      const id = Number(form.querySelector("select").value);
      const chosen = replies.find(function (r) { return r.id === id; });
      if (chosen) {
        insertAtCursor(composer.textarea, chosen.body);
        flash("Canned reply “" + chosen.title + "” inserted.", "success");
      }
    });
  }

  function appendNote(message) {
    const list = document.querySelector(".messages");
    if (!list) return;
    const item = document.createElement("li");
    item.className = "message message-internal_note";
    const meta = document.createElement("p");
    meta.className = "muted";
    const kind = document.createElement("strong");
    kind.textContent = "Internal note";
    meta.append(kind, " · " + (message.author || "") + " · just now · " + message.channel);
    const body = document.createElement("pre");
    body.className = "text";
    body.textContent = message.body;
    item.append(meta, body);
    list.append(item);
  }

  function initNote(form, ticketId) {
    const textarea = form.querySelector("textarea");
    form.addEventListener("submit", async function (event) {
      event.preventDefault();
      const button = form.querySelector("button");
      button.disabled = true;
      try {
        const data = await send("POST", "/api/tickets/" + ticketId + "/replies", { body: textarea.value, internal: true });
        appendNote(data.message);
        textarea.value = "";
        flash("Internal note saved.", "success");
      } catch (error) {
        flash("Note not saved: " + error.message, "error");
      } finally {
        button.disabled = false;
      }
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    const form = document.getElementById("reply-form");
    if (!form) return;
    const composer = initComposer(form);
    const canned = document.getElementById("canned-form");
    if (canned) initCanned(canned, composer);
    const note = document.getElementById("note-form");
    if (note) initNote(note, form.dataset.ticketId);
  });
})();
