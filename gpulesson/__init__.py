"""gpulesson: the package behind the executable GPU course.

A map, topic -> modules -> lessons (every lesson is ``docs/lessons/<name>.md``). Results
are frozen dataclasses with units in their field names; each topic's ``render`` modules
turn them into Markdown, text or JSON and compute nothing of their own.

Library (what the lessons, the snippets' readers and the CLI import):

* ``probe``: what this machine has and which layer of the GPU stack is broken
  -> why-gpus, software-stack, where-to-run; ``gpulesson probe``.
* ``units``: GB (10**9) and GiB (2**30), parsed and printed; used everywhere.
* ``timing/``: honest timing. ``bench`` (matmul sweeps), ``launch``, ``peak``, ``roofline``,
  ``teaching`` (the source's figures, labelled) -> why-gpus, timing, roofline;
  ``profile`` -> profiling; ``loader``, ``fusion``, ``alignment``, ``syncs`` -> feeding;
  ``decode``, ``serving`` -> decoding; ``allreduce`` -> multi-gpu;
  ``render``, ``*_render``, ``charts`` (Vega-Lite specs); ``gpulesson bench``.
* ``memory/``: what fills GPU memory. ``budget.estimate`` over ``recipes``, ``shape`` and
  ``terms``; ``capacity``; ``measure`` / ``gpt2`` / ``transformers_gpt2`` (measured steps)
  -> memory, budget, capacity, fix-ladder; ``compute`` (6ND, MFU, hours, cost)
  -> compute-budget; ``comm`` (bytes sent per step) -> multi-gpu; ``gpulesson budget``.
* ``precision/``: autocast, fp16/bf16 ranges, GradScaler, TF32 -> mixed-precision.
* ``errors/``: ``diagnose`` (kind, numbers, verdict of an error message), ``fix_ladder``
  -> oom, fix-ladder, cuda-errors; ``gpulesson diagnose``.
* ``results/``: result bundles (``bundle.schema.json``), the measurement ``suite`` whose
  ``entries_*`` call the lessons' own functions, ``datasheets`` (peaks with sources),
  ``compare`` -> Results across GPUs, Compare your machine; ``gpulesson measure``,
  ``gpulesson compare``.
* ``cli/``: the ``gpulesson`` command, one module per subcommand.

Site machinery (``site/``, needed only by MkDocs; nothing outside it imports it, and only it
reads ``docs/`` and ``results/``): ``hooks`` (stamp, build record, exec cache set-up),
``exec_cache`` / ``block_runner`` / ``block_worker`` (executed blocks, cached and isolated),
``facts`` and ``claims`` (figures a page computed, and the sentences checked against them),
``gpu_figures`` (GPU rows from a reference bundle on a CPU build), ``content`` (quizzes,
glossary and lab data from ``docs/``), ``quizzes``, ``glossary``, ``labs``, ``notebooks``
(the companion notebook generator).
"""

__version__ = "0.1.0"
