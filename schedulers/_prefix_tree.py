"""An approximate, multi-tenant, character-level radix tree with per-tenant LRU eviction.

It approximates each replica's KV prefix cache (as sgl-router's cache-aware policy does) without asking the replicas:
a prompt is inserted under the replica it was dispatched to, and a later prompt's longest common prefix with what a
replica has served predicts how much of it that replica can reuse.

Invariant: a node's tenants are a superset of its children's tenants (insertion marks the whole path; eviction only
removes a tenant from a node none of whose children hold it). Hence the deepest matched node holding a tenant gives
that tenant's match length, and a node left without tenants has no children and can be dropped.
"""

from __future__ import annotations

import heapq
import itertools


class _Node:
    __slots__ = ("text", "children", "parent", "tenants")

    def __init__(self, text: str, parent: _Node | None, tenants: dict[str, int] | None = None) -> None:
        self.text = text  # edge label from the parent
        self.children: dict[str, _Node] = {}  # keyed by the child's first character
        self.parent = parent
        self.tenants: dict[str, int] = tenants if tenants is not None else {}  # tenant -> last-use tick


def _common_prefix_len(edge: str, text: str, start: int) -> int:
    """Length of the common prefix of ``edge`` and ``text[start:]`` without copying ``text``."""
    if text.startswith(edge, start):  # C-speed fast path: the whole edge matches.
        return len(edge)
    n = min(len(edge), len(text) - start)
    i = 0
    while i < n and edge[i] == text[start + i]:
        i += 1
    return i


class PrefixTree:
    """Prefixes served by each tenant (replica), bounded to ``max_chars_per_tenant`` characters per tenant.

    When a tenant exceeds its cap, its least recently used leaves are evicted down to ``evict_to_fraction`` of the
    cap; the hysteresis amortises the eviction walk instead of paying it on every insert once full. Recency is a
    logical tick (not wall time) so behaviour is deterministic.
    """

    def __init__(self, max_chars_per_tenant: int = 2_000_000, evict_to_fraction: float = 0.9) -> None:
        if max_chars_per_tenant < 1:
            raise ValueError("max_chars_per_tenant must be >= 1")
        if not 0.0 <= evict_to_fraction <= 1.0:
            raise ValueError("evict_to_fraction must be in [0, 1]")
        self.max_chars_per_tenant = max_chars_per_tenant
        self.evict_to_fraction = evict_to_fraction
        self._root = _Node("", None)
        self._tick = 0
        self._chars: dict[str, int] = {}

    # ---- queries -------------------------------------------------------------------------------------------------
    def match(self, text: str) -> dict[str, int]:
        """Longest common prefix length (in characters) of ``text`` with what each tenant holds; absent = 0."""
        out: dict[str, int] = {}
        node, i = self._root, 0
        while i < len(text):
            child = node.children.get(text[i])
            if child is None:
                break
            n = _common_prefix_len(child.text, text, i)
            for tenant in child.tenants:  # deeper nodes overwrite: their tenants are a subset
                out[tenant] = i + n
            if n < len(child.text):
                break
            node, i = child, i + n
        return out

    def chars(self, tenant: str) -> int:
        """Characters currently attributed to ``tenant`` (its approximate cache size)."""
        return self._chars.get(tenant, 0)

    def tenants(self) -> list[str]:
        return sorted(self._chars)

    def num_nodes(self) -> int:
        count, stack = 0, [self._root]
        while stack:
            node = stack.pop()
            count += 1
            stack.extend(node.children.values())
        return count - 1  # the root holds nothing

    # ---- updates -------------------------------------------------------------------------------------------------
    def insert(self, text: str, tenant: str) -> None:
        """Record that ``tenant`` served ``text``; truncated to the cap since only the prefix predicts reuse."""
        text = text[: self.max_chars_per_tenant]
        self._tick += 1
        tick = self._tick
        self._chars.setdefault(tenant, 0)
        node, i = self._root, 0
        while i < len(text):
            child = node.children.get(text[i])
            if child is None:
                child = _Node(text[i:], node)
                node.children[text[i]] = child
                n = len(child.text)
            else:
                n = _common_prefix_len(child.text, text, i)
                if n < len(child.text):
                    child = self._split(child, n)
            if tenant not in child.tenants:
                self._chars[tenant] += len(child.text)
            child.tenants[tenant] = tick
            node, i = child, i + n
        if self._chars[tenant] > self.max_chars_per_tenant:
            self.evict(tenant, int(self.max_chars_per_tenant * self.evict_to_fraction))

    def evict(self, tenant: str, target_chars: int) -> None:
        """Drop ``tenant``'s least recently used leaves until it holds at most ``target_chars`` characters.

        Ancestors are touched whenever a descendant is, so their ticks are >= their children's and a min-heap of the
        tenant's current leaves yields a valid LRU order as parents become leaves in turn.
        """
        if tenant not in self._chars:
            return
        seq = itertools.count()
        heap: list[tuple[int, int, _Node]] = []
        for node in self._tenant_nodes(tenant):
            if not any(tenant in c.tenants for c in node.children.values()):
                heap.append((node.tenants[tenant], next(seq), node))
        heapq.heapify(heap)
        while heap and self._chars[tenant] > target_chars:
            _, _, node = heapq.heappop(heap)
            parent = self._drop(node, tenant)
            if parent is not self._root and not any(tenant in c.tenants for c in parent.children.values()):
                heapq.heappush(heap, (parent.tenants[tenant], next(seq), parent))

    def remove_tenant(self, tenant: str) -> None:
        """Forget everything attributed to ``tenant`` and prune nodes nobody holds any more."""
        if tenant not in self._chars:
            return
        # Children before parents, so a parent's emptiness is decided after its children are gone.
        for node in reversed(self._tenant_nodes(tenant)):
            self._drop(node, tenant)
        del self._chars[tenant]

    # ---- internals -----------------------------------------------------------------------------------------------
    def _tenant_nodes(self, tenant: str) -> list[_Node]:
        """Nodes holding ``tenant`` in pre-order (parents before children); only its subtrees are visited."""
        out: list[_Node] = []
        stack = [c for c in self._root.children.values() if tenant in c.tenants]
        while stack:
            node = stack.pop()
            out.append(node)
            stack.extend(c for c in node.children.values() if tenant in c.tenants)
        return out

    def _drop(self, node: _Node, tenant: str) -> _Node:
        """Remove ``tenant`` from ``node`` (deleting it if now unused); return its parent."""
        del node.tenants[tenant]
        self._chars[tenant] -= len(node.text)
        parent = node.parent
        assert parent is not None
        if not node.tenants:
            del parent.children[node.text[0]]
        return parent

    @staticmethod
    def _split(node: _Node, n: int) -> _Node:
        """Split ``node``'s edge after ``n`` chars; the new upper node inherits all tenants (char counts unchanged)."""
        parent = node.parent
        assert parent is not None and 0 < n < len(node.text)
        mid = _Node(node.text[:n], parent, dict(node.tenants))
        parent.children[mid.text[0]] = mid
        node.text = node.text[n:]
        node.parent = mid
        mid.children[node.text[0]] = node
        return mid
