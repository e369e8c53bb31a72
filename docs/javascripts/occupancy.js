/* The occupancy lab of lessons/inside-gpu.md.
 *
 * Fills each <div class="gl-occupancy" data-limits="..."> with inputs (compute capability,
 * threads per block, registers per thread, shared memory per block) and the warps that fit
 * on one SM. The per-SM limits are the cited ones of gpulesson/inside/gpu_limits.json,
 * written into data-limits at build time; the rules are gpulesson.inside.occupancy's
 * (cuda_occupancy.h: registers per warp rounded up to 256 in 4 sub-partitions, shared
 * memory plus the reserved 1 KiB rounded up to 128 bytes). No inline handlers: listeners
 * are attached here, as the Content-Security-Policy requires.
 */
(function () {
  "use strict";

  function roundUp(value, unit) { return Math.ceil(value / unit) * unit; }

  function occupancy(cc, threads, regs, shared) {
    var warps = Math.ceil(threads / cc.warpSize);
    var byWarps = Math.floor(cc.maxWarps / warps);
    var perWarp = roundUp(regs * cc.warpSize, cc.regUnit);
    var byRegs = cc.maxBlocks;
    if (perWarp > 0) {
      var assumed = perWarp * roundUp(warps, cc.subPartitions);
      if (Math.max(perWarp * warps, assumed) > cc.regsPerSm) {
        byRegs = 0;
      } else {
        var perSub = Math.floor(cc.regsPerSm / cc.subPartitions / perWarp);
        byRegs = Math.floor(perSub * cc.subPartitions / warps);
      }
    }
    var allocated = roundUp(shared + cc.reservedShared, cc.sharedUnit);
    var byShared = allocated === 0 ? cc.maxBlocks :
      (allocated > cc.sharedPerSm ? 0 : Math.floor(cc.sharedPerSm / allocated));
    var limits = [["warps", byWarps], ["blocks", cc.maxBlocks], ["registers", byRegs],
      ["shared memory", byShared]];
    var blocks = Math.min(byWarps, cc.maxBlocks, byRegs, byShared);
    var by = "";
    for (var i = 0; i < limits.length; i += 1) {
      if (limits[i][1] === blocks) { by = limits[i][0]; break; }
    }
    return { blocks: blocks, warps: blocks * warps, share: blocks * warps / cc.maxWarps, by: by };
  }

  function field(form, label, input) {
    var wrap = document.createElement("label");
    wrap.textContent = label + " ";
    wrap.appendChild(input);
    form.appendChild(wrap);
    form.appendChild(document.createTextNode(" "));
    return input;
  }

  function number(value, min, max, step) {
    var input = document.createElement("input");
    input.type = "number";
    input.value = String(value);
    input.min = String(min);
    input.max = String(max);
    input.step = String(step);
    return input;
  }

  function setup(box) {
    var table;
    try { table = JSON.parse(box.getAttribute("data-limits")); } catch (e) { return; }
    var names = Object.keys(table);
    if (!names.length) { return; }
    var form = document.createElement("form");
    form.className = "gl-occupancy-form";
    var select = document.createElement("select");
    names.forEach(function (name) {
      var option = document.createElement("option");
      option.value = name;
      option.textContent = name;
      if (name === "8.0") { option.selected = true; }
      select.appendChild(option);
    });
    field(form, "compute capability", select);
    var threads = field(form, "threads/block", number(256, 32, 1024, 32));
    var regs = field(form, "registers/thread", number(32, 0, 255, 1));
    var shared = field(form, "shared memory/block (KiB)", number(0, 0, 227, 1));
    var out = document.createElement("p");
    out.className = "gl-occupancy-result";
    out.setAttribute("aria-live", "polite");
    box.appendChild(form);
    box.appendChild(out);

    function update() {
      var cc = table[select.value];
      var t = Number(threads.value), r = Number(regs.value), s = Number(shared.value);
      var ok = Number.isInteger(t) && t >= 1 && t <= cc.maxThreadsPerBlock &&
        Number.isInteger(r) && r >= 0 && r <= cc.maxRegsPerThread &&
        isFinite(s) && s >= 0 && s * 1024 <= cc.sharedPerSm;
      if (!ok) {
        out.textContent = "Out of range: threads/block 1 to " + cc.maxThreadsPerBlock +
          ", registers/thread 0 to " + cc.maxRegsPerThread + ", shared memory 0 to " +
          Math.floor(cc.sharedPerSm / 1024) + " KiB.";
        return;
      }
      var o = occupancy(cc, t, r, Math.round(s * 1024));
      out.textContent = o.blocks + " blocks per SM, " + o.warps + " of " + cc.maxWarps +
        " warp slots: " + Math.round(o.share * 100) + "% occupancy, limited by " + o.by + ".";
    }
    form.addEventListener("input", update);
    form.addEventListener("submit", function (e) { e.preventDefault(); });
    update();
  }

  function init() {
    var boxes = document.querySelectorAll("div.gl-occupancy");
    for (var i = 0; i < boxes.length; i += 1) {
      if (!boxes[i].getAttribute("data-ready")) {
        boxes[i].setAttribute("data-ready", "1");
        setup(boxes[i]);
      }
    }
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
})();
