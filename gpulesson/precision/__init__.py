"""Mixed precision: what autocast, GradScaler and TF32 do, computed on this machine.

One module per question of the lesson ``lessons/mixed-precision.md``:

* :mod:`~gpulesson.precision.formats`: the range and resolution of fp32, tf32, bf16 and
  fp16, from ``torch.finfo`` and real casts;
* :mod:`~gpulesson.precision.trace`: the dtype of every op in a real forward pass under
  ``torch.autocast``, beside PyTorch's autocast op lists;
* :mod:`~gpulesson.precision.tf32`: TF32 rounding emulated on any CPU, and the error of a
  matmul in each precision;
* :mod:`~gpulesson.precision.scaler`: ``GradScaler`` steps (taken and skipped) and
  NaN/inf detection;
* :mod:`~gpulesson.precision.hardware`: which tensor-core dtypes each compute capability has;
* :mod:`~gpulesson.precision.activations`: what autocast does to the memory saved for the
  backward pass, measured and estimated;
* :mod:`~gpulesson.precision.step`: one training step per precision, timed;
* :mod:`gpulesson.course.mixed_precision`: the Markdown the lesson prints (computes nothing).
"""
