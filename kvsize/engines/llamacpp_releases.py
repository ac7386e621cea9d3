"""llama.cpp's history as data: one `LlamaCppRules` record per era of llama.cpp trees whose cache rules agree.

llama.cpp numbers its builds by commit count (`b7445` = the 7,445th commit; its start-up log prints `build: 7445
(4b2a4778f)`, later `common_init: build 11312 (0c1e57098)`). The trees read are those vendored by llama-cpp-python
(`vendor/llama.cpp` of its sdists; its CHANGELOG.md names each commit), labelled by the commit's date. A build is
pinned to an era only where kvsize has read a tree or a start-up log of known build; builds are the keys of
`LLAMACPP_RELEASES`. Trees older than the oldest pinned build (b6209) have no known build number: they are named
(`2025-03`, `2025-05`) or reached through the llama-cpp-python version that vendors them. An sdist build of
llama-cpp-python prints `build: 0 (unknown)` or `1 (<commit>)` (no git: cmake/build-info.cmake), so its version or
commit is what names its tree. docs/releases/llamacpp.md tabulates the eras.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Literal

from kvsize.engines.releases import Era, ReleaseTable, Resolved
from kvsize.errors import UsageError


@dataclass(frozen=True)
class LlamaCppRules:
    """The cache rules of one era of llama.cpp trees."""

    iswa: bool
    """Sliding layers in their own window-sized cache (src/llama-kv-cache-iswa.cpp:llama_kv_cache_iswa, PR #13194,
    2025-05); False: every layer holds n_ctx cells (llama-kv-cache.cpp:llama_kv_cache_unified@2025-05)."""
    streams: bool
    """Per-sequence streams (kv_unified false by default, common/common.h@2025-08); False: one cache for all."""
    cell_pad: Literal["kv_padding", "context_256"]
    """kv_padding: each stream padded to `flash_attn ? 256 : 32` cells
    (llama-kv-cache-unified.cpp:get_padding, llama-model.cpp:create_memory@2025-08, n_ctx_per_stream =
    pad(cdiv(n_ctx, n_seq), pad)); context_256: llama-context.cpp:llama_context@2026-04 pads n_ctx and then
    n_ctx_seq = n_ctx / n_seq to 256."""
    flash_attn_default: bool
    """-fa on by default (common/common.h@2026-04 flash_attn_type = AUTO; `bool flash_attn = false` @2025-08)."""
    mla: Literal["per_head", "k_and_v", "latent_k", "unpinned"]
    """MLA rows per cell: decompressed per-head K and V (llama-kv-cache.cpp:llama_kv_cache_init@2025-03), latent K
    (576) + V (512) (llama-model.cpp:load_hparams n_embd_head_k_mla@2025-05), latent K only
    (llama-kv-cache.cpp:llama_kv_cache `has_v = !is_mla`@2026-04, PR #19067 of 2026-01-24), or not pinned for
    the builds of the era (refused)."""
    indexer_cache: bool
    """DeepSeek-V3.2 (LLM_ARCH_DEEPSEEK32) served with a second cache of indexer keys: one head of
    `indexer_head_size` K-only rows per cell beside the MLA cache (llama-kv-cache-dsa.cpp:llama_kv_cache_dsa@b9665);
    False: llama.cpp has no DEEPSEEK32 architecture (llama-model.cpp@2026-04)."""
    glm_dsa_indexer: Literal["none", "full_layers"] = "none"
    """GLM-5 (LLM_ARCH_GLM_DSA) indexer keys: "none", the plain MLA cache (llama-model.cpp create_memory@b9665 puts
    only LLM_ARCH_DEEPSEEK32 in llama_kv_cache_dsa); "full_layers", llama_kv_cache_dsa with the indexer cache on the
    layers whose indexer is full (filter_lid: is_indexer_full(il), llama-model.cpp@b11312; GLM-5.2's shared layers
    keep none)."""
    draft_row_types: frozenset[str] = frozenset()
    """Speculative draft types that keep `--draft-max` extra recurrent-state rows per slot
    (common/common.h:need_n_rs_seq; llama-memory-recurrent.cpp:llama_memory_recurrent n_rows = mem_size x
    (1 + n_rs_seq)@b9665)."""
    rollback_models: frozenset[str] = frozenset()
    """Model types whose recurrent state keeps those rows (llama-arch.cpp:llm_arch_supports_rs_rollback; others
    clamp n_rs_seq to 0, llama-context.cpp:llama_context)."""


RULES_2503 = LlamaCppRules(
    iswa=False, streams=False, cell_pad="kv_padding", flash_attn_default=False, mla="per_head", indexer_cache=False
)
RULES_2505 = replace(RULES_2503, mla="k_and_v")
RULES_2508 = replace(RULES_2505, iswa=True, streams=True)
RULES_2604 = replace(RULES_2508, cell_pad="context_256", flash_attn_default=True, mla="latent_k")
# b7445 to b9664: flash attention auto by b7445 (its log: "flash_attn = auto"); the builds of PR #19067 (V-less
# MLA) and of the 256-cell context padding are not pinned, so MLA is refused there.
RULES_2512 = replace(RULES_2604, mla="unpinned")
RULES_2606 = replace(
    RULES_2604,
    indexer_cache=True,
    draft_row_types=frozenset({"mtp"}),
    rollback_models=frozenset({"qwen3_5", "qwen3_5_moe", "qwen3_5_text", "qwen3_5_moe_text"}),
)
RULES_2610 = replace(
    RULES_2606,
    glm_dsa_indexer="full_layers",
    draft_row_types=frozenset({"mtp", "eagle3", "dflash", "dspark"}),
    rollback_models=RULES_2606.rollback_models | {"nemotron_h", "lfm2", "lfm2_moe"},
)

DRAFT_TYPES = ("mtp", "eagle3", "dflash", "dspark")  # common/arg.cpp --spec-type draft kinds with recurrent rows


@dataclass(frozen=True)
class Tree:
    """A llama.cpp tree kvsize read: its date label, commit, build (None: not known) and who vendors it."""

    label: str
    commit: str
    build: int | None
    python: str | None
    """The llama-cpp-python version that vendors it (None: read from a start-up log only)."""
    rules: LlamaCppRules


TREES = (
    Tree("2025-03", "7841fc723e059d1fd9640e5c0ef19050fcc7c698", None, "0.3.8", RULES_2503),
    Tree("2025-05", "8733e0cf6eefc7c7752297cc22d0836706f4222c", None, "0.3.9", RULES_2505),
    Tree("2025-08", "4227c9be4268ac844921b90f31595f81236bd317", None, "0.3.16", RULES_2508),
    Tree("2025-08", "fb22dd07", 6209, None, RULES_2508),
    Tree("2025-12", "4b2a4778f", 7445, None, RULES_2512),
    Tree("2026-04", "f49e9178767d557a522618b16ce8694f9ddac628", None, "0.3.20", RULES_2604),
    Tree("2026-06", "e3a74b299", 9665, "0.3.30", RULES_2606),
    Tree("2026-10", "0c1e57098bba43ac29e6e3b677cdceebdd22334f", 11312, "0.3.36", RULES_2610),
)

# Named eras: the trees without a known build, and the labels of kvsize before builds were modelled.
ERA_2503 = Era("2025-03", "2025-03", RULES_2503, ("llama-cpp-python 0.3.8 (7841fc723)",))
ERA_2505 = Era("2025-05", "2025-05", RULES_2505, ("llama-cpp-python 0.3.9 (8733e0cf6)",))
ERA_2604 = Era("2026-04", "2026-04", RULES_2604, ("llama-cpp-python 0.3.20 (f49e91787)",))


@dataclass(frozen=True)
class LlamaCppReleaseTable(ReleaseTable[LlamaCppRules]):
    """Builds (`b7445`, `7445`), llama-cpp-python versions (`0.3.16`), commits and tree labels to eras."""

    named: dict[str, Era[LlamaCppRules]] = field(default_factory=dict)
    trees: tuple[Tree, ...] = ()

    def resolve(self, text: str | None) -> Resolved[LlamaCppRules]:
        if text is None:
            return Resolved(f"b{self.newest.last}", self.newest)
        typed = text.strip()
        if typed in self.named:
            return Resolved(typed, self.named[typed])
        if re.fullmatch(r"[bB]?\d{1,7}", typed):
            return self._build(int(typed.lstrip("bB")))
        if re.fullmatch(r"v?\d+\.\d+\.\d+", typed):
            return self._python(typed.lstrip("v"))
        if re.fullmatch(r"[0-9a-fA-F]{7,40}", typed):
            for tree in self.trees:
                if tree.commit.startswith(typed.lower()) or typed.lower().startswith(tree.commit):
                    return self._tree(tree, typed)
            raise UsageError(
                f"llama.cpp commit {typed[:12]} is not one kvsize has read",
                hint="Give its build number (b7445) or the llama-cpp-python version that vendors it.",
            )
        raise UsageError(
            f"--engine-version '{typed[:40]}' is not a llama.cpp build",
            hint="Give a build (b7445 or 7445, as llama.cpp's start-up log prints it), a llama-cpp-python version "
            f"(0.3.16) or a tree: {', '.join(self.named)}.",
        )

    def span_of(self, era: Era[LlamaCppRules]) -> str:
        """Builds as llama.cpp prints them (`b7445-b8164`); a tree without a known build by its label."""
        if era not in self.eras:
            return era.first
        return f"b{era.first}" if era.first == era.last else f"b{era.first}-b{era.last}"

    def _tree(self, tree: Tree, typed: str) -> Resolved[LlamaCppRules]:
        if tree.build is not None:
            return self._build(tree.build)
        return Resolved(typed, self.named[tree.label])

    def _build(self, build: int) -> Resolved[LlamaCppRules]:
        if build < int(self.oldest.first):
            raise UsageError(
                f"llama.cpp b{build} is not modelled: older than the oldest build kvsize has pinned "
                f"(b{self.oldest.first})",
                hint="Older trees have no known build number: name one (2025-05, 2025-03) or the llama-cpp-python "
                "version that vendors it (0.3.9, 0.3.8).",
            )
        resolved = super().resolve(str(build))
        release = f"b{build}"
        pinned = {t.build for t in self.trees if t.build is not None}
        note = resolved.note
        if note is None and build not in pinned:
            read = sorted(pinned)
            below = max(b for b in read if b <= build)
            above = [b for b in read if b > build]
            if above:
                note = (
                    f"llama.cpp b{build} lies between the builds kvsize has read (b{below} and b{above[0]}): sized "
                    f"with the rules of b{below}'s era; a rule that changed between them is not pinned"
                )
        elif note is not None:
            note = note.replace(f"llama.cpp {build}", f"llama.cpp {release}")
        return Resolved(release, resolved.era, note)

    def _python(self, version: str) -> Resolved[LlamaCppRules]:
        from packaging.version import Version

        vendored = sorted((t for t in self.trees if t.python), key=lambda t: Version(t.python or "0"))
        asked = Version(version)
        shown = f"llama-cpp-python {version}"
        if asked < Version(vendored[0].python or "0"):
            raise UsageError(
                f"{shown} is not modelled: older than the oldest tree kvsize models (llama-cpp-python "
                f"{vendored[0].python})",
                hint=f"kvsize models llama-cpp-python {vendored[0].python} to {vendored[-1].python}.",
            )
        tree = [t for t in vendored if Version(t.python or "0") <= asked][-1]
        resolved = self._tree(tree, shown)
        if Version(tree.python or "0") == asked:
            return Resolved(shown, resolved.era, resolved.note)
        newer = asked > Version(vendored[-1].python or "0")
        note = (
            f"{shown} is newer than the newest kvsize has read ({vendored[-1].python}); sized with its tree's rules"
            if newer
            else f"{shown}'s tree is not read: sized with the rules of the tree of {tree.python} ({tree.label})"
        )
        return Resolved(shown, resolved.era, note)


ERA_2508 = Era("6209", "6209", RULES_2508, ("b6209 log (fb22dd07)", "llama-cpp-python 0.3.16 (4227c9be4)"))
ERA_2512 = Era("7445", "8164", RULES_2512, ("b7445 log (4b2a4778f)", "b8164 log (b68d75165)"))
ERA_2606 = Era("9665", "9665", RULES_2606, ("llama-cpp-python 0.3.30 (e3a74b299)",))
ERA_2610 = Era("11312", "11312", RULES_2610, ("llama-cpp-python 0.3.36 (0c1e57098)",))

LLAMACPP_RELEASES = LlamaCppReleaseTable(
    engine="llamacpp",
    title="llama.cpp",
    eras=(ERA_2508, ERA_2512, ERA_2606, ERA_2610),
    named={
        "2026-10": ERA_2610,
        "2026-06": ERA_2606,
        "2026-04": ERA_2604,
        "2025-08": ERA_2508,
        "2025-05": ERA_2505,
        "2025-03": ERA_2503,
        # kvsize's labels before builds were modelled: "2026-01" was the 0.3.36 tree, "2025-04" the 0.3.9 one.
        "2026-01": ERA_2610,
        "2025-04": ERA_2505,
    },
    trees=TREES,
)
