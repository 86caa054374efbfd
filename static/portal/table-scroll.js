// A table wider than its page scrolls sideways inside its .table-scroll box; the box is then marked
// (class "scrolls": a shadow on the right edge) and preceded by its data-scroll-hint text, so no
// column is hidden without saying so. Checked on load and whenever the window is resized.
(function () {
  function mark(box) {
    var scrolls = box.scrollWidth > box.clientWidth + 1;
    box.classList.toggle("scrolls", scrolls);
    var hint = box.previousElementSibling;
    if (!hint || !hint.classList.contains("scroll-hint")) {
      hint = document.createElement("p");
      hint.className = "scroll-hint";
      hint.textContent = box.dataset.scrollHint || "Scroll sideways for more columns →";
      box.parentNode.insertBefore(hint, box);
    }
    hint.hidden = !scrolls;
  }
  function markAll() { document.querySelectorAll(".table-scroll").forEach(mark); }
  document.addEventListener("DOMContentLoaded", markAll);
  window.addEventListener("resize", markAll);
})();
