// Admin pages: importance slider (saved on release, with undo), ranking preview with what-if, confirmations.
// Plain JavaScript, no build step. Every write goes through the JSON API with the session's CSRF token.
(function () {
  "use strict";

  const csrfMeta = document.querySelector('meta[name="csrf-token"]');
  const csrf = csrfMeta ? csrfMeta.content : "";

  function flash(message, kind) {
    const area = document.getElementById("flash");
    if (!area) return;
    const p = document.createElement("p");
    p.className = "flash flash-" + (kind || "info");
    p.textContent = message;
    area.replaceChildren(p);
  }

  // fetch() a JSON endpoint; a failure throws an Error carrying the API's {"error": {code, message, details}}.
  // options.keepalive: the request outlives the page (a save sent while it unloads).
  async function api(method, url, body, options) {
    let response;
    try {
      response = await fetch(url, {
        method: method,
        credentials: "same-origin",
        keepalive: Boolean(options && options.keepalive),
        headers: { "Content-Type": "application/json", "Accept": "application/json", "X-CSRF-Token": csrf },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (networkError) {
      throw new Error("The server could not be reached: " + networkError.message);
    }
    let data = null;
    try { data = await response.json(); } catch (ignored) { /* not JSON */ }
    if (!response.ok) {
      const error = (data && data.error) || { code: "http_" + response.status, message: "request failed", details: {} };
      const details = Object.entries(error.details || {}).map(([field, problem]) => field + " " + problem).join("; ");
      let message = error.message + (details ? " (" + details + ")" : "");
      if (response.status === 401) message = "Your session has ended. Reload the page and log in again.";
      const failure = new Error(message);
      failure.code = error.code;
      throw failure;
    }
    return data;
  }

  // The workspace's scripts (agent_workspace.js, desk.js) load after this one and use the same token and helpers.
  window.supportrag = { csrf: csrf, flash: flash, api: api };

  // Same thresholds as service/admin.py:importance_badge.
  function importanceBadge(value) {
    if (value >= 1.5) return "critical";
    if (value > 1.0) return "boosted";
    if (value <= 0.2) return "buried";
    if (value < 1.0) return "lowered";
    return "normal";
  }

  function setBadge(element, value) {
    if (!element) return;
    const name = importanceBadge(value);
    element.className = "badge badge-" + name;
    element.textContent = name;
  }

  function fixed(value, digits) {
    return value === null || value === undefined ? "—" : Number(value).toFixed(digits);
  }

  // --- importance slider ------------------------------------------------------------------------
  function initImportanceSlider(slider) {
    const articleId = Number(slider.dataset.articleId);
    const output = document.getElementById("importance-value");
    const badge = document.getElementById("importance-badge");
    const status = document.getElementById("importance-status");
    let saved = Number(slider.dataset.saved);
    let timer = null;

    function show() {
      const value = Number(slider.value);
      output.value = value.toFixed(1);
      setBadge(badge, value);
      document.dispatchEvent(new CustomEvent("importance:moved", { detail: { articleId: articleId, importance: value } }));
    }

    function confirmSaved(previous) {
      status.replaceChildren();
      const text = document.createElement("span");
      text.className = "saved";
      text.textContent = "Importance saved: " + saved.toFixed(1) + " (was " + previous.toFixed(1) +
        "). The next ticket uses it. ";
      const undo = document.createElement("button");
      undo.type = "button";
      undo.className = "link-button";
      undo.textContent = "Undo";
      undo.addEventListener("click", function () { save(previous); });
      status.append(text, undo);
    }

    async function save(value) {
      if (value === saved) return;
      const previous = saved;
      status.textContent = "Saving " + value.toFixed(1) + "…";
      try {
        const data = await api("PATCH", "/api/articles/" + articleId, { importance: value });
        saved = data.article.importance;
        slider.value = saved.toFixed(1);
        slider.dataset.saved = String(saved);
        show();
        confirmSaved(previous);
        document.dispatchEvent(new CustomEvent("importance:saved", { detail: { articleId: articleId, importance: saved } }));
      } catch (error) {
        slider.value = saved.toFixed(1);
        show();
        status.textContent = "Not saved; the importance is still " + saved.toFixed(1) + ".";
        flash(error.message, "error");
      }
    }

    slider.addEventListener("input", show);
    // "change" fires when the mouse is released (and on each arrow key): coalesce bursts of key presses.
    slider.addEventListener("change", function () {
      clearTimeout(timer);
      timer = setTimeout(function () { save(Number(slider.value)); }, 250);
    });
  }

  // --- ranking preview --------------------------------------------------------------------------
  function scoreWith(row, weights, importance) {
    return row.relevance * weights.similarity_weight + row.recency * weights.recency_weight * importance;
  }

  // The article's rank if its importance were `importance`. Only the article's own score changes, so the
  // rank is exact while it stays above the lowest result shown; below that, unseen articles may overtake it.
  function whatIf(data, articleId, importance) {
    const base = data.results.find(function (r) { return r.id === articleId; }) || data.article;
    if (!base || base.score === null || base.score === undefined) return null;
    const score = scoreWith(base, data.weights, importance);
    const others = data.results.filter(function (r) { return r.id !== articleId; });
    const ahead = function (r) { return r.score > score || (r.score === score && r.id < articleId); };
    const complete = data.results.length < data.limit;
    const lowest = others[others.length - 1];
    const wasShown = base.rank !== null && base.rank !== undefined;
    const exact = complete || (lowest !== undefined && !ahead(lowest)) || (wasShown && score >= base.score);
    return { score: score, rank: 1 + others.filter(ahead).length, exact: exact, base: base };
  }

  function rankText(result) {
    return result.exact ? "#" + result.rank : "#" + result.rank + " or lower";
  }

  function bar(part, max, className) {
    const span = document.createElement("span");
    span.className = "bar " + className;
    span.style.width = Math.max(0, (part / max) * 100).toFixed(2) + "%";
    return span;
  }

  function renderResults(section, data, articleId, importance) {
    const list = section.querySelector(".preview-results");
    const note = section.querySelector(".whatif");
    const legend = section.querySelector(".legend");
    const w = data.weights;
    const max = w.similarity_weight + w.recency_weight * 2.0;
    let rows = data.results.map(function (r) { return Object.assign({}, r); });
    let verdict = null;
    if (articleId !== null && importance !== undefined) {
      verdict = whatIf(data, articleId, importance);
      if (verdict) {
        let row = rows.find(function (r) { return r.id === articleId; });
        if (!row && verdict.exact) { row = Object.assign({}, verdict.base); rows.push(row); }
        if (row) { row.importance = importance; row.score = verdict.score; }
        rows.sort(function (a, b) { return b.score - a.score || a.id - b.id; });
        if (!verdict.exact) rows = rows.filter(function (r) { return r.id !== articleId; });
      }
    }
    list.replaceChildren();
    rows.forEach(function (r, index) {
      const item = document.createElement("li");
      item.className = "result" + (r.id === articleId ? " current" : "");
      item.dataset.articleId = String(r.id);
      const head = document.createElement("div");
      head.className = "result-head";
      const rank = document.createElement("span");
      rank.className = "rank";
      rank.textContent = "#" + (index + 1);
      const link = document.createElement("a");
      link.href = "/admin/articles/" + r.id;
      link.textContent = r.title;
      const score = document.createElement("span");
      score.className = "score num";
      score.textContent = fixed(r.score, 4);
      head.append(rank, link, score);
      const chart = document.createElement("div");
      chart.className = "bars";
      chart.setAttribute("aria-hidden", "true");
      chart.append(bar(r.relevance * w.similarity_weight, max, "bar-relevance"),
                   bar(r.recency * w.recency_weight * r.importance, max, "bar-boost"));
      const breakdown = document.createElement("div");
      breakdown.className = "breakdown";
      breakdown.textContent = (r.relevance_kind || "relevance") + " " + fixed(r.relevance, 4) +
        " · recency " + fixed(r.recency, 4) + " · importance " + fixed(r.importance, 1) + " · score " + fixed(r.score, 4);
      item.append(head, chart, breakdown);
      if (r.section) {
        const section = document.createElement("div");
        section.className = "matched-section muted";
        section.textContent = "matched section: " + r.section +
          (r.section_similarity === null || r.section_similarity === undefined ? "" : " (similarity " + fixed(r.section_similarity, 4) + ")");
        item.append(section);
      }
      list.append(item);
    });
    legend.hidden = rows.length === 0;
    if (rows.length === 0) {
      const empty = document.createElement("li");
      empty.textContent = "No embedded article matches.";
      list.append(empty);
    }
    note.hidden = true;
    if (articleId === null) return;
    const saved = whatIf(data, articleId, (data.results.find(function (r) { return r.id === articleId; }) || data.article || {}).importance);
    if (!saved) {
      note.hidden = false;
      note.textContent = data.article && data.article.note ? "This article: " + data.article.note + "." : "";
      return;
    }
    note.hidden = false;
    if (verdict && importance !== saved.base.importance) {
      note.textContent = "What if importance were " + importance.toFixed(1) + " (not saved yet): rank " +
        rankText(saved) + " → " + rankText(verdict) + ", score " + fixed(saved.score, 4) + " → " + fixed(verdict.score, 4) + ".";
    } else {
      note.textContent = "This article ranks " + rankText(saved) + " for this ticket (score " + fixed(saved.score, 4) + ").";
    }
  }

  function initPreview(section) {
    const form = section.querySelector(".preview-form");
    const articleId = section.dataset.articleId ? Number(section.dataset.articleId) : null;
    let data = null;
    let pending = undefined;

    async function run() {
      const query = form.querySelector('[name="query"]').value;
      const limit = Number(form.querySelector('[name="limit"]').value);
      const button = form.querySelector("button");
      button.disabled = true;
      try {
        data = await api("POST", "/api/admin/preview", { query: query, limit: limit, article_id: articleId });
        if (data.degraded) flash("Search is degraded (" + data.degraded + "): results come from keywords only.", "error");
        renderResults(section, data, articleId, pending);
      } catch (error) {
        flash(error.message, "error");
      } finally {
        button.disabled = false;
      }
    }

    form.addEventListener("submit", function (event) { event.preventDefault(); run(); });
    document.addEventListener("importance:moved", function (event) {
      if (event.detail.articleId !== articleId) return;
      pending = event.detail.importance;
      if (data) renderResults(section, data, articleId, pending);
    });
    document.addEventListener("importance:saved", function (event) {
      if (event.detail.articleId !== articleId) return;
      pending = undefined;
      if (data) run();  // refresh from the server: the saved ranking, not a client-side estimate
    });
  }

  // --- small helpers ----------------------------------------------------------------------------
  function initConfirmations() {
    document.querySelectorAll("form[data-confirm]").forEach(function (form) {
      form.addEventListener("submit", function (event) {
        if (!window.confirm(form.dataset.confirm)) event.preventDefault();
      });
    });
  }

  function initRangeOutputs() {
    document.querySelectorAll("input[type=range][data-output]").forEach(function (input) {
      const output = document.getElementById(input.dataset.output);
      input.addEventListener("input", function () { output.value = Number(input.value).toFixed(1); });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    const slider = document.getElementById("importance");
    if (slider) initImportanceSlider(slider);
    document.querySelectorAll("[data-preview]").forEach(initPreview);
    initConfirmations();
    initRangeOutputs();
  });
})();
