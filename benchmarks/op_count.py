"""Operator counts of one training step (forward, backward, optimizer step) with torch.profiler.

A tiny model is bound by the cost of issuing operators (Python, the dispatcher, a kernel launch each on a GPU), not
by arithmetic, so the number of operators a step issues is a speed measure that does not depend on the machine's
load. Three counts:

- aten calls: every ``aten::`` operator the profiler records, nested ones included (``aten::linear`` calls
  ``aten::t`` and ``aten::addmm``): the dispatcher's work;
- issued ops: the ``aten::`` calls with no ``aten::`` caller, each one issued from Python in the forward pass, by
  the autograd engine in the backward pass, or by the optimizer;
- computing ops: the issued ops that are not views (``VIEW_OPS`` that copied nothing: a view only relabels
  memory and launches no kernel), a device-independent stand-in for a GPU's kernel launches (on CUDA the
  launches themselves are counted too).

And the bytes its copies, casts and fills move (``aten::copy_`` reads its source and writes its destination,
``aten::fill_`` writes; under autocast every cast is a copy): on a GPU these kernels are bound by memory, so their
time is about these bytes over the memory's bandwidth, whatever the machine that counted them.

Each issued op is charged to a site: in the forward pass the innermost module running it (its path, layer indices
as ``*``); in the backward pass the module whose forward op created the autograd node (matched by the node's
sequence number); ``(grad accumulation)`` for writing parameter gradients, ``(optimizer)`` for the update.
"""

import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch.profiler import ProfilerActivity, profile, record_function

PHASES = ("forward", "backward", "optimizer")
# ops that return a view of their input (or nothing but metadata): no arithmetic, no kernel on a GPU
VIEW_OPS = frozenset(f"aten::{op}" for op in (
    "view", "_unsafe_view", "reshape", "_reshape_alias", "view_as", "transpose", "t", "permute", "expand", "expand_as",
    "unsqueeze", "squeeze", "unbind", "unflatten", "flatten", "split", "split_with_sizes", "chunk", "select", "slice",
    "narrow", "as_strided", "alias", "detach"))
_SITE = "site: "
# bytes per element of the dtypes the profiler names (record_shapes); "Scalar" is a number passed by value
ELEMENT_BYTES = {"double": 8, "long int": 8, "float": 4, "int": 4, "c10::BFloat16": 2, "c10::Half": 2,
                 "short int": 2, "bool": 1, "unsigned char": 1, "signed char": 1, "Scalar": 0}
MOVING_OPS = {"aten::copy_": 2, "aten::fill_": 1}  # the ops every copy, cast and fill ends in: {op: tensors it moves}


@dataclass
class OpCount:
    """What one step issued: ``calls`` {aten op: calls, nested included}; ``issued`` {(phase, site): issued ops};
    ``issued_ops`` {aten op: issued calls}; ``kernels``: CUDA kernel launches (None on the CPU)."""

    calls: Counter = field(default_factory=Counter)
    issued: Counter = field(default_factory=Counter)
    issued_ops: Counter = field(default_factory=Counter)
    views: Counter = field(default_factory=Counter)  # {phase: issued ops that only made a view}
    moved: Counter = field(default_factory=Counter)  # {phase: bytes read and written by copies, casts and fills}
    kernels: int | None = None

    def computing(self, phase: str | None = None) -> int:
        """Issued ops that are not views (``VIEW_OPS`` that did not copy), in ``phase`` or in all."""
        phases = PHASES if phase is None else (phase,)
        return sum(self.phase_total(p) - self.views[p] for p in phases)

    def phase_total(self, phase: str) -> int:
        return sum(n for (p, _), n in self.issued.items() if p == phase)

    def per_site(self) -> Counter:
        """{site: issued ops, forward and backward together}."""
        out = Counter()
        for (phase, site), n in self.issued.items():
            if phase != "optimizer":
                out[site] += n
        return out


def site_name(path: str) -> str:
    """A module's path with its layer indices as ``*`` (``model.layers.3.attn`` -> ``model.layers.*.attn``)."""
    return re.sub(r"(?<=\.)\d+(?=\.|$)|^\d+(?=\.|$)", "*", path) or "(root)"


def _label_modules(model: torch.nn.Module) -> list:
    """Forward hooks that wrap every module's forward in a profiler range named after its site."""
    stack, handles = [], []
    for path, module in model.named_modules():
        label = _SITE + site_name(path)
        handles.append(module.register_forward_pre_hook(
            lambda m, a, label=label: stack.append(record_function(label).__enter__())))
        handles.append(module.register_forward_hook(lambda m, a, o: stack.pop().__exit__(None, None, None)))
    return handles


def is_view(event) -> bool:
    """A profiler event of a view op that made no copy (``reshape`` of a non-contiguous tensor clones)."""
    def copies(e):
        return any(c.name in ("aten::clone", "aten::copy_", "aten::contiguous") or copies(c) for c in e.cpu_children)
    return event.name in VIEW_OPS and not copies(event)


def bytes_moved(event) -> int:
    """Bytes an ``aten::copy_`` (reads src, writes self) or ``aten::fill_`` (writes self) moves, from the
    profiler's recorded shapes and dtypes; 0 for any other op."""
    operands = MOVING_OPS.get(event.name, 0)
    unknown = set(event.input_dtypes[:operands]) - set(ELEMENT_BYTES)
    if unknown:
        raise ValueError(f"{event.name} on {sorted(unknown)}: add its element size to ELEMENT_BYTES")
    return sum(math.prod(shape) * ELEMENT_BYTES[dtype]
               for shape, dtype in zip(event.input_shapes[:operands], event.input_dtypes[:operands]))


def _ancestors(event):
    parent = event.cpu_parent
    while parent is not None:
        yield parent
        parent = parent.cpu_parent


def count_step(model: torch.nn.Module, loss_of: Callable[[], torch.Tensor], optimizer: torch.optim.Optimizer,
               warmup: bool = True) -> OpCount:
    """Profile one step -- ``loss_of()`` (runs ``model``), backward, ``optimizer.step()``, zero_grad -- and count its
    operators and the bytes its copies move. ``warmup`` runs one step first, so the optimizer's state exists and the
    count is a steady step's."""

    def step():
        with record_function("forward"):
            loss = loss_of()
        with record_function("backward"):
            loss.backward()
        with record_function("optimizer"):
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

    if warmup:
        step()
    cuda = next(model.parameters()).is_cuda
    handles = _label_modules(model)
    try:
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        with profile(activities=activities, record_shapes=True) as prof:
            step()
            if cuda:
                torch.cuda.synchronize()
    finally:
        for handle in handles:
            handle.remove()

    events = prof.events()
    forward_site = {}  # autograd sequence number -> site of the forward op that made the node
    count = OpCount()
    for event in events:
        if not event.name.startswith("aten::"):
            continue
        ancestors = list(_ancestors(event))
        names = [a.name for a in ancestors]
        if "optimizer" in names:
            phase = "optimizer"
        elif "backward" in names or any(n.startswith("autograd::engine") for n in names):
            phase = "backward"
        elif "forward" in names:
            phase = "forward"
        else:
            continue
        count.calls[event.name] += 1
        if not any(n in MOVING_OPS for n in names):  # every copy ends in one copy_ or fill_, nested ones too
            count.moved[phase] += bytes_moved(event)
        if phase == "forward":
            site = next((n[len(_SITE):] for n in names if n.startswith(_SITE)), "(outside modules)")
            if event.sequence_nr >= 0:  # this op made an autograd node (nested ops too: linear's addmm)
                forward_site[event.sequence_nr] = site
        if any(n.startswith("aten::") for n in names):
            continue  # nested: counted in calls, issued by its caller
        if phase == "backward":
            node = next((a for a in ancestors if a.sequence_nr >= 0 and not a.name.startswith("aten::")), None)
            if node is None:
                site = "(grad accumulation)" if any("AccumulateGrad" in n for n in names) else "(autograd engine)"
            else:
                site = node.sequence_nr  # resolved below, once every forward op is seen
        elif phase == "optimizer":
            site = "(optimizer)"
        count.issued[(phase, site)] += 1
        count.issued_ops[event.name] += 1
        count.views[phase] += is_view(event)
    for (phase, site), n in list(count.issued.items()):
        if isinstance(site, int):
            del count.issued[(phase, site)]
            count.issued[(phase, forward_site.get(site, "(unmatched backward node)"))] += n
    if cuda:
        count.kernels = sum(1 for e in events if e.name in ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC"))
    return count


def count_issued(run: Callable[[], object]) -> Counter:
    """{aten op: issued calls} of one call of ``run`` (after one warm-up call): the ``aten::`` calls with no
    ``aten::`` caller, as for a training step's forward pass. For a decode step through a cache, each call decodes
    one more token."""
    run()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        run()
    issued = Counter()
    for event in prof.events():
        if event.name.startswith("aten::") and not any(a.name.startswith("aten::") for a in _ancestors(event)):
            issued[event.name] += 1
    return issued


def report(counts: dict[str, OpCount], n_layers: int, lead: str, top: int = 15) -> None:
    """Print the totals per model and phase, the op kinds model ``lead`` issues most (beside the others'), and each
    model's sites, the layers' per layer."""
    names = list(counts)
    kernels = any(c.kernels is not None for c in counts.values())
    width = max(len(n) for n in names) + 2
    print(f"{'issued aten ops in one training step':<{width}} {'forward':>8} {'backward':>9} {'optimizer':>9} "
          f"{'total':>7} {'per layer':>9} {'computing':>9} {'aten calls':>10} {'copied MB':>9}"
          + ("  kernels" if kernels else ""))
    for name, c in counts.items():
        layers = sum(n for site, n in c.per_site().items() if "*" in site)
        total = sum(c.issued.values())
        print(f"{name:<{width}} {c.phase_total('forward'):>8} {c.phase_total('backward'):>9} "
              f"{c.phase_total('optimizer'):>9} {total:>7} {layers / n_layers:>9.1f} {c.computing():>9} "
              f"{sum(c.calls.values()):>10} {sum(c.moved.values()) / 1e6:>9.1f}"
              + (f"  {c.kernels:>7}" if kernels else ""))
    print(f"\nop kinds {lead} issues most (issued per step; all aten calls, nested included, in brackets)")
    print(f"  {'op':<36}" + "".join(f"{n[:22]:>24}" for n in names))
    for op, _ in counts[lead].issued_ops.most_common(top):
        print(f"  {op:<36}" + "".join(f"{counts[n].issued_ops[op]:>12} [{counts[n].calls[op]:>7}]  " for n in names))
    for name, c in counts.items():
        print(f"\nsites of {name} (issued ops, forward + backward; layer sites per layer)")
        for site, n in sorted(c.per_site().items(), key=lambda kv: -kv[1]):
            per = f"{n / n_layers:7.1f} per layer" if "*" in site else f"{n:7d}"
            print(f"  {site:<60} {per}")
