// Draw every chart the page embedded (a list of {id, data, layout}) with the local plotly.js.
// Each drawn chart gets data-rendered="1" so tests (and people) can tell it is done.
(function () {
  "use strict";
  const specs = JSON.parse(document.getElementById("charts").textContent);
  for (const spec of specs) {
    const element = document.getElementById(spec.id);
    if (!element) continue;
    Plotly.newPlot(element, spec.data, spec.layout, {responsive: true, displaylogo: false})
      .then(function () { element.dataset.rendered = "1"; });
  }
})();
