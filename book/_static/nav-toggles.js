/* Phone navigation: make the header's sidebar buttons work, and close a drawer once a place is picked.
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
  /* A drawer (the site's chapters, or "On this page") closes when the reader picks a place on this page:
     left open it would cover the section the reader asked for. (A link to another page changes the page.) */
  function closeOnPick() {
    ["pst-primary-sidebar-modal", "pst-secondary-sidebar-modal"].forEach(function (id) {
      var dialog = document.getElementById(id);
      if (!dialog) return;
      dialog.addEventListener("click", function (event) {
        var link = event.target.closest ? event.target.closest("a[href]") : null;
        if (!link || !dialog.open) return;
        var target = new URL(link.href, location.href);
        if (target.pathname !== location.pathname || !target.hash) return;
        // Close first, then go: on closing, the theme moves the list back to its sidebar and focuses the
        // button that opened it, which would scroll the page away from the place picked.
        event.preventDefault();
        dialog.addEventListener("close", function () {
          var place = document.getElementById(decodeURIComponent(target.hash.slice(1)));
          if (location.hash !== target.hash) location.hash = target.hash;
          else if (place) place.scrollIntoView();
        }, { once: true });
        dialog.close();
      });
    });
  }
  function start() {
    forward();
    closeOnPick();
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
