"""The standard library: checked, scheduled kernels for the nodes of a small
inference graph (SPEC section 5).  ``algorithms`` holds the readable procs,
the ``*_schedule`` modules derive fast kernels from them with
``gpudsl.schedule`` primitives only; ``gpudsl.ops`` runs them on arrays."""
