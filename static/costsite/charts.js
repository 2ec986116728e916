// Draws every chart on a page: one pattern for the whole site (STYLE.md).
// A chart is <div class="chart" data-figure="ID"> next to a json_script element with id ID that
// holds a Plotly figure built in Python. No inline scripts, so a strict CSP holds.
(function () {
  "use strict";

  function draw(root) {
    root.querySelectorAll("div.chart[data-figure]").forEach(function (el) {
      var source = document.getElementById(el.dataset.figure);
      if (!source || !window.Plotly) {
        return;
      }
      var figure = JSON.parse(source.textContent);
      var config = Object.assign({ responsive: true, displaylogo: false }, figure.config || {});
      window.Plotly.react(el, figure.data || [], figure.layout || {}, config);
      el.dataset.drawn = "true";
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    draw(document);
  });
  // Charts that htmx swaps in are drawn as they arrive.
  document.addEventListener("htmx:afterSettle", function (event) {
    draw(event.detail.elt || document);
  });
})();
