"""The real loads of an ``@instr``'s GPU code, read from its template.

An ``@instr``'s body says what the instruction computes, per thread; its template says
how the GPU does it, and there the memory a lane touches can differ (an ``mma.sync``
lane loads 4 elements of its A fragment and 2 of B, not the 16 + 16 its body reads).
The performance report's bank conflicts and sectors are those of the real loads, so it
reads them from the template where the template says them in this form (the GPU
branch: between ``#if defined(__CUDA_ARCH__)`` and ``#else``, else the whole text)::

    asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
    const int t = (int)(lane & 3u), g = (int)(lane >> 2);
    const float* pa = &{a};                 // a pointer into a window
    const float* pb = &{b} + (g - 2 * t);   // ... at an offset
    ... pa[8 * {a_stride_0} + t] ...        // a load: the window's base + offset
    ... *reinterpret_cast<const float2*>(pb + 2 * t) ...   // a 2-element vector load

Integer expressions of ``+ - * / % & | ^ << >>``, integer literals (``3u``), ``(int)``
casts, the lane's declared integers and the windows' ``{p_stride_k}`` holes are
understood.  ``template_reads`` returns None when a SHARED or GLOBAL window of the
call appears in any other form: the report then walks the body (as before).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_LANE = re.compile(r'"mov\.u32 %0, %%laneid;"\s*:\s*"=r"\((\w+)\)')
_INT_DECL = re.compile(r"\bconst\s+(?:unsigned\s+)?int\s+([^;]+);")
_PTR_DECL = re.compile(r"\b(?:const\s+)?\w+\s*\*\s*(\w+)\s*=\s*&\{(\w+)\}\s*(?:\+\s*([^;]+))?;")
_USE = re.compile(r"\b(\w+)\[")
_VEC = re.compile(r"reinterpret_cast<\s*const\s+(?:float|uint|int)([24])\s*\*\s*>\(")
_SAFE = re.compile(r"^[\w\s+\-*/%&|^<>()]*$")


@dataclass(frozen=True)
class TemplateLoad:
    param: str  # the window parameter
    offset: object  # code object: the element offset from the window's base
    text: str
    width: int = 1  # elements per lane (a float2/float4 load: 2/4)


def _gpu_branch(template: str) -> str:
    m = re.search(r"#if\s+defined\(__CUDA_ARCH__\)[^\n]*\n(.*?)#else", template, re.S)
    return m.group(1) if m else template


def _bracket(text: str, start: int, pair: str = "[]") -> tuple[str, int] | None:
    """The text inside the brackets opening at ``text[start] == pair[0]``, and the end."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == pair[0]:
            depth += 1
        elif text[i] == pair[1]:
            depth -= 1
            if depth == 0:
                return text[start + 1:i], i + 1
    return None


def _py(expr: str) -> str | None:
    """A C integer expression as Python text, or None when it is not one we read."""
    e = re.sub(r"\(\s*(?:unsigned|int)\s*\)", "", expr)
    e = re.sub(r"\b(\d+)[uU]\b", r"\1", e)
    e = e.replace("{", "").replace("}", "")  # holes become names
    if not _SAFE.match(e):
        return None
    return re.sub(r"(?<![/])/(?![/])", "//", e)


def template_reads(template: str, arrays: set) -> tuple[list, list] | None:
    """(lane integer declarations [(name, code)], [TemplateLoad]) of the GPU branch of
    ``template`` for the window parameters ``arrays`` (the SHARED/GLOBAL ones of a call);
    None when one of them is used other than through a pointer declared as above."""
    gpu = _gpu_branch(template)
    lane = _LANE.search(gpu)
    decls = []
    for m in _INT_DECL.finditer(gpu):
        for part in m.group(1).split(","):
            name, eq, value = part.partition("=")
            if not eq:
                continue
            py = _py(value)
            if py is None:
                return None
            decls.append((name.strip(), compile(py.strip(), "<instr template>", "eval")))
    pointers = {}
    for m in _PTR_DECL.finditer(gpu):
        if m.group(2) in arrays:
            off = _py(m.group(3) or "0")
            if off is None:
                return None
            pointers[m.group(1)] = (m.group(2), off.strip())
    # every use of a window hole must be a pointer declaration
    for p in arrays:
        uses = len(re.findall(r"\{" + p + r"\}", gpu))
        decl = sum(1 for m in _PTR_DECL.finditer(gpu) if m.group(2) == p)
        if uses != decl:
            return None
    loads = []
    for m in _USE.finditer(gpu):
        if m.group(1) not in pointers:
            continue
        got = _bracket(gpu, m.end() - 1)
        if got is None:
            return None
        idx = _py(got[0])
        if idx is None:
            return None
        param, base = pointers[m.group(1)]
        text = f"({base}) + ({idx})"
        loads.append(TemplateLoad(param, compile(text, "<instr template>", "eval"), text))
    for m in _VEC.finditer(gpu):  # *reinterpret_cast<const floatN*>(p + offset)
        got = _bracket(gpu, m.end() - 1, "()")
        if got is None:
            return None
        ptr, plus, rest = got[0].strip().partition("+")
        if ptr.strip() not in pointers:
            continue
        idx = _py(rest) if plus else "0"
        if idx is None:
            return None
        param, base = pointers[ptr.strip()]
        text = f"({base}) + ({idx.strip()})"
        loads.append(TemplateLoad(param, compile(text, "<instr template>", "eval"), text,
                                  int(m.group(1))))
    if lane is None and loads:
        return None
    return ([(lane.group(1), None)] if lane else []) + decls, loads


def lane_env(decls: list, lane: int, holes: dict) -> dict:
    """The values of the template's lane integers for ``lane`` (and the holes)."""
    env = {"__builtins__": {}}
    env.update(holes)
    for name, code in decls:
        env[name] = lane if code is None else int(eval(code, env))  # noqa: S307 (checked text)
    return env


__all__ = ["template_reads", "lane_env", "TemplateLoad"]
