"""vLLM's profile run of a multimodal model: the encoder's dummy batch and what it leaves on the GPU. Pure.

vLLM V1 (v1/worker/gpu_model_runner.py GPUModelRunner.profile_run, read in 0.8.5, 0.9.0, 0.9.2, 0.10.0,
0.10.2, 0.13.0, 0.19.0, 0.33.0) first builds a batch of dummy items of the modality with the most tokens per
item, each the largest its processor makes (`_get_mm_dummy_batch`), runs the encoder on all of them at once
(`embed_multimodal`, `get_multimodal_embeddings` before 0.13) and keeps the outputs in `encoder_cache`. Only then
does it run the language model's dummy forward and the sampler; the encoder cache is cleared and the dummy batch
dropped when profile_run returns. So the profile's peak is

    dummy inputs + max(the encoder's own forward peak, encoder outputs + the language model's peak)

and the logged "torch peak memory increase" of a multimodal model is that much above a text model's.

The number of items (multimodal/encoder_budget.py MultiModalBudget._get_max_items, 0.10.1+; inline in
profile_run before): the encoder budget is max(max_num_batched_tokens, tokens per item)
(v1/core/encoder_cache_manager.py compute_mm_encoder_budget; SchedulerConfig sets max_num_encoder_input_tokens
and encoder_cache_size to max_num_batched_tokens); items = max(1, min(budget // tokens per item, the decoder's
items)), with cdiv instead of // before 0.10.0 (VllmRules.mm_items_ceil). The decoder's items are max_num_seqs x
the per-prompt limit (999 on V1, config.py MultiModalConfig.get_limit_per_prompt), and from 0.10.1 x
max(1, min(limit, max_model_len // tokens per item)) (VllmRules.mm_items_by_len).

Each model's largest item is its processor's, read from the model's vLLM file; only the families in
`vision_dummy` are modelled. Any other multimodal model is flagged: its activation peak counts the language
model only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvsize.record import Record
from kvsize.spec import ArchSpec, VisionDummy

# config.py MultiModalConfig.get_limit_per_prompt (0.8.5: `999 if envs.VLLM_USE_V1 else 1`; later the model's
# supported limit, None for Gemma 3 and Llama 4, taken as 999 by allowed_mm_limits).
DEFAULT_ITEMS_PER_PROMPT = 999
# Llama4ImageProcessorFast's max_patches (transformers models/llama4/image_processing_llama4_fast.py, and the
# hub preprocessor_config.json of Llama-4-Scout / Maverick): mllama4.py get_max_num_tiles reads it.
LLAMA4_MAX_TILES = 16


def vision_dummy(raw: Mapping[str, Any], text_hidden: int | None) -> VisionDummy | None:
    """The largest item vLLM's processor makes for this model, for the families read; None otherwise (or when a
    field they need is missing)."""
    from kvsize.config import _positive_int  # config imports this module

    def _int(mapping: Mapping[str, Any], key: str) -> int | None:
        return _positive_int(mapping.get(key))

    archs = raw.get("architectures")
    names = {a for a in archs if isinstance(a, str)} if isinstance(archs, list) else set()
    vision = raw.get("vision_config")
    if not isinstance(vision, Mapping) or not text_hidden:
        return None
    size, patch = _int(vision, "image_size"), _int(vision, "patch_size")
    hidden, inner = _int(vision, "hidden_size"), _int(vision, "intermediate_size")
    if not (size and patch and hidden and inner) or size % patch:
        return None
    if "Gemma3ForConditionalGeneration" in names:
        # gemma3_mm.py: pan-and-scan is off by default (Gemma3ImageProcessor do_pan_and_scan False), so the
        # largest image is one crop of image_size x image_size: pixel_values (1, 3, S, S), image_seq_length
        # (mm_tokens_per_image) embeddings after SigLIP's (S / patch)^2 patches are pooled.
        tokens = _int(raw, "mm_tokens_per_image") or 256
        return VisionDummy(
            family="Gemma 3 (gemma3_mm.py: one image_size crop, pan-and-scan off)",
            tokens_per_item=tokens,
            input_elements=3 * size * size,
            tower_tokens=(size // patch) ** 2,
            tower_hidden=hidden,
            tower_intermediate=inner,
            output_width=text_hidden,
        )
    if "Llama4ForConditionalGeneration" in names:
        # mllama4.py: the largest image is max_patches tiles tall (get_image_size_with_most_features, 16:1), so
        # 16 tiles + 1 global tile of image_size^2; each tile is (S / patch)^2 patches + a class token through
        # the tower and (S / patch)^2 x pixel_shuffle_ratio^2 embeddings (get_patch_per_chunk).
        ratio = vision.get("pixel_shuffle_ratio", 0.5)
        if not isinstance(ratio, (int, float)) or isinstance(ratio, bool) or not 0 < ratio <= 1:
            return None
        per_tile = (size // patch) ** 2 // round(1 / ratio**2)
        tiles = LLAMA4_MAX_TILES + 1
        return VisionDummy(
            family=f"Llama 4 (mllama4.py: {LLAMA4_MAX_TILES} tiles + 1 global tile)",
            tokens_per_item=tiles * per_tile,
            input_elements=tiles * 3 * size * size,
            tower_tokens=tiles * ((size // patch) ** 2 + 1),
            tower_hidden=hidden,
            tower_intermediate=inner,
            output_width=text_hidden,
        )
    clip_tower = vision.get("model_type", "clip_vision_model") == "clip_vision_model"
    if "LlavaForConditionalGeneration" in names and clip_tower:
        # llava.py LlavaProcessingInfo: a CLIP tower at image_size^2, (S / patch)^2 embeddings with the default
        # feature strategy (the class token dropped); pixel_values (1, 3, S, S).
        if raw.get("vision_feature_select_strategy", "default") != "default":
            return None
        return VisionDummy(
            family="LLaVA (llava.py: one CLIP image)",
            tokens_per_item=(size // patch) ** 2,
            input_elements=3 * size * size,
            tower_tokens=(size // patch) ** 2 + 1,
            tower_hidden=hidden,
            tower_intermediate=inner,
            output_width=text_hidden,
        )
    return None


class MmProfile(Record, frozen=True, kw_only=True):
    """The multimodal part of vLLM's profile run on one rank."""

    items: int
    input_bytes: int
    """The dummy batch (pixel values in the model's dtype: vLLM casts floating processor outputs,
    multimodal/processing/context.py _postprocess_output), held until profile_run returns."""
    output_bytes: int
    """The encoder outputs kept in encoder_cache: items x tokens x the language model's hidden size."""
    tower_peak_bytes: int
    """The encoder forward's own peak: its MLP step over every patch of every item, residual + normed input +
    fc1 output + activation output = tokens x (2 x hidden + 2 x intermediate / tp) (the tower's linear layers
    are sharded over tp, mm_encoder_tp_mode "weights")."""
    rule: str


def mm_items(
    tokens_per_item: int,
    *,
    max_batched_tokens: int,
    max_num_seqs: int,
    max_model_len: int,
    ceil_budget: bool,
    per_prompt_by_len: bool,
) -> int:
    """Items of the dummy batch (the module docstring)."""
    budget = max(max_batched_tokens, tokens_per_item)
    encoder_items = -(-budget // tokens_per_item) if ceil_budget else budget // tokens_per_item
    per_prompt = (
        max(1, min(DEFAULT_ITEMS_PER_PROMPT, max_model_len // tokens_per_item))
        if per_prompt_by_len
        else DEFAULT_ITEMS_PER_PROMPT
    )
    return max(1, min(encoder_items, max_num_seqs * per_prompt))


def vllm_mm_profile(
    spec: ArchSpec,
    dummy: VisionDummy,
    *,
    dtype_bytes: int,
    max_batched_tokens: int,
    max_num_seqs: int,
    max_model_len: int,
    tp: int,
    ceil_budget: bool,
    per_prompt_by_len: bool,
) -> MmProfile:
    items = mm_items(
        dummy.tokens_per_item,
        max_batched_tokens=max_batched_tokens,
        max_num_seqs=max_num_seqs,
        max_model_len=max_model_len,
        ceil_budget=ceil_budget,
        per_prompt_by_len=per_prompt_by_len,
    )
    inputs = items * dummy.input_elements * dtype_bytes
    outputs = items * dummy.tokens_per_item * dummy.output_width * dtype_bytes
    tower = items * dummy.tower_tokens * (2 * dummy.tower_hidden + 2 * dummy.tower_intermediate // tp) * dtype_bytes
    return MmProfile(
        items=items,
        input_bytes=inputs,
        output_bytes=outputs,
        tower_peak_bytes=tower,
        rule=(
            f"multimodal profile: {items} image items of {dummy.tokens_per_item} tokens, {dummy.family}; "
            f"dummy inputs {items} x {dummy.input_elements:,} x {dtype_bytes} B + max(encoder forward "
            f"{items} x {dummy.tower_tokens:,} x (2 x {dummy.tower_hidden} + 2 x {dummy.tower_intermediate}"
            + (f" / {tp}" if tp > 1 else "")
            + f") x {dtype_bytes} B, encoder outputs {items} x {dummy.tokens_per_item} x {dummy.output_width} x "
            f"{dtype_bytes} B + the language model's peak) (kvsize/mm_profile.py, v1/worker/gpu_model_runner.py "
            "profile_run)"
        ),
    )


def unmodelled_note(spec: ArchSpec) -> str | None:
    """The flag on a multimodal model whose encoder profile this module does not model; None otherwise."""
    if not spec.is_multimodal or spec.vision_dummy is not None:
        return None
    return UNMODELLED_NOTE.format(arch=", ".join(spec.architectures) or spec.model_type)


UNMODELLED_NOTE = (
    "the multimodal encoder's part of vLLM's profile run is not modelled for {arch}: its activation peak counts "
    "the language model only (low by the encoder's dummy batch); `kvsize log --save-calibration` on a start-up "
    "log measures it"
)
