/* The pipeline-schedule lab of lessons/multi-gpu.md.
 *
 * Each <div class="gl-pipeline-lab"> holds one figure per (stages, micro-batches) cell,
 * drawn at build time by gpulesson.memory.diagrams.pipeline_lab with the bubble that
 * gpulesson.memory.parallel.bubble_fraction computes (its sentence in data-status), and
 * two selects,
 * hidden until this script runs. This script only shows the cell the selects name and
 * hides the others: it computes nothing, so the schedules and the bubble have one home,
 * the package. Without JavaScript the default cell stays shown. No inline handlers:
 * listeners are attached here, as the Content-Security-Policy requires.
 */
(function () {
  "use strict";

  function setUp(lab) {
    var controls = lab.querySelector(".gl-pipeline-controls");
    if (!controls || lab.getAttribute("data-ready")) { return; }
    lab.setAttribute("data-ready", "1");
    var stages = controls.querySelector('select[name="stages"]');
    var micro = controls.querySelector('select[name="microbatches"]');
    var status = controls.querySelector(".gl-pipeline-status");
    var cells = Array.prototype.slice.call(lab.querySelectorAll(".gl-pipeline-cell"));

    function show() {
      var shown = null;
      cells.forEach(function (cell) {
        var match = cell.getAttribute("data-stages") === stages.value &&
          cell.getAttribute("data-microbatches") === micro.value;
        cell.hidden = !match;
        if (match) { shown = cell; }
      });
      if (status) {
        status.textContent = shown ? shown.getAttribute("data-status") :
          "No diagram was drawn for this choice.";
      }
    }

    stages.addEventListener("change", show);
    micro.addEventListener("change", show);
    controls.hidden = false;
    show();
  }

  function init() {
    Array.prototype.forEach.call(document.querySelectorAll(".gl-pipeline-lab"), setUp);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
}());
