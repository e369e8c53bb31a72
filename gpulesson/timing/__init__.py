"""Timing on CUDA, MPS and CPU: for each lesson figure, the function, result and renderer.

Every measurement returns a frozen result of ``results`` (raw samples kept, spread judged);
``render`` turns results into Markdown, text, JSON and charts and never measures. The map,
as page -> function -> result -> renderer (modules of this package):

- why-gpus, size sweep: ``bench.compare_devices`` -> ``results.SweepComparison`` ->
  ``render.comparison_markdown`` and ``render.sweep_chart``
- why-gpus, FLOPs of a matmul: ``results.flop_counts`` -> ``results.FlopCount`` ->
  ``render.flops_markdown``
- why-gpus, CPU peak: ``peak.cpu_roof`` -> ``peak.CpuRoof`` -> ``render.cpu_peak_markdown``
- timing, the source's 5 ms launch corrected: ``teaching.launch_correction`` ->
  ``teaching.LaunchCorrection`` -> ``render.launch_correction_markdown``
- timing, launch cost: ``launch.measure_launch_overhead`` -> ``results.LaunchOverhead`` ->
  ``render.launch_markdown``
- timing, the async illusion: ``bench.async_illusion`` -> ``results.IllusionResult`` ->
  ``render.illusion_markdown``
- roofline: ``roofline.measure_roofline`` -> ``results.Roofline`` ->
  ``gpulesson.course.roofline.roofline_markdown`` and ``roofline_chart``; the bf16 add
  beside the fp32 one: ``roofline.measure_add`` -> ``results.PrecisionTraffic``; the host
  link: ``gpulesson.results.entries_device.link_from_measurements`` ->
  ``results.LinkBandwidth`` -> ``gpulesson.course.roofline.link_markdown``
- ``gpulesson bench``: ``bench.sweep`` -> ``results.MatmulResult`` -> ``render.to_text`` and
  ``render.to_json``

``inputs`` checks names, sizes, threads and memory before torch is imported or anything
is allocated; ``bench`` holds the timing discipline (warm-up, barriers,
``blocked_autorange``); ``charts`` builds Vega-Lite chart specs
(drawn in the browser by the vendored renderer).
"""
