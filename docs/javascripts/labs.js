/* Interactive labs, quizzes and flashcards for the GPU course.
 *
 * Plain JavaScript, no dependencies, served from the site. Every number the
 * labs use comes from JSON written at build time by gpulesson/site/labs_hook.py
 * (assets/labs/*.json; routes and the dispatch script from docs/labs.yml, the example
 * rates from gpulesson/results/example_rates.json);
 * each quiz's questions are in its container's data-questions attribute; the
 * planner's formula is the one in gpulesson.memory.budget.
 * Each lab fills a container <div class="gl-lab" data-lab="NAME">; without
 * JavaScript the page still shows the static table printed next to it.
 */
(function () {
  "use strict";

  var cache = {};

  function baseUrl() {
    var cfg = document.getElementById("__config");
    var base = ".";
    if (cfg) {
      try { base = JSON.parse(cfg.textContent).base || "."; } catch (e) { base = "."; }
    }
    return base.replace(/\/$/, "");
  }

  function load(name) {
    if (!cache[name]) {
      cache[name] = fetch(baseUrl() + "/assets/labs/" + name + ".json").then(function (r) {
        if (!r.ok) { throw new Error("could not load " + name + ".json: HTTP " + r.status); }
        return r.json();
      });
    }
    return cache[name];
  }

  var uid = 0;
  function nextId(prefix) { uid += 1; return "gl-" + prefix + "-" + uid; }

  /* Quiz text is plain text with `code` spans, as in the static copy: text nodes and
   * <code> elements, never parsed as HTML. */
  function withCode(text) {
    return String(text).split("`").map(function (part, i) {
      return i % 2 ? el("code", { text: part }) : part;
    }).filter(function (part) { return part !== ""; });
  }

  /* el("div", {class: "x", text: "..."}, [children]) */
  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (key) {
      var value = attrs[key];
      if (value === null || value === undefined || value === false) { return; }
      if (key === "text") { node.textContent = value; }
      else if (key === "on") {
        Object.keys(value).forEach(function (ev) { node.addEventListener(ev, value[ev]); });
      } else { node.setAttribute(key, value === true ? "" : value); }
    });
    (children || []).forEach(function (c) {
      if (c !== null && c !== undefined) {
        node.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
      }
    });
    return node;
  }

  function field(label, input, hint) {
    var id = input.id || nextId("in");
    input.id = id;
    return el("div", { class: "gl-field" }, [
      el("label", { for: id, text: label }), input,
      hint ? el("span", { class: "gl-hint", text: hint }) : null
    ]);
  }

  function numberInput(value, attrs) {
    var a = Object.assign({ type: "number", value: String(value), inputmode: "decimal" }, attrs || {});
    return el("input", a);
  }

  function fmt(x, digits) {
    return Number(x).toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: 0 });
  }

  function fmtTime(s) {
    if (s >= 1) { return fmt(s, 2) + " s"; }
    if (s >= 1e-3) { return fmt(s * 1e3, 2) + " ms"; }
    return fmt(s * 1e6, 1) + " µs";
  }

  function out(name, text) { return el("output", { "data-out": name, text: text || "" }); }

  function badge(text) { return el("p", { class: "gl-badge", text: text }); }

  /* ---------------------------------------------------------------- race */

  function raceLab(box, all) {
    var d = all.race;
    var slider = el("input", { type: "range", min: "3", max: "13", step: "0.25", value: "9",
      "data-in": "log2n" });
    var nOut = out("n"); var flopsOut = out("flops");
    var cpuOut = out("cpu"); var gpuOut = out("gpu");
    var speedOut = out("speedup"); var winOut = out("winner");
    var cpuBar = el("div", { class: "gl-bar gl-bar-cpu" });
    var gpuBar = el("div", { class: "gl-bar gl-bar-gpu" });
    var runBtn = el("button", { type: "button", class: "md-button", text: "Run the race" });
    var n = 512;

    // The CPU's rate: the one the page measured (data-cpu-flop-per-s), else the teaching one.
    var cpuRate = Number(box.dataset.cpuFlopPerS);
    if (!(cpuRate > 0 && isFinite(cpuRate))) cpuRate = d.cpu_flop_per_s;

    function compute(size) {
      var flops = 2 * Math.pow(size, 3);
      return { flops: flops, cpu: flops / cpuRate, gpu: d.launch_s + flops / d.gpu_flop_per_s };
    }

    function update() {
      n = Math.round(Math.pow(2, Number(slider.value)));
      var r = compute(n);
      slider.setAttribute("aria-valuetext", "n = " + n);
      nOut.textContent = fmt(n, 0) + " × " + fmt(n, 0);
      flopsOut.textContent = r.flops.toExponential(2);
      cpuOut.textContent = fmtTime(r.cpu);
      gpuOut.textContent = fmtTime(r.gpu);
      var s = r.cpu / r.gpu;
      nOut.dataset.value = String(n);
      cpuOut.dataset.value = String(r.cpu);
      gpuOut.dataset.value = String(r.gpu);
      speedOut.dataset.value = String(s);
      speedOut.textContent = (s >= 10 ? fmt(s, 0) : s.toPrecision(2)) + "×";
      winOut.textContent = s > 1 ? "GPU wins" : "CPU wins: launch overhead dominates";
      var longest = Math.max(r.cpu, r.gpu);
      cpuBar.style.width = (100 * r.cpu / longest) + "%";
      gpuBar.style.width = (100 * r.gpu / longest) + "%";
      cpuBar.classList.remove("gl-run"); gpuBar.classList.remove("gl-run");
    }

    function run() {
      var r = compute(n);
      var longest = Math.max(r.cpu, r.gpu);
      [[cpuBar, r.cpu], [gpuBar, r.gpu]].forEach(function (pair) {
        var bar = pair[0];
        bar.classList.remove("gl-run");
        void bar.offsetWidth;
        bar.style.setProperty("--gl-run-s", (2 * pair[1] / longest) + "s");
        bar.classList.add("gl-run");
      });
    }

    slider.addEventListener("input", update);
    runBtn.addEventListener("click", run);
    box.appendChild(badge("Teaching simulation: a CPU at " + fmt(d.cpu_flop_per_s / 1e9, 0) +
      " GFLOP/s against a GPU at " + fmt(d.gpu_flop_per_s / 1e12, 2) + " TFLOP/s that pays " +
      fmtTime(d.launch_s) + " of launch overhead per call (a cited figure; the source lesson said " +
      fmtTime(d.source_launch_s) + "). Not a measurement."));
    box.appendChild(field("Matrix size (log₂ n)", slider));
    box.appendChild(el("dl", { class: "gl-results" }, [
      el("dt", { text: "matrix" }), el("dd", {}, [nOut]),
      el("dt", { text: "FLOPs (2n³)" }), el("dd", {}, [flopsOut]),
      el("dt", { text: "CPU" }), el("dd", {}, [cpuOut]),
      el("dt", { text: "GPU" }), el("dd", {}, [gpuOut]),
      el("dt", { text: "speedup" }), el("dd", {}, [speedOut])
    ]));
    box.appendChild(el("div", { class: "gl-track", "aria-hidden": "true" }, [
      el("span", { text: "CPU" }), el("div", { class: "gl-lane" }, [cpuBar]),
      el("span", { text: "GPU" }), el("div", { class: "gl-lane" }, [gpuBar])
    ]));
    box.appendChild(el("p", { class: "gl-verdict", "aria-live": "polite" }, [winOut]));
    box.appendChild(runBtn);
    update();
  }

  /* ---------------------------------------------------------------- cost */

  function costLab(box, all) {
    var d = all.cost;
    var select = el("select", { "data-in": "card" }, d.rates.map(function (r, i) {
      return el("option", { value: String(i), text: r.card_class + " · " + r.vram_gb + " GB" });
    }));
    /* The ranges come from labs.json (gpulesson.memory.cost.COST_LIMITS, which
       run_cost_usd enforces too): an empty, invalid or out-of-range input is refused,
       never read as $0, and no cost is ever Infinity or NaN. */
    var lim = d.limits;
    var hours = numberInput(3, { min: "0.1", max: String(lim.hours.maximum), step: "0.5", "data-in": "hours" });
    var runs = numberInput(10, { min: "1", max: String(lim.runs.maximum), step: "1", "data-in": "runs" });
    var onRate = numberInput(0, { min: "0", max: String(lim.rate.maximum), step: "0.05", "data-in": "on-rate" });
    var spotRate = numberInput(0, { min: "0", max: String(lim.rate.maximum), step: "0.05", "data-in": "spot-rate" });
    var onOut = out("on-demand"); var spotOut = out("spot"); var noteOut = out("note");

    function pickCard() {
      var r = d.rates[Number(select.value)];
      onRate.value = r.on_demand_usd_per_h.toFixed(2);
      spotRate.value = r.spot_usd_per_h.toFixed(2);
      update();
    }

    /* [value, null] for a number in the field's range, else [NaN, the refusal]. */
    function read(input, limit, label) {
      var text = String(input.value).trim();
      var v = Number(text);
      var range = (limit.above ? "above " : "from ") + limit.minimum + " to " + limit.stated;
      if (text === "" || !Number.isFinite(v)) { return [NaN, label + ": enter a number " + range + "."]; }
      if (limit.whole && !Number.isInteger(v)) { return [NaN, label + " " + text + " must be a whole number."]; }
      if (limit.above ? !(v > limit.minimum) : !(v >= limit.minimum)) {
        return [NaN, label + " " + text + " must be " + (limit.above ? "above " : "at least ") + limit.minimum + "."];
      }
      if (v > limit.maximum) {
        return [NaN, label + " " + text + " is too large: at most " + limit.stated + ", because " + limit.why + "."];
      }
      return [v, null];
    }

    function update() {
      var fields = [read(hours, lim.hours, "Hours per run"), read(runs, lim.runs, "Number of runs"),
        read(onRate, lim.rate, "On-demand rate ($/h)"), read(spotRate, lim.rate, "Spot rate ($/h)")];
      var refused = fields.filter(function (f) { return f[1]; })[0];
      if (refused) {
        noteOut.textContent = refused[1];
        [onOut, spotOut].forEach(function (o) { o.textContent = "–"; delete o.dataset.value; });
        return;
      }
      var h = fields[0][0]; var n = fields[1][0]; var a = fields[2][0]; var b = fields[3][0];
      var on = a * h * n; var spot = b * h * n;
      onOut.textContent = "$" + on.toFixed(2);
      spotOut.textContent = "$" + spot.toFixed(2);
      onOut.dataset.value = String(on);
      spotOut.dataset.value = String(spot);
      var saving = on >= spot
        ? "Spot saves $" + (on - spot).toFixed(2) + " if no run is interrupted. "
        : "Spot costs $" + (spot - on).toFixed(2) + " more at these rates. ";
      noteOut.textContent = saving +
        "Set a spending cap near $" + on.toFixed(0) + " before you start, and checkpoint every " +
        "run on spot so a preemption costs minutes, not the run.";
    }

    [hours, runs, onRate, spotRate].forEach(function (i) { i.addEventListener("input", update); });
    select.addEventListener("change", pickCard);
    box.appendChild(badge("Rates: " + d.source + ". Edit them to match a real quote."));
    box.appendChild(el("div", { class: "gl-grid" }, [
      field("Card class", select), field("Hours per run", hours), field("Number of runs", runs),
      field("On-demand rate ($/h)", onRate), field("Spot rate ($/h)", spotRate)
    ]));
    box.appendChild(el("dl", { class: "gl-results" }, [
      el("dt", { text: "on demand" }), el("dd", {}, [onOut]),
      el("dt", { text: "spot" }), el("dd", {}, [spotOut])
    ]));
    box.appendChild(el("p", { class: "gl-verdict", "aria-live": "polite" }, [noteOut]));
    pickCard();
  }

  /* ------------------------------------------------------------ dispatch */

  function dispatchLab(box, all) {
    var d = all.dispatch;
    var machine = d.machines[0].key;
    var step = 0;
    var groupName = nextId("dispatch");
    var group = el("fieldset", { class: "gl-radios" }, [el("legend", { text: "Machine" })]);
    d.machines.forEach(function (m, i) {
      var id = nextId("machine");
      var radio = el("input", { type: "radio", name: groupName, id: id, value: m.key,
        checked: i === 0, "data-in": "machine-" + m.key });
      radio.addEventListener("change", function () { machine = m.key; render(); });
      group.appendChild(el("div", {}, [radio, el("label", { for: id, text: m.label })]));
    });
    var listing = el("ol", { class: "gl-code" });
    var items = d.lines.map(function (line) {
      var li = el("li", {}, [el("code", { text: line.code })]);
      listing.appendChild(li);
      return li;
    });
    var result = el("div", { class: "gl-console", "aria-live": "polite", "data-out": "console" });
    var prev = el("button", { type: "button", class: "md-button", text: "Previous line" });
    var next = el("button", { type: "button", class: "md-button md-button--primary", text: "Run next line" });
    var reset = el("button", { type: "button", class: "md-button", text: "Start over" });

    function render() {
      items.forEach(function (li, i) {
        li.classList.toggle("gl-done", i < step);
        if (i === step - 1) { li.setAttribute("aria-current", "step"); } else { li.removeAttribute("aria-current"); }
      });
      result.textContent = "";
      for (var i = 0; i < step; i += 1) {
        var text = d.lines[i][machine];
        var failed = d.lines[i].errors[machine];
        result.appendChild(el("div", { class: failed ? "gl-err" : "gl-ok" }, [
          el("span", { class: "gl-prompt", text: ">>> " + d.lines[i].code }), el("br"),
          (failed ? "✗ " : "") + text
        ]));
      }
      if (step === 0) { result.textContent = "Press “Run next line” to execute line 1."; }
      prev.disabled = step === 0;
      next.disabled = step === d.lines.length;
    }

    prev.addEventListener("click", function () { step = Math.max(0, step - 1); render(); });
    next.addEventListener("click", function () { step = Math.min(d.lines.length, step + 1); render(); });
    reset.addEventListener("click", function () { step = 0; render(); });
    box.appendChild(badge("Outputs are what each line prints on an example machine of each kind; " +
      "error wording shifts a little between PyTorch versions."));
    box.appendChild(group);
    box.appendChild(listing);
    box.appendChild(el("div", { class: "gl-buttons" }, [prev, next, reset]));
    box.appendChild(result);
    render();
  }

  /* -------------------------------------------------------------- timing */

  function timingLab(box, all) {
    var teaching = all.timing;
    var measured = null;
    try { measured = box.dataset.measured ? JSON.parse(box.dataset.measured) : null; } catch (e) { measured = null; }
    var source = measured || teaching;
    var sync = el("input", { type: "checkbox", "data-in": "sync" });
    var syncId = nextId("sync"); sync.id = syncId;
    var start = el("button", { type: "button", class: "md-button md-button--primary", text: "Time the matmul" });
    var clockOut = out("stopwatch", "0 s"); var claimOut = out("claim"); var noteOut = out("note");
    var hostBar = el("div", { class: "gl-bar gl-bar-cpu" });
    var kernelBar = el("div", { class: "gl-bar gl-bar-gpu" });
    var timer = null;

    function reading() {
      return sync.checked ? source.launch_s + source.kernel_s : source.launch_s;
    }

    function finish() {
      var r = reading();
      clockOut.textContent = fmtTime(r);
      clockOut.dataset.value = String(r);
      var claim = source.cpu_s / r;
      claimOut.dataset.value = String(claim);
      claimOut.textContent = fmt(claim, 0) + "× faster than the CPU (" + fmt(source.cpu_s, 2) + " s)";
      noteOut.textContent = sync.checked
        ? "The clock waited for the kernel: this is the work, not the launch."
        : "The clock stopped when the launch returned; the kernel was still running. " +
          "Tick the box to wait for it.";
    }

    function run() {
      if (timer) { clearInterval(timer); }
      var total = source.launch_s + source.kernel_s;
      var stopAt = reading();
      hostBar.style.width = (100 * stopAt / total) + "%";
      kernelBar.style.marginLeft = (100 * source.launch_s / total) + "%";
      kernelBar.style.width = (100 * source.kernel_s / total) + "%";
      var scale = 1500 / total; /* the animation runs 1.5 s for the whole kernel */
      var t0 = performance.now();
      timer = setInterval(function () {
        var simulated = (performance.now() - t0) / scale;
        if (simulated >= stopAt) { clearInterval(timer); timer = null; finish(); return; }
        clockOut.textContent = fmtTime(simulated);
      }, 30);
    }

    sync.addEventListener("change", function () { claimOut.textContent = ""; noteOut.textContent = ""; clockOut.textContent = "0 s"; });
    start.addEventListener("click", run);
    box.appendChild(badge(measured
      ? "Measured on this site's build GPU: " + (measured.label || "")
      : "Teaching numbers: CPU " + fmtTime(teaching.cpu_s) + " (the source's example), kernel " +
        fmtTime(teaching.kernel_s) + " (" + teaching.kernel_basis + "), launch " +
        fmtTime(teaching.launch_s) + " (a cited figure; the source said " +
        fmtTime(teaching.source_launch_s) + "). Not a measurement."));
    box.appendChild(el("div", { class: "gl-field gl-check" }, [sync,
      el("label", { for: syncId }, ["Call ", el("code", { text: "torch.cuda.synchronize()" }),
        " before stopping the clock"])]));
    box.appendChild(start);
    box.appendChild(el("div", { class: "gl-track", "aria-hidden": "true" }, [
      el("span", { text: "clock" }), el("div", { class: "gl-lane" }, [hostBar]),
      el("span", { text: "kernel" }), el("div", { class: "gl-lane" }, [kernelBar])
    ]));
    box.appendChild(el("dl", { class: "gl-results" }, [
      el("dt", { text: "stopwatch" }), el("dd", {}, [clockOut]),
      el("dt", { text: "you would report" }), el("dd", {}, [claimOut])
    ]));
    box.appendChild(el("p", { class: "gl-verdict", "aria-live": "polite" }, [noteOut]));
  }

  /* ---------------------------------------------------------------- quiz */

  /* The questions come in the container's data-questions attribute, filled in at build
     time (a question may carry numbers this build computed). A lesson's quiz may have
     several containers with the same data-quiz: the one at the end of the page, and one
     per predict-then-reveal question (data-predict), which the build placed right before
     the block that computes its answer. They share one score, shown at the end. */
  function quiz(box, state) {
    var questions = JSON.parse(box.dataset.questions || "[]");
    var predict = box.hasAttribute("data-predict");
    questions.forEach(function (q, qi) {
      var legendId = nextId("q");
      var label = predict ? "Predict " : String(qi + 1).padStart(2, "0") + " ";
      var fs = el("fieldset", { class: "gl-question" }, [
        el("legend", { id: legendId }, [el("span", { class: "gl-qnum", text: label })].concat(withCode(q.prompt)))
      ]);
      var done = false;
      var buttons = q.options.map(function (o, oi) {
        var why = el("span", { class: "gl-why", hidden: true }, withCode(o.why));
        var b = el("button", { type: "button", class: "gl-option", "data-option": String(oi) }, [
          el("span", { class: "gl-option-text" }, [String.fromCharCode(65 + oi) + ". "].concat(withCode(o.text))), why
        ]);
        b.addEventListener("click", function () {
          b.classList.add("gl-picked");
          b.setAttribute("aria-pressed", "true");
          if (!done) {
            done = true; state.answered += 1;
            if (o.correct) { state.correct += 1; }
            state.show();
          }
          buttons.forEach(function (other, k) {
            other.classList.toggle("gl-right", q.options[k].correct);
            other.classList.toggle("gl-wrong", !q.options[k].correct);
            other.querySelector(".gl-why").hidden = false;
            var verdict = q.options[k].correct ? "Right: " : "Wrong: ";
            other.querySelector(".gl-why").replaceChildren.apply(
              other.querySelector(".gl-why"), [verdict].concat(withCode(q.options[k].why)));
          });
        });
        return b;
      });
      buttons.forEach(function (b) { fs.appendChild(b); });
      box.appendChild(fs);
    });
    if (!predict) {
      var score = el("p", { class: "gl-score", "aria-live": "polite", "data-out": "score" });
      state.scores.push(score);
      box.appendChild(score);
    }
    var stat = box.nextElementSibling;
    if (stat && stat.classList.contains("gl-quiz-static")) { stat.hidden = true; }
  }

  /* One shared score per lesson quiz: every container with that data-quiz counts. */
  function quizzes() {
    var groups = {};
    document.querySelectorAll(".gl-quiz[data-quiz]").forEach(function (box) {
      (groups[box.dataset.quiz] = groups[box.dataset.quiz] || []).push(box);
    });
    Object.keys(groups).forEach(function (name) {
      var boxes = groups[name];
      var state = { answered: 0, correct: 0, total: 0, scores: [] };
      state.show = function () {
        state.scores.forEach(function (score) {
          score.textContent = state.answered + " / " + state.total + " answered · " + state.correct + " correct";
        });
      };
      boxes.forEach(function (box) {
        try { state.total += JSON.parse(box.dataset.questions || "[]").length; } catch (e) { /* quiz() reports it */ }
      });
      boxes.forEach(function (box) {
        try { quiz(box, state); box.dataset.ready = "2"; } catch (e) { fail(box, e); }
      });
      state.show();
    });
  }

  /* ---------------------------------------------------------- flashcards */

  function flashcards(box, terms) {
    var grid = el("div", { class: "gl-cards" });
    terms.forEach(function (t) {
      var face = el("span", { class: "gl-face" });
      var card = el("button", { type: "button", class: "gl-card", "aria-pressed": "false",
        "data-term": t.name }, [face]);
      function show() {
        var flipped = card.getAttribute("aria-pressed") === "true";
        face.textContent = "";
        face.appendChild(el("strong", { text: t.name }));
        face.appendChild(el("span", { class: "gl-card-kind", text: flipped ? "what it really means" : "the lazy version" }));
        face.appendChild(el("span", { class: "gl-card-body", text: flipped ? t.expansion + ". " + t.meaning : "“" + t.lazy + "”" }));
      }
      card.addEventListener("click", function () {
        card.setAttribute("aria-pressed", card.getAttribute("aria-pressed") === "true" ? "false" : "true");
        card.classList.remove("gl-flip"); void card.offsetWidth; card.classList.add("gl-flip");
        show();
      });
      show();
      grid.appendChild(card);
    });
    box.appendChild(grid);
    var stat = box.nextElementSibling;
    if (stat && stat.classList.contains("gl-cards-static")) { stat.hidden = true; }
  }

  /* ------------------------------------------------------------- planner */

  /* The planner evaluates gpulesson.memory's own tables (planner.json, written at build by
     gpulesson.memory.planner.planner_data): the recipes' bytes per parameter, the terms
     (sums of monomials) and the phase points of gpulesson.memory.terms, in the order
     gpulesson.memory.budget.estimate evaluates them. No formula of its own: the browser
     test compares it with estimate() on many inputs. No gradient accumulation, the
     per-tensor optimizer, the standard loss. Across GPUs it divides by the GPU count what
     planner.json's zero_sharded table names (gpulesson.memory.budget.ZERO_SHARDED) and sums
     the collectives of planner.json's comm table (read off gpulesson.memory.comm.step_comm):
     round(share x message x times) each, rounded half to even as Python's round(). */

  function roundHalfEven(v) {
    var f = Math.floor(v);
    var d = v - f;
    if (d !== 0.5) { return d < 0.5 ? f : f + 1; }
    return f % 2 === 0 ? f : f + 1;
  }

  /* The conditions of the shape's parameter table (gpulesson.memory.shape.conditions). */
  function shapeConditions(x) {
    var c = {};
    c[x.gated ? "gated_mlp" : "plain_mlp"] = true;
    c[x.tied_head === false ? "untied_head" : "tied_head"] = true;
    if (x.learned_positions !== false) { c.learned_positions = true; }
    return c;
  }

  function shapeSizes(x) {
    var kv = x.kv_heads ? x.kv_heads : x.heads;
    return { vocab: x.vocab, seq: x.sequence, hidden: x.hidden,
      kv_hidden: kv * (x.hidden / x.heads), ffn: x.ffn ? x.ffn : 4 * x.hidden, layers: x.layers };
  }

  /* The shape's parameter count: planner.json's model_parameters table, evaluated. */
  function shapeParameters(data, x) {
    return Math.trunc(monomialsBytes(data.model_parameters.options[0], shapeSizes(x), shapeConditions(x)));
  }

  function holds(when, conditions) {
    return when.every(function (c) { return conditions[c] === true; });
  }

  function monomialsBytes(option, sizes, conditions) {
    var total = 0;
    option.forEach(function (m) {
      if (!holds(m.when, conditions)) { return; }
      var v = m.coefficient;
      m.sizes.forEach(function (name) { v *= sizes[name]; });
      total += v;
    });
    return total;
  }

  function evaluateTerms(data, sizes, conditions) {
    var values = {};
    data.terms.forEach(function (term) {
      var best = 0;
      term.options.forEach(function (option) {
        best = Math.max(best, monomialsBytes(option, sizes, conditions));
      });
      if (term.scale !== null && best) { best = sizes[term.scale] * best; }
      values[term.name] = best;
    });
    return values;
  }

  function useBytes(uses, values, layers, done) {
    var total = 0;
    uses.forEach(function (u) {
      total += (u.times + u.per_layer * layers + u.per_done * done) * values[u.term];
    });
    return Math.trunc(total);
  }

  function pointBytes(p, values, layers, done) {
    var lines = p.alive.map(function (line) { return [line[0], useBytes(line[1], values, layers, done)]; });
    var total = lines.reduce(function (sum, line) { return sum + line[1]; }, 0);
    return { phase: p.phase, label: p.label, lines: lines, total: total };
  }

  /* Each phase's largest point (the first of equals); a run of per-block points loops
     over the blocks outside, as gpulesson.memory.terms.evaluate_points does. */
  function phasePeaks(points, values, conditions, layers) {
    var active = points.filter(function (p) { return holds(p.when, conditions); });
    var peaks = {};
    var order = [];
    function offer(b) {
      if (!(b.phase in peaks)) { order.push(b.phase); peaks[b.phase] = b; }
      else if (b.total > peaks[b.phase].total) { peaks[b.phase] = b; }
    }
    for (var i = 0; i < active.length;) {
      if (!active[i].each_block) { offer(pointBytes(active[i], values, layers, 0)); i += 1; continue; }
      var run = [];
      while (i < active.length && active[i].each_block) { run.push(active[i]); i += 1; }
      for (var done = 0; done < layers; done += 1) {
        run.forEach(function (p) { offer(pointBytes(p, values, layers, done)); });
      }
    }
    return order.map(function (name) { return peaks[name]; });
  }

  /* plan() evaluates nothing outside the package's limits: a count past its maximum (layers
     1e300 would loop for ever) throws at once, as estimate() raises. */
  var PLAN_COUNTS = { batch: "batch", sequence: "seq", vocab: "vocab", hidden: "hidden",
    heads: "heads", layers: "layers" };
  var PLAN_OPTIONAL = { kv_heads: "kv_heads", ffn: "ffn" };

  function plan(data, x) {
    Object.keys(PLAN_COUNTS).forEach(function (name) {
      var limit = data.limits[PLAN_COUNTS[name]];
      var v = x[name];
      if (!(Number.isInteger(v) && v >= limit.minimum && v <= limit.maximum)) {
        throw new RangeError(PLAN_COUNTS[name] + "=" + v + " must be a whole number from " +
          limit.minimum + " to " + limit.stated);
      }
    });
    Object.keys(PLAN_OPTIONAL).forEach(function (name) {
      var limit = data.limits[PLAN_OPTIONAL[name]];
      var v = x[name];
      if (v !== undefined && v !== null && !(Number.isInteger(v) && v >= limit.minimum && v <= limit.maximum)) {
        throw new RangeError(name + "=" + v + " must be a whole number from " + limit.minimum + " to " + limit.stated);
      }
    });
    var gpus = x.gpus || 1;
    var zero = x.zero || 0;
    var tp = x.tp || 1;
    var pp = x.pp || 1;
    var mp = tp * pp;
    var sharded = data.zero_sharded[String(zero)];
    /* a replica's share (tensor x pipeline parallel), then ZeRO's over the data-parallel GPUs */
    function replica(name, value) { return data.model_parallel_sharded.indexOf(name) >= 0 ? value / mp : value; }
    function share(name, value) {
      var v = replica(name, value);
      return sharded.indexOf(name) >= 0 ? v / gpus : v;
    }
    var r = data.recipes[x.recipe];
    var params = Math.round(x.params);
    var trainable = r.adapters ? Math.round(params * x.fraction) : (r.inference ? 0 : params);
    var opt = r.inference ? null : (x.optimizer || r.optimizer_default);
    var stateBytes = opt ? r.optimizer[opt] : 0;
    var states = opt ? r.states[opt] : 0;
    var wholeGradients = trainable * r.gradients;
    var wholeWeights = params * r.weights + trainable * r.adapter_weights;
    var gradients = share("gradients", wholeGradients);
    var persistent = [
      ["weights", Math.trunc(share("weights", wholeWeights))],
      ["master weights", Math.trunc(share("master", trainable * r.master))],
      ["optimizer state", Math.trunc(share("optimizer", trainable * stateBytes))]
    ];
    var shaped = shapeSizes(x);
    /* tensor parallelism's activation all-reduces per micro-batch, on this GPU's layers */
    var tpSent = null;
    if (tp > 1) {
      var calls = data.tensor_parallel_all_reduces_per_layer * (x.layers / pp);
      tpSent = roundHalfEven(calls * (data.comm.share["all-reduce"][String(tp)] *
        (x.batch * x.sequence * x.hidden * r.compute_bytes)));
    }
    var sizes = {
      batch: x.batch, seq: x.sequence, hidden: x.hidden, heads: x.heads, kv_hidden: shaped.kv_hidden,
      ffn: shaped.ffn, vocab: x.vocab, layers: x.layers, dtype: r.compute_bytes,
      slice_tokens: x.batch * x.sequence, gradient_bytes: gradients, trainable: trainable,
      state_value_bytes: stateBytes / Math.max(states, 1)
    };
    /* the gradients spread over the shape's own parameter count */
    sizes.grad_per_param = gradients / shapeParameters(data, x);
    /* bytes one GPU sends per optimizer step (none for inference) */
    var sent = null;
    if (!r.inference) {
      var messages = { gradients: replica("gradients", wholeGradients),
        parameters: replica("weights", wholeWeights),
        updated: trainable * (r.adapters ? r.compute_bytes : r.weights) / mp };
      sent = 0;
      data.comm.stages[String(zero)].forEach(function (c) {
        sent += roundHalfEven(data.comm.share[c.collective][String(gpus)] * messages[c.tensor] * c.times);
      });
    }
    var conditions = {};
    [x.attention, x.checkpointing === "full" ? "checkpointing" : "no_checkpointing", "standard_loss",
      "single_micro_batch", "per_tensor", states > 0 ? "has_state" : "no_state",
      trainable === params ? "full_training" : "partial_training",
      r.inference ? "inference" : "training"].forEach(function (c) { conditions[c] = true; });
    var values = evaluateTerms(data, sizes, conditions);
    var phases = phasePeaks(r.inference ? data.points.inference : data.points.training, values,
      conditions, x.layers);
    var persistentTotal = persistent.reduce(function (sum, line) { return sum + line[1]; }, 0);
    var peak = phases[0];
    phases.forEach(function (p) { if (p.total >= peak.total) { peak = p; } }); /* ties: the later */
    var alive = {};
    persistent.concat(peak.lines).forEach(function (line) { alive[line[0]] = line[1]; });
    var total = persistentTotal + peak.total;
    var head = data.headroom;
    var needed = Math.trunc((total + head.cuda_context_bytes) / (1 - head.allocator_slack_fraction));
    return {
      phase: peak.phase, point: peak.label,
      weights: alive.weights || 0, master: alive["master weights"] || 0,
      optimizer: alive["optimizer state"] || 0, gradients: alive.gradients || 0,
      activations: alive.activations || 0, temporaries: alive.temporaries || 0,
      kv_cache: alive["KV cache"] || 0,
      total: total, needed: needed, sent: sent, tp_sent: tpSent, parameters: params,
      shape_parameters: shapeParameters(data, x),
      fits: data.cards_bytes.map(function (c) { return needed <= c; }),
      card_fits: data.datasheet_cards.map(function (c) { return needed <= c.memory_bytes; })
    };
  }

  var PLANNER_KEYS = ["weights", "master", "optimizer", "gradients", "activations", "temporaries", "kv_cache"];
  var PLANNER_LABELS = ["weights", "master weights", "optimizer state", "gradients", "activations",
    "temporaries", "KV cache"];

  function planner(box, data) {
    var names = Object.keys(data.recipes);
    var recipe = el("select", { "data-in": "recipe" }, names.map(function (n) {
      return el("option", { value: n, text: n, selected: n === data.default_preset });
    }));
    var optNames = Object.keys(data.recipes[names[0]].optimizer);
    var optimizer = el("select", { "data-in": "optimizer" }, optNames.map(function (n) {
      return el("option", { value: n, text: n });
    }));
    var attention = el("select", { "data-in": "attention" }, ["sdpa", "eager"].map(function (n) {
      return el("option", { value: n, text: n });
    }));
    var params = el("input", { type: "range", min: "0.1", max: "70", step: "0.1", value: "7", "data-in": "params" });
    /* Each count's range comes from planner.json (gpulesson.memory.shape.COUNT_LIMITS, the
       limits estimate() and gpulesson budget enforce); nothing is evaluated outside it. */
    function countInput(value, name, key) {
      var limit = data.limits[key];
      return numberInput(value, { min: String(limit.minimum), max: String(limit.maximum),
        step: "1", "data-in": name });
    }
    var batch = countInput(1, "batch", "batch");
    var sequence = countInput(512, "sequence", "seq");
    var vocab = countInput(32000, "vocab", "vocab");
    var hidden = countInput(4096, "hidden", "hidden");
    var heads = countInput(32, "heads", "heads");
    var layers = countInput(32, "layers", "layers");
    /* Empty: one key/value head per head, and GPT-2's 4 x hidden MLP. */
    var kvHeads = countInput("", "kv_heads", "kv_heads"); kvHeads.placeholder = "= heads";
    var ffn = countInput("", "ffn", "ffn"); ffn.placeholder = "4 × hidden";
    var OPTIONAL = [kvHeads, ffn];
    function optional(input) { return String(input.value).trim() === "" ? null : Number(input.value); }
    var COUNTS = [[batch, "batch", "Batch size"], [sequence, "seq", "Sequence length"],
      [vocab, "vocab", "Vocabulary"], [hidden, "hidden", "Hidden size"],
      [heads, "heads", "Attention heads"], [layers, "layers", "Layers"],
      [kvHeads, "kv_heads", "Key/value heads"], [ffn, "ffn", "MLP width"]];
    function check(name, text) { return el("input", { type: "checkbox", "data-in": name, id: nextId(name) }); }
    var gated = check("gated"); var untied = check("untied_head"); var positions = check("learned_positions");
    positions.checked = true;
    var fromShape = check("params_from_shape");
    var preset = el("select", { "data-in": "model" }, [el("option", { value: "", text: "your own shape" })].concat(
      data.presets.map(function (m) { return el("option", { value: m.id, text: m.label }); })));
    var presetSource = el("p", { class: "gl-hint", "data-out": "preset-source" });
    var gpus = el("select", { "data-in": "gpus" }, data.gpu_counts.map(function (n) {
      return el("option", { value: String(n), text: String(n) });
    }));
    var zero = el("select", { "data-in": "zero" }, ["0", "1", "2", "3"].map(function (n) {
      return el("option", { value: n, text: n + (n === "0" ? " (no sharding)" : n === "3" ? " (FSDP)" : "") });
    }));
    function degrees(name) {
      return el("select", { "data-in": name }, data.parallel_degrees.map(function (n) {
        return el("option", { value: String(n), text: String(n) });
      }));
    }
    var tpIn = degrees("tp"); var ppIn = degrees("pp");
    var tpOut = out("tp-sent"); var allGpusOut = out("all-gpus");
    var card = el("select", { "data-in": "card" }, data.datasheet_cards.map(function (c) {
      return el("option", { value: c.id, text: c.name + " (" + c.memory_stated_gb + " GB)", selected: c.id === "h100-sxm" });
    }));
    var sentOut = out("sent"); var cardOut = out("card-verdict"); var errorOut = out("error-range");
    var datasheetCards = el("ul", { class: "gl-cardlist", "data-out": "datasheet-cards" });
    var ckpt = el("input", { type: "checkbox", "data-in": "checkpointing", id: nextId("ckpt") });
    var fraction = numberInput(data.default_trainable_fraction * 100, { min: "0.01", max: "100", step: "0.05", "data-in": "fraction" });
    var paramsOut = out("params");
    var totalOut = out("total"); var neededOut = out("needed"); var phaseOut = out("phase");
    var refusalOut = el("p", { class: "gl-verdict", role: "alert", "data-out": "refusal" });
    var stack = el("div", { class: "gl-stack", role: "img", "aria-label": "memory one GPU holds at the peak, by term" });
    var legendOuts = PLANNER_KEYS.map(function (k) { return out(k); });
    var legend = el("ul", { class: "gl-legend" }, PLANNER_KEYS.map(function (k, i) {
      var key = el("span", { class: "gl-key gl-key-" + i, "aria-hidden": "true" });
      return el("li", {}, [key, PLANNER_LABELS[i] + ": ", legendOuts[i]]);
    }));
    var cards = el("ul", { class: "gl-cardlist", "aria-live": "polite", "data-out": "cards" });

    function shown(text) { return text.length <= 20 ? text : text.slice(0, 12) + "…(" + text.length + " characters)"; }

    /* The refusal for a count outside its range (the same wording as gpulesson budget),
       or null when it is a whole number from 1 to its maximum. */
    function countRefusal(input, key, label) {
      var limit = data.limits[key];
      var text = String(input.value).trim();
      var v = Number(text);
      if (text === "" || !Number.isFinite(v)) {
        return label + ": enter a whole number from 1 to " + limit.stated + ".";
      }
      if (!Number.isInteger(v) || v < limit.minimum) {
        return label + " " + shown(text) + " must be a positive whole number.";
      }
      if (v > limit.maximum) {
        return label + " " + shown(text) + " is too large: at most " + limit.stated +
          ", because " + limit.why + ".";
      }
      return null;
    }

    function refusal() {
      for (var i = 0; i < COUNTS.length; i += 1) {
        if (OPTIONAL.indexOf(COUNTS[i][0]) >= 0 && optional(COUNTS[i][0]) === null) { continue; }
        var r = countRefusal(COUNTS[i][0], COUNTS[i][1], COUNTS[i][2]);
        if (r) { return r; }
      }
      var share = Number(fraction.value) / 100;
      if (!fraction.disabled && !(String(fraction.value).trim() !== "" && share > 0 && share <= 1)) {
        return "Trainable share: enter a share above 0 and at most 100 %.";
      }
      if (Number(hidden.value) % Number(heads.value) !== 0) {
        return "Attention heads " + heads.value + " must divide the hidden size " + hidden.value + ".";
      }
      if (optional(kvHeads) !== null && Number(heads.value) % Number(kvHeads.value) !== 0) {
        return "Key/value heads " + kvHeads.value + " must divide the attention heads " + heads.value +
          ": each key/value head serves a whole group of attention heads.";
      }
      if (Number(heads.value) % Number(tpIn.value) !== 0) {
        return "Tensor-parallel degree " + tpIn.value + " must divide the attention heads " + heads.value +
          ": each GPU takes whole attention heads.";
      }
      if (Number(layers.value) % Number(ppIn.value) !== 0) {
        return "Pipeline-parallel degree " + ppIn.value + " must divide the layers " + layers.value +
          ": each stage takes the same number of whole layers.";
      }
      if (zero.value !== "0" && gpus.value === "1") {
        return "ZeRO stage " + zero.value + " shards across GPUs: pick 2 or more GPUs.";
      }
      return null;
    }

    function shapeInputs() {
      return { vocab: Number(vocab.value), sequence: Number(sequence.value), hidden: Number(hidden.value),
        heads: Number(heads.value), layers: Number(layers.value), kv_heads: optional(kvHeads),
        ffn: optional(ffn), gated: gated.checked, tied_head: !untied.checked,
        learned_positions: positions.checked };
    }

    function inputs() {
      var x = shapeInputs();
      return { params: fromShape.checked && !refusal() ? shapeParameters(data, x) : Number(params.value) * 1e9,
        recipe: recipe.value, kv_heads: x.kv_heads, ffn: x.ffn, gated: x.gated,
        tied_head: x.tied_head, learned_positions: x.learned_positions,
        gpus: Number(gpus.value), zero: Number(zero.value), tp: Number(tpIn.value), pp: Number(ppIn.value),
        optimizer: optimizer.disabled ? null : optimizer.value, attention: attention.value,
        batch: Number(batch.value), sequence: Number(sequence.value), vocab: Number(vocab.value),
        hidden: Number(hidden.value), heads: Number(heads.value), layers: Number(layers.value),
        checkpointing: ckpt.checked ? "full" : "none", fraction: Number(fraction.value) / 100 };
    }

    /* An invalid input leaves no number behind: every result is cleared, the refusal shown. */
    function clearResults() {
      [totalOut, neededOut, phaseOut, sentOut, cardOut, tpOut, allGpusOut].concat(legendOuts).forEach(function (o) {
        o.textContent = "–"; delete o.dataset.value;
      });
      stack.textContent = "";
      cards.textContent = "";
      datasheetCards.textContent = "";
    }

    function presetChanged() {
      var m = data.presets.filter(function (p) { return p.id === preset.value; })[0];
      presetSource.textContent = "";
      if (m) {
        vocab.value = String(m.vocab); sequence.value = String(m.seq); hidden.value = String(m.hidden);
        heads.value = String(m.heads); kvHeads.value = String(m.kv_heads); layers.value = String(m.layers);
        ffn.value = String(m.ffn); gated.checked = m.gated; untied.checked = !m.tied_head;
        positions.checked = m.learned_positions; fromShape.checked = true;
        presetSource.appendChild(document.createTextNode("Shape from "));
        presetSource.appendChild(el("a", { href: m.source, text: m.source }));
        presetSource.appendChild(document.createTextNode(" (the checkpoint has " + m.cited_parameters.toLocaleString("en-US") +
          " parameters; this shape model counts " + m.parameters.toLocaleString("en-US") + ")."));
      }
      update();
    }

    function recipeChanged() {
      var r = data.recipes[recipe.value];
      optimizer.disabled = r.inference;
      if (!r.inference) { optimizer.value = r.optimizer_default; }
      fraction.disabled = !r.adapters;
      update();
    }

    function update() {
      var x = inputs();
      params.disabled = fromShape.checked;
      paramsOut.textContent = fmt(x.params / 1e9, 2) + " billion parameters" + (fromShape.checked ? " (counted from the shape)" : "");
      paramsOut.dataset.value = String(x.params);
      params.setAttribute("aria-valuetext", paramsOut.textContent);
      var refused = refusal();
      if (refused) { clearResults(); refusalOut.textContent = refused; return; }
      refusalOut.textContent = "";
      var p = plan(data, x);
      var scale = Math.max(p.total, data.cards_bytes[data.cards_bytes.length - 1]);
      stack.textContent = "";
      PLANNER_KEYS.forEach(function (k, i) {
        legendOuts[i].textContent = fmt(p[k] / 1e9, 1) + " GB";
        legendOuts[i].dataset.value = String(p[k]);
        stack.appendChild(el("div", { class: "gl-seg gl-seg-" + i, style: "width:" + (100 * p[k] / scale) + "%" }));
      });
      phaseOut.textContent = p.phase + " (" + p.point + ")";
      phaseOut.dataset.value = p.phase;
      totalOut.textContent = fmt(p.total / 1e9, 1) + " GB";
      totalOut.dataset.value = String(p.total);
      neededOut.textContent = fmt(p.needed / 1e9, 1) + " GB with the CUDA context and allocator slack";
      neededOut.dataset.value = String(p.needed);
      if (p.sent === null) { sentOut.textContent = "none: inference has no optimizer step"; delete sentOut.dataset.value; }
      else { sentOut.textContent = fmt(p.sent / 1e9, 2) + " GB per GPU per step"; sentOut.dataset.value = String(p.sent); }
      allGpusOut.textContent = String(x.gpus * x.tp * x.pp) + " (data " + x.gpus + " × tensor " + x.tp + " × pipeline " + x.pp + ")";
      allGpusOut.dataset.value = String(x.gpus * x.tp * x.pp);
      if (p.tp_sent === null) { tpOut.textContent = "none (tensor-parallel degree 1)"; delete tpOut.dataset.value; }
      else { tpOut.textContent = fmt(p.tp_sent / 1e9, 2) + " GB per GPU per micro-batch, on the critical path"; tpOut.dataset.value = String(p.tp_sent); }
      var chosen = data.datasheet_cards.map(function (c) { return c.id; }).indexOf(card.value);
      cardOut.textContent = data.datasheet_cards[chosen].name + ": " + (p.card_fits[chosen] ? "fits" : "too small");
      cardOut.dataset.value = p.card_fits[chosen] ? "yes" : "no";
      datasheetCards.textContent = "";
      data.datasheet_cards.forEach(function (c, i) {
        datasheetCards.appendChild(el("li", { class: p.card_fits[i] ? "gl-fits" : "gl-nofit", "data-card-id": c.id,
          "data-fits": p.card_fits[i] ? "yes" : "no" }, [c.name + " (" + c.memory_stated_gb + " GB): " + (p.card_fits[i] ? "fits" : "too small")]));
      });
      cards.textContent = "";
      data.cards_bytes.forEach(function (c, i) {
        cards.appendChild(el("li", { class: p.fits[i] ? "gl-fits" : "gl-nofit", "data-card": String(c),
          "data-fits": p.fits[i] ? "yes" : "no" }, [fmt(c / 1e9, 0) + " GB: " + (p.fits[i] ? "fits" : "too small")]));
      });
    }

    [params, batch, sequence, vocab, hidden, heads, layers, kvHeads, ffn, fraction].forEach(function (i) { i.addEventListener("input", update); });
    [optimizer, attention, ckpt, gated, untied, positions, fromShape, gpus, zero, tpIn, ppIn, card].forEach(function (i) { i.addEventListener("change", update); });
    preset.addEventListener("change", presetChanged);
    if (data.accuracy) {
      errorOut.textContent = "measured error: within ±" + fmt(data.accuracy.max_abs_error_pct, 1) + " % (the largest of " +
        data.accuracy.source + ")";
      errorOut.dataset.value = String(data.accuracy.max_abs_error_pct);
    } else {
      errorOut.textContent = "measured error: not measured in this build";
    }
    recipe.addEventListener("change", recipeChanged);
    box.appendChild(badge("Computed in your browser from gpulesson.memory's own term tables (planner.json, " +
      "written at build): the same terms and phases as gpulesson budget, per GPU. GB = 10⁹ bytes. " +
      "The bar is what one GPU holds at the step's peak."));
    box.appendChild(field("Model preset", preset));
    box.appendChild(presetSource);
    box.appendChild(field("Model size (billions of parameters)", params));
    box.appendChild(el("div", { class: "gl-field gl-check" }, [fromShape,
      el("label", { for: fromShape.id, text: "Count the parameters from the shape below" })]));
    box.appendChild(el("p", { class: "gl-hint" }, [paramsOut]));
    box.appendChild(el("div", { class: "gl-grid" }, [
      field("Precision recipe", recipe), field("Optimizer", optimizer),
      field("Batch size", batch), field("Sequence length", sequence),
      field("Vocabulary", vocab), field("Hidden size", hidden),
      field("Attention heads", heads), field("Layers", layers),
      field("Key/value heads", kvHeads), field("MLP width", ffn),
      field("Attention", attention),
      field("Trainable share for LoRA/QLoRA (%)", fraction),
      field("GPUs", gpus), field("ZeRO stage", zero),
      field("Tensor-parallel degree", tpIn), field("Pipeline-parallel degree", ppIn), field("Card", card)
    ]));
    [[gated, "Gated MLP (SwiGLU: three matrices, no biases)"], [untied, "Output head of its own (untied)"],
      [positions, "Learned position table (GPT-2; off for rotary positions)"]].forEach(function (pair) {
      box.appendChild(el("div", { class: "gl-field gl-check" }, [pair[0], el("label", { for: pair[0].id, text: pair[1] })]));
    });
    box.appendChild(el("div", { class: "gl-field gl-check" }, [ckpt,
      el("label", { for: ckpt.id, text: "Gradient checkpointing (keep one tensor per layer, recompute the rest)" })]));
    box.appendChild(el("p", { class: "gl-hint", text: "GPUs counts the data-parallel GPUs; tensor and pipeline " +
      "parallelism spread the parameter-sized terms over their product (a model). Activations follow GPT-2's " +
      "block on one GPU: an upper bound under tensor and pipeline parallelism, a model for other shapes." }));
    box.appendChild(stack);
    box.appendChild(legend);
    box.appendChild(el("dl", { class: "gl-results" }, [
      el("dt", { text: "peak" }), el("dd", {}, [phaseOut]),
      el("dt", { text: "total per GPU at the peak" }), el("dd", {}, [totalOut, " ", errorOut]),
      el("dt", { text: "a card needs" }), el("dd", {}, [neededOut]),
      el("dt", { text: "GPUs in all" }), el("dd", {}, [allGpusOut]),
      el("dt", { text: "bytes sent per step" }), el("dd", {}, [sentOut]),
      el("dt", { text: "tensor-parallel all-reduces" }), el("dd", {}, [tpOut]),
      el("dt", { text: "the chosen card" }), el("dd", {}, [cardOut])
    ]));
    box.appendChild(refusalOut);
    box.appendChild(cards);
    box.appendChild(el("p", { class: "gl-hint", text: "Every datasheet card:" }));
    box.appendChild(datasheetCards);
    recipeChanged();
  }

  var LABS = { race: raceLab, cost: costLab, dispatch: dispatchLab, timing: timingLab };

  function fail(box, err) {
    box.appendChild(el("p", { class: "gl-error", text: "This lab could not start (" + err.message +
      "). The table below has the same numbers." }));
  }

  function start() {
    /* mkdocs-material's search dialog has no accessible name; give it one. */
    var search = document.querySelector(".md-search[role='dialog']") || document.querySelector(".md-search");
    if (search && !search.getAttribute("aria-label")) { search.setAttribute("aria-label", "Search"); }
    /* Wide tables scroll sideways: make their scroll box reachable from the keyboard. */
    document.querySelectorAll(".md-typeset__scrollwrap").forEach(function (wrap) {
      if (wrap.scrollWidth > wrap.clientWidth && !wrap.hasAttribute("tabindex")) {
        wrap.setAttribute("tabindex", "0");
        wrap.setAttribute("role", "region");
        wrap.setAttribute("aria-label", "table, scrolls sideways");
      }
    });
    document.querySelectorAll(".gl-lab[data-lab]").forEach(function (box) {
      if (box.dataset.ready) { return; }
      box.dataset.ready = "1";
      var name = box.dataset.lab;
      if (name === "planner") {
        load("planner").then(function (d) { planner(box, d); box.dataset.ready = "2"; })
          .catch(function (e) { fail(box, e); });
        return;
      }
      if (!LABS[name]) { return; }
      load("labs").then(function (d) { LABS[name](box, d); box.dataset.ready = "2"; })
        .catch(function (e) { fail(box, e); });
    });
    quizzes();
    document.querySelectorAll(".gl-flashcards").forEach(function (box) {
      load("glossary").then(function (d) { flashcards(box, d); box.dataset.ready = "2"; })
        .catch(function (e) { fail(box, e); });
    });
  }

  window.glLabs = { plan: plan, load: load };
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", start); }
  else { start(); }
})();
