"""Gate 1's name resolution: what each name, attribute chain and constant of a kernel module is.

Every import, alias, attribute chain and call target resolves to a qualified name (``tl.load`` ->
``triton.language.load``, ``triton_helpers.maximum`` ->
``torch._inductor.runtime.triton_helpers.maximum``) looked up in the allowed namespace of
:mod:`.static_names`; what is not there becomes a finding that names the line and the construct.
Names are never trusted: an allowed module imported under another name is the same module, a name
bound to something else is that something else.

One :class:`NameResolver` per module holds its symbol table and its findings; the module rules
(:mod:`.static_rules`), the ``@triton.jit`` body rules (:mod:`.static_jit`), the decorator rules
(:mod:`.static_decorators`) and the launcher rules (:mod:`.static_launcher`) all ask it. Pure
Python (:mod:`ast`), no torch.
"""

from __future__ import annotations

import ast

from . import static_names as names
from .static_names import KernelNamespace, Member
from .static_tables import (
    BUILTIN_NAMES,
    FORBIDDEN_CALLS,
    FORBIDDEN_MODULES,
    FORBIDDEN_NAMES,
    STREAM_ATTRIBUTES,
    DialectPolicy,
    ModuleFacts,
    Ref,
    StaticFinding,
    Symbol,
    is_dunder,
    short,
)


class NameResolver:
    """The symbol table of one kernel module, what its expressions resolve to, and the findings."""

    def __init__(self, namespace: KernelNamespace, policy: DialectPolicy):
        self.ns = namespace
        self.policy = policy
        self.findings: list[StaticFinding] = []
        self.facts = ModuleFacts()

    def add(self, rule: str, message: str, node: ast.AST | None) -> None:
        line = getattr(node, "lineno", None) if node is not None else None
        self.findings.append(StaticFinding(rule, message, line))

    def resolve_qualified(self, qualified: str) -> Member | None:
        """``a.b.c`` as an import names it: the longest known module prefix, then its members."""
        parts = qualified.split(".")
        for cut in range(len(parts), 0, -1):
            module = ".".join(parts[:cut])
            if self.ns.is_module(module):
                member = Member(names.MODULE, module)
                for part in parts[cut:]:
                    if member.kind != names.MODULE:
                        return None
                    found = self.ns.member(member.target, part)
                    if found is None:
                        return None
                    member = found
                return member
        return None

    def module_allowed(self, module: str) -> bool:
        if module == names.TORCH:
            return self.policy.torch_import
        return module in self.ns.importable

    def member_of(self, base: Member, attr: str, node: ast.AST, text: str, rest: tuple[str, ...] = ()) -> Member | None:
        """``base.attr`` for a module ``base``; a finding when it is not allowed (``rest``: the attributes after)."""
        found = self.ns.member(base.target, attr)
        if found is not None and (found.target != names.TORCH or self.policy.torch_import):
            return found
        self.reject_member(base.target, attr, node, text, rest)
        return None

    def reject_member(self, module: str, attr: str, node: ast.AST, text: str, rest: tuple[str, ...] = ()) -> None:
        qualified = f"{module}.{attr}"
        if any(a in STREAM_ATTRIBUTES for a in rest):
            self.add("stream", f"`{text}.{'.'.join(rest)}`: kernels launch on the stream the wrapper gives them; new "
                               "streams, events and synchronisation escape the timer", node)
        if is_dunder(attr):
            self.add("forbidden-call", f"dunder attribute `.{attr}` in `{text}` (reaches the interpreter's "
                                       "internals)", node)
        elif module == names.TORCH:
            self.add("torch", f"`{text}` (`{qualified}`): a launcher uses torch only for scratch (torch.empty, "
                              "empty_like, zeros, zeros_like) and dtypes", node)
        elif attr in FORBIDDEN_NAMES:
            self.add("torch", f"`{text}` reaches torch (`{qualified}`) from inside the kernel module", node)
        elif attr in STREAM_ATTRIBUTES:
            self.add("stream", f"`{text}`: kernels launch on the stream the wrapper gives them; new streams, "
                               "events and synchronisation escape the timer", node)
        else:
            self.add("forbidden-import", f"`{text}` resolves to `{qualified}`, which is not in the allowed set of "
                                         f"`{module}`", node)

    def resolve_name(self, name: str, local: frozenset[str] | set[str]) -> Ref:
        if name in local:
            return Ref("local", name=name)
        symbol = self.facts.symbols.get(name)
        if symbol is not None:
            if symbol.kind == "import":
                return Ref("member", symbol.member, name)
            return Ref(symbol.kind, name=name)
        if name in BUILTIN_NAMES:
            return Ref("builtin", name=name)
        return Ref("undefined", name=name)

    def reject_name(self, name: str, node: ast.AST) -> None:
        """A name that is not a local, a module-level name or an allowed builtin here."""
        if name in FORBIDDEN_NAMES:
            self.add("torch", f"`{name}` used inside the kernel module: a candidate is Triton only, with no torch "
                              "or vendor-library calls", node)
        elif name in FORBIDDEN_CALLS:
            self.add("forbidden-call", f"`{name}` is not allowed ({FORBIDDEN_CALLS[name]})", node)
        elif is_dunder(name):
            self.add("forbidden-call", f"`{name}` (dunder names reach the interpreter's internals)", node)
        elif name in FORBIDDEN_MODULES:
            self.add("forbidden-import", f"`{name}` is not allowed in a kernel module", node)
        elif name in BUILTIN_NAMES:
            self.add("forbidden-call", f"the builtin `{name}` is not allowed here", node)
        else:
            self.add("undefined", f"`{name}` is not defined in the module (not a parameter, a local, an import "
                                  "or a module-level constant)", node)

    def chain(self, node: ast.AST) -> tuple[ast.Name, list[ast.Attribute]] | None:
        """``a.b.c`` as (Name a, [.b, .c]); None when the base is not a name."""
        attrs: list[ast.Attribute] = []
        while isinstance(node, ast.Attribute):
            attrs.append(node)
            node = node.value
        if isinstance(node, ast.Name):
            return node, list(reversed(attrs))
        return None

    def resolve_chain(self, node: ast.Name | ast.Attribute, local: frozenset[str] | set[str]) -> Ref | None:
        """Resolve ``a.b.c`` (a finding and None when it leaves the allowed set)."""
        found = self.chain(node)
        assert found is not None
        base, attrs = found
        if is_dunder(base.id):
            self.reject_name(base.id, base)
            return None
        ref = self.resolve_name(base.id, local)
        if ref.kind == "undefined":
            self.reject_name(base.id, base)
            return None
        for position, attr in enumerate(attrs):
            if is_dunder(attr.attr):
                self.add("forbidden-call", f"dunder attribute `.{attr.attr}` in `{short(node)}` (getattr tricks)",
                         attr)
                return None
            if ref.kind == "member" and ref.member is not None and ref.member.kind == names.MODULE:
                member = self.member_of(ref.member, attr.attr, attr, short(attr),
                                        tuple(a.attr for a in attrs[position + 1:]))
                if member is None:
                    return None
                ref = Ref("member", member, attr.attr)
                continue
            if ref.kind in ("local", "constant", "value"):
                # attributes of a value: the caller decides (tensor attributes, methods)
                rest = [a.attr for a in attrs[position:]]
                return Ref("value", name=".".join(rest))
            what = {"member": f"`{ref.member.target if ref.member else ref.name}`", "jit": "a @triton.jit function",
                    "launcher": "the launcher", "builtin": f"the builtin `{ref.name}`"}.get(ref.kind, ref.kind)
            if attr.attr in STREAM_ATTRIBUTES:
                self.add("stream", f"`{short(attr)}`: new streams, events and synchronisation escape the timer", attr)
            else:
                self.add("forbidden-import", f"`{short(attr)}` takes the attribute `.{attr.attr}` of {what}; only "
                                             "listed modules have attributes a kernel may use", attr)
            return None
        return ref

    def bind(self, name: str, symbol: Symbol, node: ast.AST) -> None:
        if is_dunder(name):
            self.add("forbidden-call", f"module-level name `{name}` (dunder names reach the interpreter's "
                                       "internals)", node)
            return
        if name in self.facts.symbols:
            self.add("top-level", f"`{name}` is bound twice at module level (the second silently replaces the "
                                  "first)", node)
            return
        self.facts.symbols[name] = symbol

    def is_constexpr_annotation(self, node: ast.AST) -> bool:
        if isinstance(node, (ast.Name, ast.Attribute)) and self.chain(node) is not None:
            ref = self.resolve_chain(node, frozenset())
            return ref is not None and ref.member is not None and ref.member.target == f"{names.TL}.constexpr"
        return False

    def is_constant(self, node: ast.AST) -> bool:
        """Immutable values computed from literals, earlier constants, math and tl.constexpr(...)."""
        if isinstance(node, ast.Constant):
            return True
        if isinstance(node, ast.Tuple):
            return all(self.is_constant(e) for e in node.elts)
        if isinstance(node, ast.UnaryOp):
            return self.is_constant(node.operand)
        if isinstance(node, ast.BinOp):
            return self.is_constant(node.left) and self.is_constant(node.right)
        if isinstance(node, ast.BoolOp):
            return all(self.is_constant(v) for v in node.values)
        if isinstance(node, ast.Compare):
            return self.is_constant(node.left) and all(self.is_constant(c) for c in node.comparators)
        if isinstance(node, ast.Name):
            symbol = self.facts.symbols.get(node.id)
            if symbol is not None and symbol.kind == "constant":
                return True
        if isinstance(node, (ast.Name, ast.Attribute)) and self.chain(node) is not None:
            found = self.chain(node)
            assert found is not None
            symbol = self.facts.symbols.get(found[0].id)
            if symbol is None or symbol.kind != "import":
                return False
            ref = self.resolve_chain(node, frozenset())
            return ref is not None and ref.member is not None and ref.member.kind == names.MATH_VALUE
        if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)) \
                and (called := self.chain(node.func)) is not None and not node.keywords:
            symbol = self.facts.symbols.get(called[0].id)
            if symbol is None or symbol.kind != "import":
                return False
            ref = self.resolve_chain(node.func, frozenset())
            if ref is None or ref.member is None:
                return False
            if ref.member.kind == names.MATH_FUNCTION or ref.member.target == f"{names.TL}.constexpr":
                return all(self.is_constant(a) for a in node.args)
        return False
