"""Memory: what a training or inference step holds on a GPU, estimated and measured.

Where to look, from a lesson's table to the code behind it:

* ``recipes``: precision recipes (``amp``, ``bf16``, ...), bytes per parameter,
  and what each gives up.
* ``shape``: ``TransformerShape``, the model and micro-batch an estimate prices.
* ``terms``: the coefficient tables of every activation, temporary and
  gradient term and of the phase points (one source for Python and the planner).
* ``budget``: ``estimate`` (one step's ``Budget``: ledger, phases, peak),
  ``fits``, ``lever_effects``, ``logits_terms``.
* ``capacity``: the largest model a card holds (``capacity``, ``card_units``).
* ``planner``: ``planner_data``, the tables as JSON for the VRAM planner widget.
* ``render``: Markdown, text and JSON for all of the above (renders only).
* ``gpt2``, ``measure``, ``torch_tools``: the model the estimate is fitted to,
  its measured steps, and the one door to torch's private measuring APIs.
* ``transformers_gpt2``, ``impl_accuracy``, ``saved``: Hugging Face transformers'
  GPT-2 measured the same way (``estimate(..., impl="transformers")`` follows it),
  each implementation's estimate against it, and what autograd saves per module.

Lessons: ``lessons/memory.md``, ``lessons/budget.md``, ``lessons/capacity.md``;
CLI: ``gpulesson budget``.
"""
