// Help center: article suggestions while the customer types (debounced POST /api/search, top 3).
// Plain JavaScript, no build step; the page works without it (the form posts normally).
(function () {
  "use strict";

  const DEBOUNCE_MS = 300;
  const MIN_CHARS = 4;
  const SEPARATOR = " › ";

  // Same rule as service/web/help/markdown.py:slugify, so links land on the section's heading.
  function slugify(text) {
    return text.toLowerCase().replace(/[^\p{L}\p{N}_\s-]/gu, "").replace(/[\s_-]+/g, "-")
      .replace(/^-+|-+$/g, "") || "section";
  }

  function articleUrl(result) {
    const url = "/help/articles/" + encodeURIComponent(result.id);
    if (!result.section || result.section.indexOf(SEPARATOR) < 0) return url;
    return url + "#" + slugify(result.section.slice(result.section.lastIndexOf(SEPARATOR) + SEPARATOR.length));
  }

  // Full-text snippets mark matched words with **…**: bold them without ever parsing HTML.
  function snippetNode(snippet) {
    const p = document.createElement("p");
    p.className = "snippet";
    (snippet || "").split("**").forEach(function (part, index) {
      if (!part) return;
      if (index % 2 === 1) {
        const strong = document.createElement("strong");
        strong.textContent = part;
        p.appendChild(strong);
      } else {
        p.appendChild(document.createTextNode(part));
      }
    });
    return p;
  }

  function suggestionItem(result) {
    const li = document.createElement("li");
    li.className = "suggestion";
    const link = document.createElement("a");
    link.href = articleUrl(result);
    link.textContent = result.title;
    li.appendChild(link);
    if (result.section) {
      const section = document.createElement("div");
      section.className = "section";
      section.textContent = result.section;
      li.appendChild(section);
    }
    li.appendChild(snippetNode(result.snippet));
    return li;
  }

  function initSuggestions(textarea) {
    const box = document.getElementById("suggestions");
    const list = document.getElementById("suggestion-list");
    const floor = parseFloat(box.dataset.minSimilarity) || 0;
    let timer = null;
    let latest = 0;

    async function suggest() {
      const query = textarea.value.trim();
      const ticket = ++latest;
      if (query.length < MIN_CHARS) {
        box.hidden = true;
        return;
      }
      let data;
      try {
        const response = await fetch("/api/search", {
          method: "POST",
          credentials: "same-origin",
          headers: { "Content-Type": "application/json", "Accept": "application/json" },
          body: JSON.stringify({ query: query.slice(0, 2000), limit: 3 }),
        });
        if (!response.ok) return;  // suggestions are a nicety: the form still works
        data = await response.json();
      } catch (ignored) {
        return;
      }
      if (ticket !== latest) return;  // a newer keystroke already asked
      // The gate's floor: an article this far from the question would not answer it either. (Keyword-only
      // results, when the embedder is down, have no similarity and are kept.)
      const close = data.results.filter(function (r) { return r.similarity === null || r.similarity >= floor; });
      list.replaceChildren.apply(list, close.slice(0, 3).map(suggestionItem));
      box.hidden = close.length === 0;
    }

    textarea.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(suggest, DEBOUNCE_MS);
    });
    if (textarea.value.trim()) suggest();
  }

  // A second click while the answer is being written would file the same question twice.
  function submitOnce(form) {
    let sent = false;
    form.addEventListener("submit", function (event) {
      if (sent) event.preventDefault();
      sent = true;
      form.setAttribute("aria-busy", "true");
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    const textarea = document.getElementById("description");
    if (textarea) initSuggestions(textarea);
    document.querySelectorAll("form[method=post]").forEach(submitOnce);
  });
})();
