"""Errors: what an out-of-memory or CUDA error message says, and what to do about it.

``diagnose`` reads a message (linear-time ``scan``, sizes and NCCL figures in ``numbers``)
into a ``Diagnosis``; ``fix_ladder`` orders the fixes and prices the memory rungs with
``gpulesson.memory``; ``render`` prints both. Lessons: oom, fix-ladder, cuda-errors;
CLI: ``gpulesson diagnose``.
"""
