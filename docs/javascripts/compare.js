/* "Compare your machine": a reader's result bundle beside the reference bundles.
 *
 * Plain JavaScript, nothing uploaded: the page embeds the reference
 * bundles' figures, the datasheet peaks and the display units as JSON
 * (#gl-compare-data, written at build time by gpulesson/site/results_pages.py); this
 * script reads the file the reader picks, checks it, and fills the table and the charts.
 * The charts are Vega-Lite specs drawn by charts.js (window.glCharts): bar charts of the
 * headline figures from the page's template, and the reader's series added to the course's
 * throughput chart (the figure under .gl-compare-course, whose spec names the dataset).
 * A second table and its charts set the reader's headline figures beside the prediction
 * for their own device and the published rows of that GPU (or of the nearest GPU that has
 * them): both computed at build (gpulesson.results.published_render) and only looked up here.
 * The full checks (JSON Schema, consistency, plausibility) are `gpulesson compare`'s;
 * here a file is refused when its structure or a figure is plainly wrong. Every lookup by a
 * name from a file reads own properties only (own()), so a name such as "__proto__" or
 * "constructor" is refused like any unknown name, and a file that cannot be shown is
 * refused in the page's message area, never left as an uncaught error. The data block is
 * read with JSON.parse, and every string from a bundle reaches the page as text
 * (textContent, setAttribute), never as markup.
 */
(function () {
  "use strict";

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (key) {
      if (key === "text") { node.textContent = attrs[key]; } else { node.setAttribute(key, attrs[key]); }
    });
    (children || []).forEach(function (c) {
      node.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    });
    return node;
  }

  /* obj[key] when obj has key as its own property, else undefined: no inherited names. */
  function own(obj, key) {
    return obj !== null && typeof obj === "object" && Object.prototype.hasOwnProperty.call(obj, key)
      ? obj[key] : undefined;
  }

  var NAME = /^[a-z0-9_]+(\.[a-z0-9_]+)*$/;  /* as bundle.schema.json's measurement name */
  var DTYPES = ["fp32", "tf32", "bf16", "fp16", "fp8"];
  var LIMITS = ["peak_flops", "memory_bandwidth", "device_memory"];

  /* --- checking the reader's file ------------------------------------------------ */

  function fail(field, problem) {
    var error = new Error(field + ": " + problem);
    error.field = field;
    throw error;
  }

  function isNumber(x) { return typeof x === "number" && isFinite(x); }

  /* Returns the bundle, or throws an Error whose message names the field. */
  function checkBundle(bundle, data) {
    if (bundle === null || typeof bundle !== "object" || Array.isArray(bundle)) {
      fail("(top level)", "not a JSON object: choose the file gpulesson measure wrote");
    }
    if (data.schema_versions.indexOf(bundle.schema_version) < 0) {
      fail("schema_version", "is " + JSON.stringify(bundle.schema_version) + ", this page reads " +
        data.schema_versions.join(" and ") + ": make the bundle with this version of gpulesson");
    }
    var p = bundle.provenance;
    if (!p || typeof p !== "object") { fail("provenance", "missing: this is not a result bundle"); }
    if (typeof p.device_name !== "string" || !p.device_name) {
      fail("provenance.device_name", "missing: the bundle must name its device");
    }
    if (["cuda", "mps", "cpu"].indexOf(p.device_type) < 0) {
      fail("provenance.device_type", "must be cuda, mps or cpu");
    }
    if (!Array.isArray(bundle.measurements) || bundle.measurements.length === 0) {
      fail("measurements", "missing or empty: the bundle has no figures");
    }
    if (p.datasheet_id !== undefined && p.datasheet_id !== null && typeof p.datasheet_id !== "string") {
      fail("provenance.datasheet_id", "must be a datasheet id or null");
    }
    var sheet = p.datasheet_id ? own(data.datasheets, p.datasheet_id) : null;
    if (p.datasheet_id && !sheet) {
      fail("provenance.datasheet_id", JSON.stringify(p.datasheet_id) + " is not a known datasheet id");
    }
    bundle.measurements.forEach(function (m, i) {
      var where = "measurements[" + i + "]";
      if (!m || typeof m !== "object" || Array.isArray(m)) { fail(where, "not a JSON object"); }
      if (typeof m.name !== "string" || !m.name) { fail(where + ".name", "missing"); }
      if (!NAME.test(m.name)) {
        fail(where + ".name", JSON.stringify(m.name) + " is not a measurement name (lower-case words joined by dots)");
      }
      if (typeof m.unit !== "string" || own(data.units, m.unit) !== true) {
        fail(where + ".unit", JSON.stringify(m.unit) + " is not a unit bundles use");
      }
      if (m.label !== undefined && typeof m.label !== "string") { fail(where + ".label", "must be text"); }
      if (m.dtype !== undefined && m.dtype !== null && DTYPES.indexOf(m.dtype) < 0) {
        fail(where + ".dtype", JSON.stringify(m.dtype) + " is not one of " + DTYPES.join(", ") + " or null");
      }
      if (m.limit !== undefined && m.limit !== null && LIMITS.indexOf(m.limit) < 0) {
        fail(where + ".limit", JSON.stringify(m.limit) + " is not one of " + LIMITS.join(", ") + " or null");
      }
      if (!isNumber(m.value) || m.value < 0) {
        fail(where + ".value", JSON.stringify(m.value) + " is not a number of at least 0");
      }
      var peak = sheet && m.limit === "peak_flops" && m.dtype ? own(sheet.peaks_flop_per_s, m.dtype) : null;
      if (peak && m.value > data.flops_tolerance * peak) {
        fail(where + ".value", (m.value / 1e12).toPrecision(4) + " TFLOP/s is above " +
          data.flops_tolerance + "x the datasheet's dense " + m.dtype + " peak: not a plausible result");
      }
      if (sheet && m.limit === "memory_bandwidth" && m.value > sheet.memory_bandwidth_bytes_per_s) {
        fail(where + ".value", "above the datasheet's memory bandwidth: not a plausible result");
      }
    });
    return bundle;
  }

  /* --- figures as the tables show them ------------------------------------------------- */

  /* The display unit of a row: the largest scale its biggest value reaches (as in render.py). */
  function displayUnit(unit, values, scales) {
    if (unit === "ratio") { return ["x", 1]; }
    var list = own(scales, unit);
    if (!list) { return [unit, 1]; }
    var top = Math.max.apply(null, values.map(Math.abs).concat([0]));
    for (var i = 0; i < list.length; i += 1) { if (top >= list[i][1]) { return list[i]; } }
    return list[list.length - 1];
  }

  function formatNumber(v) {
    if (v === 0 || !isFinite(v)) { return String(v); }
    var a = Math.abs(v);
    if (a >= 100) { return Math.round(v).toLocaleString("en-US"); }
    if (a >= 10) { return v.toFixed(1); }
    if (a >= 1) { return v.toFixed(2); }
    return v.toFixed(1 - Math.floor(Math.log10(a)));
  }

  function fraction(m, sheet) {
    if (!sheet || !m) { return null; }
    var peak = m.dtype ? own(sheet.peaks_flop_per_s, m.dtype) : undefined;
    if (m.limit === "peak_flops" && peak) { return m.value / peak; }
    if (m.limit === "memory_bandwidth") { return m.value / sheet.memory_bandwidth_bytes_per_s; }
    return null;
  }

  function pct(f) { return f === null ? "—" : Math.round(f * 100) + "%"; }

  /* Rows: the reader's headline figures, each with every reference's same-named figure. */
  function buildRows(bundle, data) {
    var mineSheet = bundle.provenance.datasheet_id ? own(data.datasheets, bundle.provenance.datasheet_id) : null;
    return bundle.measurements.filter(function (m) { return m.headline; }).map(function (m) {
      var refs = data.references.map(function (ref) {
        var theirs = own(ref.measurements, m.name) || null;
        var sheet = ref.datasheet_id ? own(data.datasheets, ref.datasheet_id) : null;
        return theirs ? { value: theirs.value, fraction: fraction(theirs, sheet), ratio: theirs.value > 0 ? m.value / theirs.value : null } : null;
      });
      var values = [m.value].concat(refs.filter(Boolean).map(function (r) { return r.value; }));
      return {
        name: m.name, label: m.label || m.name, unit: m.unit,
        scale: displayUnit(m.unit, values, data.display_scales),
        mine: { value: m.value, fraction: fraction(m, mineSheet) }, refs: refs
      };
    });
  }

  function drawTable(box, rows, bundle, data) {
    var device = bundle.provenance.device_name;
    var head = [el("th", { scope: "col", text: "measurement" }), el("th", { scope: "col", text: "unit" }),
      el("th", { scope: "col", text: "yours: " + device }), el("th", { scope: "col", text: "yours: of datasheet" })];
    data.references.forEach(function (ref, i) {
      var n = "[" + (i + 1) + "]";
      head.push(el("th", { scope: "col", text: n + " " + ref.label }));
      head.push(el("th", { scope: "col", text: n + " of datasheet" }));
      head.push(el("th", { scope: "col", text: "yours ÷ " + n }));
    });
    var body = rows.map(function (r) {
      var cells = [el("th", { scope: "row", text: r.label }), el("td", { text: r.scale[0] }),
        el("td", { "data-mine": r.name, text: formatNumber(r.mine.value / r.scale[1]) }),
        el("td", { text: pct(r.mine.fraction) })];
      r.refs.forEach(function (c) {
        cells.push(el("td", { text: c ? formatNumber(c.value / r.scale[1]) : "—" }));
        cells.push(el("td", { text: c ? pct(c.fraction) : "—" }));
        cells.push(el("td", { text: c && c.ratio !== null ? formatNumber(c.ratio) + "x" : "—" }));
      });
      return el("tr", {}, cells);
    });
    var caption = "Your " + device + " (" + bundle.provenance.device_type + ", " +
      String(bundle.provenance.created_utc || "").slice(0, 10) + ") beside " +
      (data.references.length ? data.references.length + " reference bundle(s)" : "no reference bundle yet");
    var table = el("table", { "data-gl-compare-result": "" }, [
      el("caption", { text: caption }), el("thead", {}, [el("tr", {}, head)]), el("tbody", {}, body)
    ]);
    /* Material's wrappers for wide tables: they scroll sideways instead of overflowing. */
    box.replaceChildren(el("div", { class: "md-typeset__scrollwrap" }, [
      el("div", { class: "md-typeset__table" }, [table])
    ]));
  }

  /* --- charts (Vega-Lite, drawn by charts.js from specs gpulesson writes) -------------- */

  function clone(spec) { return JSON.parse(JSON.stringify(spec)); }

  /* One bar chart per headline figure a reference bundle also has: yours, then each
     reference, in the row's display unit (log scale past a hundredfold, as before). */
  function drawCharts(box, rows, bundle, data) {
    var template = data.charts.headline;
    var colours = template.usermeta.gl_colours;
    var device = bundle.provenance.device_name;
    var charts = rows.filter(function (r) { return r.refs.some(Boolean); }).map(function (r) {
      var unit = r.scale[0];
      function bar(series, value, reader) {
        return { series: series, colour: reader ? colours.reader : colours.reference, reader: reader,
          shown: value / r.scale[1], text: formatNumber(value / r.scale[1]) + " " + unit };
      }
      var bars = [bar("yours: " + device, r.mine.value, true)];
      r.refs.forEach(function (c, i) {
        if (c) { bars.push(bar("[" + (i + 1) + "] " + data.references[i].device, c.value, false)); }
      });
      var values = bars.map(function (b) { return b.shown; });
      var positive = values.filter(function (v) { return v > 0; });
      var log = positive.length === values.length && Math.max.apply(null, values) / Math.min.apply(null, values) > 100;
      var title = r.label + " (" + unit + (log ? ", log scale" : "") + ")";
      var summary = title + ": " + bars.map(function (b) { return b.series + " " + b.text; }).join("; ");
      var spec = clone(template);
      spec.title = title;
      spec.description = summary;
      spec.datasets.bars = bars;
      spec.height = bars.length * template.usermeta.gl_bar_px;
      spec.encoding.x.title = unit;
      /* Room right of the longest bar for its text; a log scale needs a start above zero. */
      var top = Math.max.apply(null, values);
      if (log) {
        var start = Math.min.apply(null, values) / 2;
        spec.encoding.x.scale = { type: "log", domainMin: start, domainMax: top * 10 };
        spec.encoding.x.axis = template.usermeta.gl_log_axis;
        spec.layer.forEach(function (layer) {  /* bars start at the axis, not at zero */
          if (layer.mark.type === "bar") { layer.encoding.x2 = { datum: start }; }
        });
      } else {
        spec.encoding.x.scale = { type: "linear", domainMax: top * 1.3 };
      }
      var figure = el("figure", { class: "gl-chart gl-compare-figure", "data-gl-chart": "" }, [
        el("div", { class: "gl-chart-view", role: "img", "aria-label": summary }),
        el("figcaption", { text: r.label + ": the same figures as the table above." })
      ]);
      return { figure: figure, spec: spec };
    });
    if (!charts.length) {
      box.replaceChildren(el("p", { text: "No reference bundle has these figures yet, so there is nothing to chart." }));
      return;
    }
    box.replaceChildren.apply(box, charts.map(function (c) { return c.figure; }));
    charts.forEach(function (c) { window.glCharts.render(c.figure, c.spec); });
  }

  /* The course's charts on this page: the reference bundles' series plus the reader's,
     written as the rows gpulesson writes for a bundle (gpulesson.results.render.measurement_rows). */
  function overlay(root, bundle) {
    root.querySelectorAll(".gl-compare-course figure[data-gl-chart]").forEach(function (figure) {
      var base = figure.glBase || (figure.glBase = window.glCharts.specOf(figure));
      var meta = base && base.usermeta && base.usermeta.gl_overlay;
      if (!meta) { return; }
      var spec = clone(base);
      if (bundle) {
        var series = "yours: " + bundle.provenance.device_name;
        var drawn = new RegExp(meta.rows);  /* only the rows the chart draws: none leaves it hidden */
        spec.datasets[meta.dataset] = spec.datasets[meta.dataset].concat(bundle.measurements.filter(function (m) {
          return drawn.test(m.name);
        }).map(function (m) {
          return { series: series, colour: meta.reader_colour, reader: true, name: m.name, unit: m.unit,
            value: m.value, dtype: m.dtype === undefined ? null : m.dtype };
        }));
      }
      var empty = spec.datasets[meta.dataset].length === 0;
      figure.hidden = empty;
      if (!empty) { window.glCharts.render(figure, spec); }
    });
  }

  /* --- published rows and predictions for the reader's own device ----------------------
     Everything here is looked up in the page's data (gpulesson.results.published_render):
     the datasheet row the reader's device matches (the bundle's datasheet_id, else its
     name against each row's name patterns, as gpulesson.results.datasheets.lookup does),
     the prediction the package computed for that row and figure, and which device's
     published rows stand beside it (its own, or the nearest GPU with published rows, as the build chose). */

  function normalizeName(name) {
    return String(name).replace(/\s+/g, " ").trim().toLowerCase().replace(/^nvidia /, "");
  }

  function matchDevice(bundle, data) {
    var p = bundle.provenance;
    if (p.datasheet_id && own(data.name_keys, p.datasheet_id)) { return p.datasheet_id; }
    var name = normalizeName(p.device_name);
    var found = Object.keys(data.name_keys).filter(function (id) {
      var keys = own(data.name_keys, id);
      return keys.patterns.some(function (pattern) {
        try { return new RegExp("^(?:" + pattern + ")$").test(name); } catch (e) { return false; }
      });
    });
    return found.length === 1 ? found[0] : null;
  }

  function link(row) {
    var safe = /^https:\/\/\S+$/.test(row.source);
    return safe ? el("a", { href: row.source, text: row.publisher }) : document.createTextNode(row.publisher);
  }

  /* One row per headline figure of the reader's: theirs, the prediction for their device,
     theirs over it, and the published rows for the same device or the nearest one. */
  function publishedRows(bundle, data, device) {
    var predictions = device ? own(data.predictions, device) : undefined;
    var beside = device ? own(data.published_for, device) : undefined;
    return bundle.measurements.filter(function (m) { return m.headline; }).map(function (m) {
      var predicted = predictions ? own(predictions, m.name) : undefined;
      var entry = m.name.split(".")[0];
      var reason = null;
      if (!device) { reason = "no datasheet row matches this device"; }
      else if (!predicted) { reason = own(data.no_model, entry) || "no model for this figure"; }
      else if (own(predicted, "reason") !== undefined) { reason = predicted.reason; predicted = null; }
      if (predicted && predicted.unit !== m.unit) { reason = "no model in this unit"; predicted = null; }
      var chosen = beside ? own(beside, m.name) : undefined;
      var pubs = chosen ? chosen.rows.map(function (i) { return data.published[i]; })
        .filter(function (r) { return r && r.bundle_unit === m.unit; }) : [];
      var values = [m.value].concat(predicted ? [predicted.value] : [],
        pubs.map(function (r) { return r.value_in_bundle_unit; }));
      return {
        name: m.name, label: m.label || m.name, unit: m.unit, value: m.value,
        scale: displayUnit(m.unit, values, data.display_scales),
        predicted: predicted || null, reason: reason,
        published: pubs, same: chosen ? chosen.same : null,
        publishedDevice: chosen && pubs.length ? pubs[0].device_name : null
      };
    });
  }

  function drawPublished(box, chartBox, bundle, data) {
    var device = matchDevice(bundle, data);
    var sheet = device ? own(data.name_keys, device) : null;
    var rows = publishedRows(bundle, data, device);
    var mine = "yours: " + bundle.provenance.device_name;
    var head = ["measurement", "unit", mine, "predicted for " + (sheet ? sheet.name : "your device"),
      "yours ÷ predicted", "published (GPU)", "published", "source, retrieved"]
      .map(function (t) { return el("th", { scope: "col", text: t }); });
    var body = rows.map(function (r) {
      var scale = r.scale;
      var pubCells = r.published.length ? r.published : [null];
      return pubCells.map(function (pub, i) {
        var cells = [];
        if (i === 0) {
          var span = String(pubCells.length);
          cells.push(el("th", { scope: "row", rowspan: span, text: r.label }));
          cells.push(el("td", { rowspan: span, text: scale[0] }));
          cells.push(el("td", { rowspan: span, "data-mine-published": r.name, text: formatNumber(r.value / scale[1]) }));
          cells.push(el("td", { rowspan: span, "data-predicted": r.name,
            title: r.predicted ? r.predicted.model + ": " + r.predicted.arithmetic : "",
            text: r.predicted ? formatNumber(r.predicted.value / scale[1]) + " (" + r.predicted.kind + ")" : r.reason.split(":")[0] }));
          cells.push(el("td", { rowspan: span, text: r.predicted && r.predicted.value > 0 ? formatNumber(r.value / r.predicted.value) + "x" : "—" }));
        }
        if (pub) {
          var who = pub.device_name + (r.same ? "" : " (the nearest GPU with a published row, by memory bandwidth)");
          cells.push(el("td", { "data-published": r.name, text: who }));
          cells.push(el("td", { text: formatNumber(pub.value_in_bundle_unit / scale[1]) }));
          cells.push(el("td", {}, [link(pub), ", " + pub.retrieved]));
        } else {
          cells.push(el("td", { text: "—" }), el("td", { text: "—" }), el("td", { text: "no published row for this figure" }));
        }
        return el("tr", {}, cells);
      });
    }).reduce(function (a, b) { return a.concat(b); }, []);
    var caption = "Your " + bundle.provenance.device_name + " beside the course's prediction for " +
      (sheet ? sheet.name + " (datasheet " + device + ")" : "no datasheet row (none matches this device)") +
      " and others' published measurements";
    var table = el("table", { "data-gl-compare-published": "" }, [
      el("caption", { text: caption }), el("thead", {}, [el("tr", {}, head)]), el("tbody", {}, body)
    ]);
    box.replaceChildren(el("div", { class: "md-typeset__scrollwrap" }, [
      el("div", { class: "md-typeset__table" }, [table])
    ]));
    drawPublishedCharts(chartBox, rows, bundle, data);
    return rows;
  }

  /* The reader's value drawn beside the prediction and the published rows, per figure. */
  function drawPublishedCharts(box, rows, bundle, data) {
    var template = data.charts.headline;
    var colours = data.kind_colours;
    var charts = rows.filter(function (r) { return r.predicted || r.published.length; }).map(function (r) {
      var unit = r.scale[0];
      function bar(series, value, kind) {
        return { series: series, colour: own(colours, kind), reader: kind === "measured",
          shown: value / r.scale[1], text: formatNumber(value / r.scale[1]) + " " + unit };
      }
      var bars = [bar("yours: " + bundle.provenance.device_name, r.value, "measured")];
      if (r.predicted) { bars.push(bar("predicted: " + r.predicted.kind, r.predicted.value, "predicted")); }
      r.published.forEach(function (pub) {
        bars.push(bar("published: " + pub.device_name + " (" + pub.publisher + ")", pub.value_in_bundle_unit, "published"));
      });
      var values = bars.map(function (b) { return b.shown; });
      var top = Math.max.apply(null, values);
      var title = r.label + " (" + unit + "): yours, predicted, published";
      var summary = title + ": " + bars.map(function (b) { return b.series + " " + b.text; }).join("; ");
      var spec = clone(template);
      spec.title = title;
      spec.description = summary;
      spec.datasets.bars = bars;
      spec.height = bars.length * template.usermeta.gl_bar_px;
      spec.encoding.x.title = unit;
      spec.encoding.x.scale = { type: "linear", domainMax: top * 1.3 };
      var figure = el("figure", { class: "gl-chart gl-compare-figure", "data-gl-chart": "" }, [
        el("div", { class: "gl-chart-view", role: "img", "aria-label": summary }),
        el("figcaption", { text: r.label + ": yours beside the prediction and the published rows in the table above." })
      ]);
      return { figure: figure, spec: spec };
    });
    if (!charts.length) {
      box.replaceChildren(el("p", { text: "No prediction or published row exists for these figures, so there is nothing to chart." }));
      return;
    }
    box.replaceChildren.apply(box, charts.map(function (c) { return c.figure; }));
    charts.forEach(function (c) { window.glCharts.render(c.figure, c.spec); });
  }

  /* --- wiring -------------------------------------------------------------------------- */

  function start() {
    var root = document.querySelector("[data-gl-compare]");
    var source = document.getElementById("gl-compare-data");
    if (!root || !source) { return; }
    var data = JSON.parse(source.textContent);
    var input = root.querySelector("input[type=file]");
    var status = root.querySelector(".gl-compare-status");
    var tableBox = root.querySelector(".gl-compare-table");
    var chartBox = root.querySelector(".gl-compare-chart");
    var publishedBox = root.querySelector(".gl-compare-published");
    var publishedChartBox = root.querySelector(".gl-compare-published-chart");
    input.addEventListener("change", function () {
      var file = input.files && input.files[0];
      if (!file) { return; }
      function refuse(error) {
        root.dataset.state = "refused";
        status.textContent = "Refused " + file.name + ": " + String(error && error.message || error);
        tableBox.replaceChildren();
        chartBox.replaceChildren();
        publishedBox.replaceChildren();
        publishedChartBox.replaceChildren();
        try { overlay(root, null); } catch (ignored) { /* the refusal above is what counts */ }
      }
      file.text().then(function (text) {
        var bundle;
        try {
          try { bundle = JSON.parse(text); } catch (e) { fail(file.name, "not JSON (" + e.message + ")"); }
          checkBundle(bundle, data);
        } catch (error) {
          refuse(error);
          return;
        }
        try {
          var rows = buildRows(bundle, data);
          drawTable(tableBox, rows, bundle, data);
          drawCharts(chartBox, rows, bundle, data);
          drawPublished(publishedBox, publishedChartBox, bundle, data);
          overlay(root, bundle);
        } catch (error) {
          refuse(new Error("this page cannot show it (" + error.message + "); check it with gpulesson compare"));
          return;
        }
        root.dataset.state = "shown";
        status.textContent = "Showing " + file.name + ": " + bundle.provenance.device_name + ", " +
          rows.length + " headline figures. Nothing was uploaded.";
      }, refuse);
    });
    root.dataset.ready = "1";
  }

  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", start); } else { start(); }
})();
