"""par_for (codegen/kernels/parfor.py) as a Jinja call block, for the loops of structured C templates:

    {% set head %}{% include "conv_dims.c.j2" %}{% endset %}
    {{ head }}
    {% call par("ng", "N * G", work="N * M * OP * KK", head=head, captures=[("float *", "xp")]) %}
        ... the body of one iteration ng ...
    {% endcall %}

renders the loop ``for (int64_t ng = 0; ng < N * G; ng++) { body }`` on the runtime's pool (chunks of
consecutive ``ng``), with ``head`` (the cheap, pure declarations the body reads) repeated in the task
and ``captures`` copied by value. The body may use ``slot_`` (the running thread, 0 .. rt->threads - 1)
for per-thread scratch: SLOTS is the C count of slots to allocate before the loop. In a model compiled
for one thread the loop stays a plain loop with ``slot_`` 0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .base import KernelCtx
from .parfor import PAR_GRAIN, par_for

SLOTS = "(rt->threads > 1 ? (int64_t)rt->threads : 1)"  # per-thread scratch buffers the pool may use


def par_call(ctx: KernelCtx) -> Callable[..., str]:
    """The ``par`` callable of a template (see module doc)."""

    def par(var: str, extent: str, *, work: str | None = None, head: str = "",
            captures: Sequence[Sequence[str]] = (), grain: int = PAR_GRAIN, caller: Callable[[], str]) -> str:
        body = caller().rstrip("\n").split("\n")
        lines = par_for(ctx, var, extent, body, work=work, head=[h for h in head.split("\n") if h.strip()],
                        captures=[(t, n) for t, n in captures], grain=grain)
        return "\n".join(lines) + "\n"

    return par
