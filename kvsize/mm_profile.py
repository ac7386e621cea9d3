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

--limit-mm-per-prompt (`MmLimits`) picks the modality among those above 0 and caps the items per prompt; with
every limit 0, or --skip-mm-profiling, nothing is encoded, and a tower whose modalities are all 0 is not built
where the release skips it (kvsize/budget.py dropped_tower_bytes).

Each model's largest item is its processor's, read from the model's vLLM file; only the families in
`vision_dummy` are modelled. Any other multimodal model is flagged: its activation peak counts the language
model only.

The Qwen-VL family's item depends on the release and on max_model_len (`qwen_vl_item`): Qwen2-VL and Qwen2.5-VL
profile a video of as many frame pairs of the largest image as fit max_model_len (14 frames at most from 0.11),
so at 128k the tower runs over 7 x 65,536 patches. Their towers' peaks (tensors live in the MLP step, read in
qwen2_5_vl.py / qwen2_vl.py / qwen3_vl.py of 0.19.0; the tower is not compiled, and vLLM's custom ops run their
native forms under the default inductor compile) are the source's, not measured: the rule says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kvsize.errors import UsageError
from kvsize.record import Record
from kvsize.spec import ArchSpec, VisionDummy

if TYPE_CHECKING:
    from kvsize.engines.vllm_releases import VllmRules

# config.py MultiModalConfig.get_limit_per_prompt (0.8.5: `999 if envs.VLLM_USE_V1 else 1`; later the model's
# supported limit, None for Gemma 3 and Llama 4, taken as 999 by allowed_mm_limits).
DEFAULT_ITEMS_PER_PROMPT = 999
# Llama4ImageProcessorFast's max_patches (transformers models/llama4/image_processing_llama4_fast.py, and the
# hub preprocessor_config.json of Llama-4-Scout / Maverick): mllama4.py get_max_num_tiles reads it.
LLAMA4_MAX_TILES = 16
# The largest image the Qwen-VL processors make: max_pixels of the hub's preprocessor_config.json, 12,845,056 in
# every Qwen2-VL / Qwen2.5-VL repo (min_pixels 3,136) and size.longest_edge 16,777,216 in Qwen3-VL's. kvsize reads
# config.json only, so these hub values are assumed; --mm-processor-kwargs max_pixels changes them in vLLM.
QWEN2_VL_MAX_PIXELS = 12_845_056
QWEN3_VL_MAX_PIXELS = 16_777_216
# Qwen3-VL's dummy video in 0.11.0-0.12.0 (qwen3_vl.py _get_max_video_frames, _MAX_FRAMES_PER_VIDEO 24,576): the
# frames shrink to 32 x 32 under the video processor's longest_edge 25,165,824 before the token budget binds.
QWEN3_VL_011_VIDEO_FRAMES, QWEN3_VL_011_VIDEO_SIDE = 24_576, 32
QWEN3_VL_011_VIDEO_TOKEN_FACTOR = 12.5
# Bounds past any released tower (patch 14-16, merge 2, width <= 8,192 incl. deepstack outputs): beyond them a
# config's vision fields are not sized.
MAX_PATCH_FIELD, MAX_TOWER_WIDTH, MAX_DEEPSTACK = 1 << 10, 1 << 17, 1 << 8
QWEN_VL_ARCHS = {
    "Qwen2VLForConditionalGeneration": "qwen2_vl",
    "Qwen2_5_VLForConditionalGeneration": "qwen2_5_vl",
    "Qwen3VLForConditionalGeneration": "qwen3_vl",
    "Qwen3VLMoeForConditionalGeneration": "qwen3_vl",
}


# config/multimodal.py BaseDummyOptions / ImageDummyOptions / VideoDummyOptions / AudioDummyOptions (0.11.1+):
# a modality's limit may be {"count": N} with the dummy item's size beside it.
DUMMY_SIZE_KEYS = {"image": ("width", "height"), "video": ("num_frames", "width", "height"), "audio": ("length",)}
# The towers each modality feeds (kvsize/params.py's breakdown): a tower is dropped when all of its are 0.
TOWER_MODALITIES = {"vision": ("image", "video"), "audio": ("audio",)}
# Each model's modalities (its ProcessingInfo.get_supported_mm_limits, vLLM 0.34: llava.py, mistral3.py,
# gemma3_mm.py, mllama4.py, lfm2_vl.py and mllama.py image; qwen2_vl.py image and video, inherited by
# qwen2_5_vl.py, qwen3_vl.py and qwen3_5.py; gemma3n_mm.py image and audio; gemma4_mm.py image, video and, with an
# audio_config, audio). A model not listed is taken to have all three, so only limits naming each drop a tower.
IMAGE_ONLY = ("image",)
IMAGE_VIDEO = ("image", "video")
MODEL_MODALITIES: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(
        (
            "LlavaForConditionalGeneration",
            "Mistral3ForConditionalGeneration",
            "Gemma3ForConditionalGeneration",
            "Llama4ForConditionalGeneration",
            "Lfm2VlForConditionalGeneration",
            "MllamaForConditionalGeneration",
        ),
        IMAGE_ONLY,
    ),
    **dict.fromkeys(
        (
            "Qwen2VLForConditionalGeneration",
            "Qwen2_5_VLForConditionalGeneration",
            "Qwen3VLForConditionalGeneration",
            "Qwen3VLMoeForConditionalGeneration",
            "Qwen3_5ForConditionalGeneration",
            "Qwen3_5MoeForConditionalGeneration",
        ),
        IMAGE_VIDEO,
    ),
    "Gemma3nForConditionalGeneration": ("image", "audio"),
    "Gemma4ForConditionalGeneration": ("image", "video", "audio"),
}
ALL_MODALITIES = ("image", "video", "audio")


def model_modalities(architectures: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """The modalities vLLM takes for the model (MODEL_MODALITIES; all three for a model not listed)."""
    return next((MODEL_MODALITIES[a] for a in architectures if a in MODEL_MODALITIES), ALL_MODALITIES)


MAX_LIMIT_TEXT = 4096


class MmLimits(Record, frozen=True, kw_only=True):
    """vLLM's --limit-mm-per-prompt: items per prompt by modality (one left out takes 999,
    MultiModalConfig.get_limit_per_prompt) and the modalities given a dummy size (0.11.1+)."""

    counts: tuple[tuple[str, int], ...] = ()
    sized: tuple[str, ...] = ()
    given: str = ""
    """The flag's JSON, compact, as the launch command repeats it."""

    def count(self, modality: str) -> int:
        return dict(self.counts).get(modality, DEFAULT_ITEMS_PER_PROMPT)

    def drops(self, tower: str, modalities: tuple[str, ...] = ALL_MODALITIES) -> bool:
        """Every one of the model's `modalities` that feeds `tower` ("vision", "audio") is limited to 0."""
        fed = [m for m in TOWER_MODALITIES[tower] if m in modalities]
        return bool(fed) and all(self.count(m) == 0 for m in fed)


def parse_mm_limits(text: str) -> MmLimits:
    """--limit-mm-per-prompt as vLLM reads it: a JSON object of modality -> count, or (0.11.1+) -> {"count": N,
    and the dummy's width / height / num_frames / length}. Refuses anything else, naming it (the caller names
    the flag or the capacity file's key)."""
    import json
    import re

    hint = 'Give a JSON object, e.g. \'{"image": 2, "video": 0}\' or \'{"image": {"count": 1, "width": 512}}\'.'
    if len(text) > MAX_LIMIT_TEXT:
        raise UsageError(f"longer than {MAX_LIMIT_TEXT} characters", hint=hint)
    try:
        value = json.loads(text)
    except ValueError:
        raise UsageError("not JSON", hint=hint) from None
    if not isinstance(value, dict) or not value:
        raise UsageError("must be a non-empty JSON object", hint=hint)

    def whole(v: Any, *, positive: bool) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and (v > 0 if positive else v >= 0) and v < 1 << 31

    counts: list[tuple[str, int]] = []
    sized: list[str] = []
    for modality, limit in value.items():
        if not re.fullmatch(r"[a-z][a-z0-9_]{0,31}", modality):
            raise UsageError(f"{modality[:40]!r} is not a modality name", hint=hint)
        if isinstance(limit, dict):
            allowed = ("count", *DUMMY_SIZE_KEYS.get(modality, ()))
            unknown = sorted(set(limit) - set(allowed))
            if unknown:
                raise UsageError(
                    f"{modality} takes {', '.join(allowed)}, not {', '.join(unknown)[:80]}",
                    hint=hint,
                )
            if not whole(count := limit.get("count", DEFAULT_ITEMS_PER_PROMPT), positive=False) or not all(
                whole(limit[k], positive=True) for k in allowed[1:] if k in limit
            ):
                raise UsageError(
                    f"{modality}'s count must be a whole number from 0 to 2^31 - 1 and its sizes above 0",
                    hint=hint,
                )
            if len(limit) > ("count" in limit):
                sized.append(modality)
        elif whole(limit, positive=False):
            count = limit
        else:
            raise UsageError(f"{modality}'s limit must be a whole number from 0 to 2^31 - 1", hint=hint)
        counts.append((modality, count))
    return MmLimits(counts=tuple(counts), sized=tuple(sized), given=json.dumps(value, separators=(",", ":")))


NO_LIMITS = MmLimits()


class NotModelled(Exception):
    """The modality vLLM profiles under these limits has no item modelled here (the reason is the message)."""


def profiled_modality(dummy: VisionDummy, rules: VllmRules, limits: MmLimits) -> str | None:
    """The modality vLLM's profile run encodes: the one with the most tokens per item among those whose limit is
    above 0 (multimodal/encoder_budget.py MultiModalBudget.get_modality_with_max_tokens; v1/worker/utils.py
    before 0.19; the nonzero modalities of multimodal/registry.py in 0.8.5), None when every limit is 0 (the
    encoder budget is then 0: v1/core/encoder_cache_manager.py, no profile). Qwen2-VL / Qwen2.5-VL's video has at
    least the image's tokens; Qwen3-VL's has more only in 0.11-0.12 (qwen_vl_item). Raises NotModelled for
    Qwen3-VL's video from 0.13 (a 2-frame video at the video processor's own size, not read here)."""
    image, video = limits.count("image") > 0, limits.count("video") > 0
    if dummy.video is None:
        return "image" if image else None
    if dummy.video == "qwen3_vl" and not rules.qwen3_vl_video_x12_5:
        if image:
            return "image"
        if video:
            raise NotModelled(
                "Qwen3-VL's dummy video (profiled from vLLM 0.13 when images are limited to 0) is not modelled"
            )
        return None
    return "video" if video else "image" if image else None


def _qwen_vl_dummy(names: set[str], vision: Mapping[str, Any]) -> VisionDummy | None:
    """The largest image of a Qwen-VL model (qwen2_vl.py Qwen2VLProcessingInfo, shared by qwen2_5_vl.py;
    qwen3_vl.py Qwen3VLProcessingInfo): smart_resize of the largest square to max_pixels in multiples of patch x
    merge, one temporal patch (the image repeated to temporal_patch_size frames); pixel_values holds a row of
    channels x temporal x patch^2 per patch, and merge^2 patches make one token."""
    from kvsize.config import _positive_int

    family = next((QWEN_VL_ARCHS[n] for n in sorted(names) if n in QWEN_VL_ARCHS), None)
    if family is None:
        return None
    patch, merge = _positive_int(vision.get("patch_size")), _positive_int(vision.get("spatial_merge_size"))
    temporal = _positive_int(vision.get("temporal_patch_size"))
    channels = _positive_int(vision.get("in_chans", vision.get("in_channels", 3)))
    if family == "qwen2_vl":
        # Qwen2VisionBlock: LayerNorm, fc1 (mlp_ratio x embed_dim) -> QuickGELU -> fc2; vision_config.hidden_size
        # is the merger's output (the language model's width). Live in the MLP: the residual and the normed input
        # (2 x E), fc1's output and QuickGELU's x * sigmoid(1.702 x) temporaries (3 x I).
        width, ratio = _positive_int(vision.get("embed_dim")), _positive_int(vision.get("mlp_ratio"))
        inner = width * ratio if width and ratio else None
        output, factors, kept, label = _positive_int(vision.get("hidden_size")), (2, 3), 0, "Qwen2-VL"
    elif family == "qwen2_5_vl":
        # Qwen2_5_VisionBlock: RMSNorm, gated MLP gate_up (2 x I) -> SiluAndMul -> down. Live at SiluAndMul (native:
        # silu(x[:I]) * x[I:]): x, the attention output, the fused norm's output and residual (4 x H), gate_up
        # (2 x I), silu's output and the product (2 x I).
        width, inner = _positive_int(vision.get("hidden_size")), _positive_int(vision.get("intermediate_size"))
        output, factors, kept, label = _positive_int(vision.get("out_hidden_size")), (4, 4), 0, "Qwen2.5-VL"
    else:
        # Qwen3_VisionBlock: LayerNorm, fc1 -> GELU-tanh -> fc2 (2 x H + 2 x I) and the interpolated position
        # embeddings held through the forward (H); each deepstack layer's merger output (out_hidden per merged
        # token) stays live to the end and is returned beside the merger's: out_hidden x (1 + deepstack).
        width, inner = _positive_int(vision.get("hidden_size")), _positive_int(vision.get("intermediate_size"))
        deepstack = vision.get("deepstack_visual_indexes")
        out = _positive_int(vision.get("out_hidden_size"))
        if not isinstance(deepstack, list) or len(deepstack) > MAX_DEEPSTACK or not out or not merge:
            return None
        output, factors, label = out * (1 + len(deepstack)), (3, 2), "Qwen3-VL"
        kept = len(deepstack) * out // (merge * merge)
    if not (patch and merge and temporal and channels and width and inner and output):
        return None
    if max(patch, merge, temporal, channels) > MAX_PATCH_FIELD or max(width, inner, output) > MAX_TOWER_WIDTH:
        return None  # not a real tower: flagged as not modelled rather than sized
    max_pixels = QWEN3_VL_MAX_PIXELS if family == "qwen3_vl" else QWEN2_VL_MAX_PIXELS
    factor = patch * merge
    side = math.isqrt(max_pixels) // factor * factor
    if not side:
        return None
    patches = (side // patch) ** 2
    return VisionDummy(
        family=f"{label} (qwen{'3' if family == 'qwen3_vl' else '2'}_vl.py: a {side} x {side} image, the hub's "
        f"max_pixels {max_pixels:,} assumed)",
        tokens_per_item=patches // (merge * merge),
        input_elements=patches * channels * temporal * patch * patch,
        tower_tokens=patches,
        tower_hidden=width,
        tower_intermediate=inner,
        output_width=output,
        tower_hidden_factor=factors[0],
        tower_intermediate_factor=factors[1],
        tower_kept_per_token=kept,
        video="qwen3_vl" if family == "qwen3_vl" else "qwen2_vl",
        patch_size=patch,
        temporal_patch_size=temporal,
    )


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
    if names & QWEN_VL_ARCHS.keys():
        return _qwen_vl_dummy(names, vision)
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
    modality: str = "image"
    encoder_budget_tokens: int = 0
    """The encoder budget vLLM logs ("Encoder cache will be initialized with a budget of N tokens"):
    max(max_num_batched_tokens, the most tokens per item) (v1/core/encoder_cache_manager.py
    compute_mm_encoder_budget)."""


def mm_items(
    tokens_per_item: int,
    *,
    max_batched_tokens: int,
    max_num_seqs: int,
    max_model_len: int,
    ceil_budget: bool,
    per_prompt_by_len: bool,
    limit: int = DEFAULT_ITEMS_PER_PROMPT,
) -> int:
    """Items of the dummy batch (the module docstring); `limit` is the modality's --limit-mm-per-prompt."""
    budget = max(max_batched_tokens, tokens_per_item)
    encoder_items = -(-budget // tokens_per_item) if ceil_budget else budget // tokens_per_item
    per_prompt = max(1, min(limit, max_model_len // tokens_per_item)) if per_prompt_by_len else limit
    return max(1, min(encoder_items, max_num_seqs * per_prompt))


class MmItem(Record, frozen=True, kw_only=True):
    """The dummy item a release profiles: the tokens its budget counts, and the item actually built."""

    budget_tokens: int
    """Tokens per item as the encoder budget and the item count see them (get_mm_max_tokens_per_item)."""
    tokens: int
    """Embeddings the built item yields."""
    tower_tokens: int
    input_elements: int
    what: str


def qwen_vl_item(
    dummy: VisionDummy,
    rules: VllmRules,
    *,
    max_model_len: int,
    max_batched_tokens: int,
    modality: str = "video",
    with_image: bool = True,
) -> MmItem:
    """The item a Qwen-VL model is profiled with (the module docstring). Qwen2-VL / Qwen2.5-VL
    (qwen2_vl.py Qwen2VLProcessingInfo): a video of frame pairs of the largest image, as many as fit the budget
    (max_model_len, less one image through 0.10.1), at most _MAX_FRAMES_PER_VIDEO / 2 pairs; it has at least the
    image's tokens, so it is profiled (on a tie the image, of the same shape). Through 0.10.2 the item is rebuilt
    with the pairs that fit max_num_batched_tokens (VllmRules.mm_dummy_at_model_len). Qwen3-VL
    (qwen3_vl.py): the image, except 0.11.0-0.12.0, whose video of 24,576 frames of 32 x 32 counts x 12.5.
    `modality` "image": the image (videos limited to 0); `with_image` False: images limited to 0, so the
    get_mm_max_tokens_per_item counts (one per modality above 0) hold no image for the video to leave room for."""
    image = MmItem(
        budget_tokens=dummy.tokens_per_item,
        tokens=dummy.tokens_per_item,
        tower_tokens=dummy.tower_tokens,
        input_elements=dummy.input_elements,
        what="image",
    )
    if modality == "image":
        return image
    per_patch = dummy.input_elements // dummy.tower_tokens
    merged = dummy.tower_tokens // dummy.tokens_per_item  # patches per token (merge^2)
    if dummy.video == "qwen3_vl":
        if not rules.qwen3_vl_video_x12_5:
            return image
        temporal, patch = dummy.temporal_patch_size or 1, dummy.patch_size or QWEN3_VL_011_VIDEO_SIDE
        patches = QWEN3_VL_011_VIDEO_FRAMES // temporal * max(1, QWEN3_VL_011_VIDEO_SIDE // patch) ** 2
        tokens = patches // merged
        return MmItem(
            budget_tokens=int(tokens * QWEN3_VL_011_VIDEO_TOKEN_FACTOR),
            tokens=tokens,
            tower_tokens=patches,
            input_elements=patches * per_patch,
            what=f"video of {QWEN3_VL_011_VIDEO_FRAMES:,} frames of {QWEN3_VL_011_VIDEO_SIDE} x "
            f"{QWEN3_VL_011_VIDEO_SIDE} (its tokens x {QWEN3_VL_011_VIDEO_TOKEN_FACTOR:g} in the budget)",
        )
    if dummy.video != "qwen2_vl":
        return image
    pair = dummy.tokens_per_item  # one temporal patch (two frames) of the largest image
    cap = rules.qwen_vl_video_frames // 2
    budget = max_model_len - (pair if rules.qwen_vl_video_minus_image and with_image else 0)
    pairs = max(1, min(budget // pair, cap))
    built = pairs if rules.mm_dummy_at_model_len else max(1, min(max_batched_tokens // pair, cap))
    return MmItem(
        budget_tokens=pairs * pair,
        tokens=built * pair,
        tower_tokens=built * dummy.tower_tokens,
        input_elements=built * dummy.input_elements,
        what=f"video of {2 * built} frames" + ("" if built == pairs else f" (budgeted as {2 * pairs})"),
    )


def vllm_mm_profile(
    spec: ArchSpec,
    dummy: VisionDummy,
    *,
    dtype_bytes: int,
    max_batched_tokens: int,
    max_num_seqs: int,
    max_model_len: int,
    tp: int,
    rules: VllmRules,
    limits: MmLimits = NO_LIMITS,
) -> MmProfile | None:
    """The profile run's multimodal part; None where --limit-mm-per-prompt leaves no modality to encode.
    Raises NotModelled (profiled_modality)."""
    modality = profiled_modality(dummy, rules, limits)
    if modality is None:
        return None
    item = qwen_vl_item(
        dummy,
        rules,
        max_model_len=max_model_len,
        max_batched_tokens=max_batched_tokens,
        modality=modality,
        with_image=limits.count("image") > 0,
    )
    items = mm_items(
        item.budget_tokens,
        max_batched_tokens=max_batched_tokens,
        max_num_seqs=max_num_seqs,
        max_model_len=max_model_len,
        ceil_budget=rules.mm_items_ceil,
        per_prompt_by_len=rules.mm_items_by_len,
        limit=limits.count(modality),
    )
    hf, inf = dummy.tower_hidden_factor, dummy.tower_intermediate_factor
    per_token = hf * dummy.tower_hidden + inf * dummy.tower_intermediate // tp + dummy.tower_kept_per_token
    inputs = items * item.input_elements * dtype_bytes
    outputs = items * item.tokens * dummy.output_width * dtype_bytes
    tower = items * item.tower_tokens * per_token * dtype_bytes
    kept = f" + {dummy.tower_kept_per_token}" if dummy.tower_kept_per_token else ""
    return MmProfile(
        items=items,
        modality=modality,
        encoder_budget_tokens=max(max_batched_tokens, item.budget_tokens),
        input_bytes=inputs,
        output_bytes=outputs,
        tower_peak_bytes=tower,
        rule=(
            f"multimodal profile: {items} {item.what} items of {item.tokens} tokens, {dummy.family}; "
            f"dummy inputs {items} x {item.input_elements:,} x {dtype_bytes} B + max(encoder forward "
            f"{items} x {item.tower_tokens:,} x ({hf} x {dummy.tower_hidden} + {inf} x {dummy.tower_intermediate}"
            + (f" / {tp}" if tp > 1 else "")
            + f"{kept}) x {dtype_bytes} B, encoder outputs {items} x {item.tokens} x {dummy.output_width} x "
            f"{dtype_bytes} B + the language model's peak) (kvsize/mm_profile.py, v1/worker/gpu_model_runner.py "
            "profile_run)"
            + ("; the tower's peak is the live tensors read in the source, not measured" if dummy.video else "")
            + (f"; {modality} chosen under --limit-mm-per-prompt {limits.given}" if limits.given else "")
        ),
    )


def unmodelled_note(spec: ArchSpec, limits: MmLimits = NO_LIMITS, rules: VllmRules | None = None) -> str | None:
    """The flag on a multimodal model whose encoder profile this module does not model, or models from the
    source alone (the Qwen-VL towers), or whose dummy size --limit-mm-per-prompt sets; None otherwise (and where
    the limits leave nothing to profile)."""
    if not spec.is_multimodal:
        return None
    dummy = spec.vision_dummy
    if dummy is None:
        return UNMODELLED_NOTE.format(arch=", ".join(spec.architectures) or spec.model_type)
    if rules is not None:
        try:
            modality = profiled_modality(dummy, rules, limits)
        except NotModelled as exc:
            return f"{exc}: the activation peak counts the language model only; {CALIBRATE}"
        if modality is None:
            return None
        if modality in limits.sized:
            return (
                f"the {modality} dummy's size from --limit-mm-per-prompt is not modelled: the encoder's profile is "
                f"counted at the largest {modality}, so the KV figure is a lower bound; {CALIBRATE}"
            )
    if dummy.video is not None:
        return SOURCE_ONLY_NOTE if not limits.given else SOURCE_ONLY_NOTE.split("; --limit-mm-per-prompt")[0]
    return None


CALIBRATE = "`kvsize log --save-calibration` on a start-up log measures it"


SOURCE_ONLY_NOTE = (
    "the vision encoder's profile (the largest image or video vLLM's processor makes at max_model_len, at the hub's "
    "max_pixels) is worked from the source, not measured: `kvsize log --save-calibration` on a start-up log "
    "measures it; --limit-mm-per-prompt '{\"video\": 0}' and --skip-mm-profiling shrink it (kvsize takes both), "
    "a smaller max_pixels too (not modelled)"
)


UNMODELLED_NOTE = (
    "the multimodal encoder's part of vLLM's profile run is not modelled for {arch}: its activation peak counts "
    "the language model only (low by the encoder's dummy batch); `kvsize log --save-calibration` on a start-up "
    "log measures it"
)
