/* A long text's passages that crossed a threshold (templates/moderation/includes/flagged_parts.html):
   the text box scrolls to the first on load, and "Next flagged passage" steps through them.
   Only the text's own box scrolls, not the page: the decide panel stays where it is. */
(function () {
  "use strict";
  function show(box, part) {
    const top = part.getBoundingClientRect().top - box.getBoundingClientRect().top;
    box.scrollTop += top - box.clientHeight / 3;
    part.classList.add("flagged-current");
  }
  function start() {
    const box = document.getElementById("content-text");
    const parts = box ? box.querySelectorAll(".flagged-part") : [];
    if (!parts.length) return;
    let at = 0;
    show(box, parts[0]);
    const next = document.getElementById("next-flagged-part");
    if (next) {
      next.addEventListener("click", function () {
        parts[at].classList.remove("flagged-current");
        at = (at + 1) % parts.length;
        show(box, parts[at]);
      });
    }
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
