// Draws every chart on a page: one pattern for the whole site (STYLE.md).
// A chart is <div class="chart" data-figure="ID"> next to a json_script element with id ID that
// holds a Plotly figure built in Python. No inline scripts, so a strict CSP holds.
// One chart a frame, in page order: the first is painted before the next is drawn (a page's
// charts drawn in one task were all painted together, 50-250 ms per chart later each;
// bench/browser_pages.py measures the first).
(function () {
  "use strict";

  function drawOne(el) {
    var source = document.getElementById(el.dataset.figure);
    if (!el.isConnected || !source || !window.Plotly) {
      return; // swapped out by htmx while waiting its turn
    }
    var figure = JSON.parse(source.textContent);
    var config = Object.assign({ responsive: true, displaylogo: false }, figure.config || {});
    window.Plotly.react(el, figure.data || [], figure.layout || {}, config);
    el.dataset.drawn = "true";
  }

  // After the frame that paints what was drawn (a timeout queued in the frame's callback runs
  // once the frame is done).
  function afterPaint(next) {
    window.requestAnimationFrame(function () {
      window.setTimeout(next, 0);
    });
  }

  function draw(root) {
    var queue = Array.prototype.slice.call(root.querySelectorAll("div.chart[data-figure]"));
    (function next() {
      if (queue.length) {
        drawOne(queue.shift());
        afterPaint(next);
      }
    })();
  }

  document.addEventListener("DOMContentLoaded", function () {
    draw(document);
  });
  // Charts that htmx swaps in are drawn as they arrive.
  document.addEventListener("htmx:afterSettle", function (event) {
    draw(event.detail.elt || document);
  });
})();
