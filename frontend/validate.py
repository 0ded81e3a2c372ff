"""Structural checks on protobuf graphs before they become IR: SSA, dependencies, cycles, order.

Works on NodeProto lists (graph and function bodies alike). A node depends on the producers of the
values it reads, including the outer-scope values read by its subgraphs (If/Loop/Scan bodies), so a
node is placed after everything its bodies capture. Exporters that emit nodes out of topological order
are accepted: the order is repaired with a stable sort (a valid order is kept as is).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from typing import Any

from google.protobuf.descriptor import FieldDescriptor

from onnxc.ir import ModelError


def node_label(n: Any) -> str:
    """Short description of a NodeProto for error messages: domain::OpType 'name'."""
    dom = f"{n.domain}::" if n.domain and n.domain != "ai.onnx" else ""
    name = f" '{n.name}'" if n.name else f" (first output {n.output[0]!r})" if len(n.output) else ""
    return f"node {dom}{n.op_type}{name}"


def subgraphs(n: Any) -> Iterable[Any]:
    """GraphProtos held by the attributes of NodeProto ``n``."""
    for a in n.attribute:
        if a.HasField("g"):
            yield a.g
        yield from a.graphs


def defined_names(gp: Any) -> set[str]:
    """Names a GraphProto defines itself: inputs, initializers and node outputs."""
    out = {v.name for v in gp.input}
    out.update(t.name for t in gp.initializer)
    out.update(s.values.name for s in gp.sparse_initializer)
    for n in gp.node:
        out.update(o for o in n.output if o)
    return out


def free_names(gp: Any) -> set[str]:
    """Names a GraphProto (or its nested subgraphs) reads but does not define: outer-scope captures."""
    used: set[str] = {o.name for o in gp.output}
    for n in gp.node:
        used.update(reads(n))
    return used - defined_names(gp)


def reads(n: Any) -> set[str]:
    """Every value name NodeProto ``n`` reads: its inputs and its subgraphs' outer-scope captures."""
    out = {i for i in n.input if i}
    for g in subgraphs(n):
        out |= free_names(g)
    return out


def order_nodes(nodes: Any, predefined: Mapping[str, str], where: str) -> list[int]:
    """Indices of ``nodes`` in a topological order, as close to the given order as possible.

    ``predefined`` maps names defined before any node (inputs, initializers) to a description.
    Raises ModelError when a value is defined twice (SSA) or the nodes form a cycle.
    """
    producer: dict[str, int] = {}
    for i, n in enumerate(nodes):
        for o in n.output:
            if not o:
                continue
            if o in predefined:
                raise ModelError(f"{where}: value {o!r} is defined twice: as {predefined[o]} and as an output "
                                 f"of {node_label(n)}")
            if o in producer:
                raise ModelError(f"{where}: value {o!r} is defined twice: by {node_label(nodes[producer[o]])} "
                                 f"and by {node_label(n)}")
            producer[o] = i
    deps = [{producer[x] for x in reads(n) if x in producer} for n in nodes]
    users: list[list[int]] = [[] for _ in deps]
    waiting = [len(d) for d in deps]
    for i, d in enumerate(deps):
        for j in d:
            users[j].append(i)
    ready = [i for i, w in enumerate(waiting) if w == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for u in users[i]:
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, u)
    if len(order) != len(nodes):
        cycle = _find_cycle(deps, set(range(len(nodes))) - set(order))
        path = " -> ".join(node_label(nodes[i]) for i in cycle)
        raise ModelError(f"{where}: the nodes form a cycle (each reads an output of the next): {path}")
    return order


def _find_cycle(deps: list[set[int]], stuck: set[int]) -> list[int]:
    """One dependency cycle among the ``stuck`` nodes (those a topological sort could not place)."""
    start = min(stuck)
    seen: dict[int, int] = {}
    path: list[int] = []
    i = start
    while i not in seen:
        seen[i] = len(path)
        path.append(i)
        i = min(d for d in deps[i] if d in stuck)  # a stuck node always waits on another stuck node
    return path[seen[i]:] + [i]


def _repeated(fd: Any) -> bool:
    is_repeated = getattr(fd, "is_repeated", None)  # protobuf >= 6; older versions have only ``label``
    return bool(is_repeated) if is_repeated is not None else fd.label == FieldDescriptor.LABEL_REPEATED


def check_text(msg: Any, what: str) -> None:
    """ModelError naming the field when a text (``string``) field of ``msg`` or of a message nested in
    it is not valid UTF-8. The protobuf runtime hands such a field over as ``bytes`` instead of failing
    (ONNX's schema is proto2), and every later use of a name, domain or op type expects ``str``."""
    string, nested = FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_MESSAGE
    stack = [(msg, type(msg).__name__)]
    while stack:
        m, path = stack.pop()
        for fd, val in m.ListFields():
            repeated = _repeated(fd)
            if fd.type == string:
                for i, s in enumerate(val if repeated else (val,)):
                    if not isinstance(s, str):
                        where = f"{path}.{fd.name}" + (f"[{i}]" if repeated else "")
                        raise ModelError(f"{what}: {where} is not valid UTF-8 text: {bytes(s)[:40]!r}")
            elif fd.type == nested:
                if repeated:
                    stack.extend((x, f"{path}.{fd.name}[{i}]") for i, x in enumerate(val))
                else:
                    stack.append((val, f"{path}.{fd.name}"))
