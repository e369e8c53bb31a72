"""Timing on CUDA, MPS and CPU: the measuring functions behind the lessons' timed figures.

Every measurement returns a frozen result of ``results`` (raw samples kept, spread judged).
A lesson never calls them itself: the measurement suite does (:mod:`gpulesson.results.suite`),
a page asks the build for a suite entry (:func:`gpulesson.site.build_bundle.measure`), reads
the result back from its measurements and hands it to the lesson's renderer in
:mod:`gpulesson.course`. The map, as page -> function -> suite entry -> renderer:

- why-gpus, size sweep: ``bench.compare_devices`` -> ``matmul_sweep``
  (``entries_matmul.comparison_from_measurements``) -> ``course.why_gpus.comparison_markdown``
  and ``sweep_chart``
- why-gpus, FLOPs of a matmul and the CPU peak (computed, not timed): ``results.flop_counts``
  and ``peak.cpu_roof`` -> ``course.why_gpus.flops_markdown`` and ``cpu_peak_markdown``
- timing, the source's 5 ms launch corrected: ``teaching.launch_correction`` ->
  ``course.timing.launch_correction_markdown``
- timing, launch cost: ``launch.measure_launch_overhead`` -> ``launch_overhead``
  (``entries_device.launch_from_measurements``) -> ``course.timing.launch_markdown``
- timing, the async illusion: ``bench.async_illusion`` -> ``stopwatch``
  (``entries_device.illusion_from_measurements``) -> ``course.timing.illusion_markdown``
- roofline: ``roofline.measure_roofline`` and ``roofline.measure_add`` -> ``roofline``
  (``entries_roofline.roofline_from_measurements``) -> ``course.roofline.roofline_markdown``
  and ``roofline_chart``
- ``gpulesson bench``: ``bench.sweep`` -> ``results.MatmulResult`` -> ``render.to_text`` and
  ``render.to_json`` (the command's own output, not a page)

``inputs`` checks names, sizes, threads and memory before torch is imported or anything
is allocated; ``bench`` holds the timing discipline (warm-up, barriers,
``blocked_autorange``); ``charts`` builds Vega-Lite chart specs
(drawn in the browser by the vendored renderer).
"""
