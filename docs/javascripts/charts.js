/* Charts: renders every <figure data-gl-chart> on the page with Vega-Lite.
 *
 * Each figure holds a Vega-Lite spec as JSON (<script class="gl-chart-spec">, written at
 * build time by gpulesson/timing/charts.py) and an empty view with an aria-label. On a page
 * with at least one such figure this script loads the renderer shipped with the site
 * (vendor/vega.min.js, vega-lite.min.js, vega-embed.min.js, beside this file: see
 * vendor/README.txt), then draws each chart as SVG, with tooltips, in the colours of the
 * reader's colour scheme (mkdocs-material's data-md-color-scheme on <body>), and draws it
 * again when the reader switches scheme. Colours in a spec are CSS variables
 * ("var(--gl-chart-0)", set per scheme in stylesheets/charts.css), resolved here.
 *
 * Nothing is fetched from anywhere: the data is inline, and vega is given a loader that
 * refuses every URL. Other scripts (compare.js) draw through window.glCharts.render.
 * Without JavaScript, the figure's caption points to the table with the same figures.
 */
(function () {
  "use strict";

  var script = document.currentScript;
  var VENDOR = script ? new URL("vendor/", script.src).href : "vendor/";
  var FILES = ["vega.min.js", "vega-lite.min.js", "vega-embed.min.js"];
  var loading = null;

  /* The three builds, in order (vega-lite needs vega, vega-embed both); once per page. */
  function loadRenderer() {
    if (!loading) {
      loading = FILES.reduce(function (previous, file) {
        return previous.then(function () {
          return new Promise(function (resolve, reject) {
            var tag = document.createElement("script");
            tag.src = VENDOR + file;
            tag.onload = resolve;
            tag.onerror = function () { reject(new Error("charts: could not load " + tag.src)); };
            document.head.appendChild(tag);
          });
        });
      }, Promise.resolve());
    }
    return loading;
  }

  function dark() { return document.body.getAttribute("data-md-color-scheme") === "slate"; }

  function cssValue(name, fallback) {
    var value = getComputedStyle(document.body).getPropertyValue(name).trim();
    return value || fallback;
  }

  var VAR = /^var\(\s*(--[\w-]+)\s*(?:,\s*(.+))?\)$/;

  /* A copy of the spec with every "var(--name)" string replaced by the scheme's value. */
  function resolveColours(value) {
    if (typeof value === "string") {
      var match = VAR.exec(value);
      return match ? cssValue(match[1], match[2] || "currentColor") : value;
    }
    if (Array.isArray(value)) { return value.map(resolveColours); }
    if (value && typeof value === "object") {
      var copy = {};
      Object.keys(value).forEach(function (key) { copy[key] = resolveColours(value[key]); });
      return copy;
    }
    return value;
  }

  /* Axis, legend and text colours from the theme's own text colours. */
  function themeConfig() {
    var fg = cssValue("--md-default-fg-color", dark() ? "#e2e4e9" : "#000000de");
    var light = cssValue("--md-default-fg-color--light", fg);
    var lighter = cssValue("--md-default-fg-color--lighter", light);
    var font = getComputedStyle(document.body).fontFamily || "sans-serif";
    return {
      background: null,
      font: font,
      title: { color: fg, fontSize: 15, fontWeight: 600, anchor: "start" },
      axis: {
        labelColor: fg, titleColor: fg, domainColor: light, tickColor: light,
        gridColor: lighter, labelFontSize: 12, titleFontSize: 12, titleFontWeight: 600
      },
      legend: { labelColor: fg, titleColor: fg, labelFontSize: 12, labelLimit: 320 },
      view: { stroke: lighter },
      text: { color: fg },
      rule: { color: fg },
      aria: false
    };
  }

  /* A loader that refuses: charts carry their data inline, and nothing is fetched. */
  function refusingLoader() {
    var loader = window.vega.loader();
    loader.load = loader.sanitize = function (uri) {
      return Promise.reject(new Error("charts load nothing; refused " + uri));
    };
    return loader;
  }

  /* Draw spec in figure (again, if it was drawn): resolves to the vega View. */
  function render(figure, spec) {
    figure.glSpec = spec;
    var view = figure.querySelector(".gl-chart-view");
    return loadRenderer().then(function () {
      if (figure.glView) { figure.glView.finalize(); }
      return window.vegaEmbed(view, resolveColours(spec), {
        mode: "vega-lite",
        renderer: "svg",
        actions: false,
        config: themeConfig(),
        loader: refusingLoader(),
        /* Vega's expression interpreter, not code compiled with new Function: the site's
           Content-Security-Policy has no 'unsafe-eval' (gpulesson/site/csp_hook.py). */
        ast: true,
        tooltip: { theme: dark() ? "dark" : "light" }
      });
    }).then(function (result) {
      /* The view speaks for the chart as one image, labelled by the spec's description
         (vega makes it a graphics-document); its SVG is drawing only. */
      view.setAttribute("role", "img");
      var drawing = view.querySelector("svg");
      if (drawing) { drawing.setAttribute("aria-hidden", "true"); }
      figure.glView = result.view;
      figure.dataset.drawn = dark() ? "dark" : "light";
      return result.view;
    }).catch(function (error) {
      figure.dataset.drawn = "failed";
      throw error;
    });
  }

  function specOf(figure) {
    var source = figure.querySelector("script.gl-chart-spec");
    return source ? JSON.parse(source.textContent) : null;
  }

  function figures() { return Array.prototype.slice.call(document.querySelectorAll("figure[data-gl-chart]")); }

  /* At start every figure not hidden; on a scheme change, every figure drawn so far. */
  function drawAll(redraw) {
    return Promise.all(figures().filter(function (figure) {
      return redraw ? figure.glView : !figure.hidden;
    }).map(function (figure) {
      var spec = figure.glSpec || specOf(figure);
      return spec ? render(figure, spec).catch(function (error) { console.error(error); }) : null;
    }));
  }

  function start() {
    if (figures().length) { drawAll(false); }
    /* The palette toggle changes data-md-color-scheme: draw again in the new colours. */
    new MutationObserver(function () { drawAll(true); }).observe(document.body, { attributes: true, attributeFilter: ["data-md-color-scheme"] });
  }

  window.glCharts = { render: render, specOf: specOf };
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", start); } else { start(); }
})();
