// The review queue (issue 34): R marks the focused ticket's answer right, W wrong; J/K move. Plain JavaScript.
(function () {
  "use strict";
  const items = Array.from(document.querySelectorAll(".review-item"));
  if (!items.length) return;
  let current = 0;

  function focus(index) {
    current = Math.max(0, Math.min(items.length - 1, index));
    items.forEach((item, i) => item.classList.toggle("current", i === current));
    items[current].focus();
  }

  async function mark(item, correct) {
    const verdict = item.querySelector(".verdict");
    try {
      await window.supportrag.api("POST", item.dataset.reviewUrl, { answer_correct: correct });
      item.dataset.reviewed = correct ? "right" : "wrong";
      verdict.textContent = correct ? "Marked right" : "Marked wrong";
      const next = items.findIndex((other, i) => i > items.indexOf(item) && !other.dataset.reviewed);
      if (next >= 0) focus(next);
    } catch (error) {
      verdict.textContent = error.message;
    }
  }

  items.forEach((item, index) => {
    item.addEventListener("focus", () => { current = index; });
    item.querySelectorAll("button[data-correct]").forEach((button) => {
      button.addEventListener("click", () => mark(item, button.dataset.correct === "true"));
    });
  });
  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (["INPUT", "TEXTAREA", "SELECT"].includes(event.target.tagName)) return;
    const key = event.key.toLowerCase();
    if (key === "r") mark(items[current], true);
    else if (key === "w") mark(items[current], false);
    else if (key === "j") focus(current + 1);
    else if (key === "k") focus(current - 1);
    else return;
    event.preventDefault();
  });
  focus(0);
})();
