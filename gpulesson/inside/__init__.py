"""Inside the GPU: SMs, occupancy, waves, the memory hierarchy measured, IO-aware attention.

Topic package of the lesson ``lessons/inside-gpu.md``: :mod:`.limits` (cited per-SM limits
and SM counts), :mod:`.occupancy`, :mod:`.waves`, :mod:`.cache_sweep`, :mod:`.strided`,
:mod:`.attention_io`; :mod:`.render` prints their results as Markdown.
"""
