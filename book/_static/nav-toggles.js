/* Phone navigation: make the header's sidebar buttons work.
 *
 * pydata-sphinx-theme 0.17 and sphinx-book-theme 1.3 each bind the FIRST .primary-toggle and
 * .secondary-toggle on a page, and the first is a button in pydata's own navbar that the book theme
 * hides; the header button a reader taps is a second copy with no handler. Forward its clicks to the
 * bound one, which opens the drawer on a phone and hides the sidebar on a desktop.
 */
(function () {
  "use strict";
  function forward() {
    ["primary-toggle", "secondary-toggle"].forEach(function (name) {
      var all = document.querySelectorAll("." + name);
      for (var i = 1; i < all.length; i++) {
        all[i].addEventListener("click", function (event) {
          event.preventDefault();
          event.stopPropagation();
          all[0].click();
        });
      }
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", forward);
  else forward();
})();
