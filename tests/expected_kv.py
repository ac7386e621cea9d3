"""Hand-derived expected KV-cache shapes for every config in shared/configs/.

Every number below was worked out by hand from the config.json fields (plus the
transformers config-class defaults for omitted fields) and is independent of the
kvsize parser. The arithmetic is in the comment next to each entry.

Conventions (the product's rules):
  * elements per token of one attention layer = kv_heads * (head_dim_k + head_dim_v)
    = kv_heads * 2 * head_dim for ordinary attention.
  * MLA layer = kv_lora_rank + qk_rope_head_dim (one latent, not x2, no head count).
  * recurrent state per layer = conv_channels * (conv_kernel - 1) + prod(ssm state shape).
  * elements_per_token sums full + sliding + chunked + mla layers (not cross layers).
  * windows: {"sliding:<W>": n_layers, "chunked:<C>": n_layers}; a window >= max_context
    is still listed (the engine caps it).

Sources read for defaults (huggingface/transformers, via the search tool):
  * src/transformers/models/llama/configuration_llama.py @008e5743: LlamaConfig defaults
    num_hidden_layers=32, num_attention_heads=32, hidden_size=4096,
    num_key_value_heads=None -> num_attention_heads, head_dim=None -> hidden//heads.
  * src/transformers/models/gemma3/configuration_gemma3.py @008f5c8c: Gemma3TextConfig
    defaults num_attention_heads=8, num_key_value_heads=4, head_dim=256,
    max_position_embeddings=131072, sliding_window=4096, sliding_window_pattern=6.
  * Llama4TextConfig (transformers copy, file id 46400540717): no_rope_layers default
    [int((i+1) % no_rope_layer_interval != 0)], no_rope_layer_interval=4, and
    layer_types = "chunked_attention" if no_rope_layers[i] else "full_attention".
  * src/transformers/models/nemotron_h/configuration_nemotron_h.py @13923c63:
    hybrid_override_pattern M->linear_attention(mamba2), *->full_attention, -->mlp, E->moe.
    NemotronHMamba2Mixer: intermediate_size = mamba_num_heads * mamba_head_dim
    (NOT config.intermediate_size, which is the MLP width).
  * Zamba2Config: attention_head_dim = 2 * hidden_size // num_attention_heads.
  * Qwen3NextConfig: layer_types default "linear_attention" if (i+1) % full_attention_interval
    else "full_attention".
  * Mllama vision: num_patches = (image_size // patch_size) ** 2 + 1 per tile.
"""

from __future__ import annotations

import json as _json
from collections import Counter as _Counter
from dataclasses import dataclass
from pathlib import Path as _Path


@dataclass(frozen=True)
class Expected:
    kinds: dict[str, int]
    attention: str
    elements_per_token: int
    windows: dict[str, int]
    state_elements_per_request: int
    cross_elements_per_token: int
    encoder_tokens: int
    max_context: int | None
    indexer_elements_per_token: int = 0
    """Sparse-attention indexer keys per token, all layers (DSA: index_head_dim on each layer that runs its own
    indexer; MiniMax-M3: on each sparse layer), kept beside the per-token elements above."""


EXPECTED: dict[str, Expected] = {
    # ------------------------------------------------------------------ Llama 2
    # meta-llama/Llama-2-7b-hf: 32 layers x 32 KV heads (MHA) x head_dim 4096/32=128
    #   -> 32*2*32*128 = 262144 elements/token
    "meta-llama/Llama-2-7b-hf": Expected(
        kinds={"full": 32},
        attention="MHA",
        elements_per_token=262_144,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=4096,
    ),
    # meta-llama/Llama-2-13b-hf: 40 layers x 40 KV heads (MHA) x head_dim 5120/40=128
    #   -> 40*2*40*128 = 409600
    "meta-llama/Llama-2-13b-hf": Expected(
        kinds={"full": 40},
        attention="MHA",
        elements_per_token=409_600,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=4096,
    ),
    # meta-llama/Llama-2-70b-hf: 80 layers x 8 KV heads x head_dim 8192/64=128
    #   -> 80*2*8*128 = 163840
    "meta-llama/Llama-2-70b-hf": Expected(
        kinds={"full": 80},
        attention="GQA",
        elements_per_token=163_840,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=4096,
    ),
    # ------------------------------------------------------------ Llama 3 / 3.1 / 3.3
    # meta-llama/Meta-Llama-3-8B: 32 layers x 8 KV heads x head_dim 4096/32=128
    #   -> 32*2*8*128 = 65536; max_position_embeddings 8192
    "meta-llama/Meta-Llama-3-8B": Expected(
        kinds={"full": 32},
        attention="GQA",
        elements_per_token=65_536,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=8192,
    ),
    # meta-llama/Llama-3.1-8B: 32 layers x 8 KV heads x head_dim 4096/32=128 -> 32*2*8*128 = 65536
    "meta-llama/Llama-3.1-8B": Expected(
        kinds={"full": 32},
        attention="GQA",
        elements_per_token=65_536,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=131072,
    ),
    # meta-llama/Llama-3.1-8B-Instruct: same dims as base -> 32*2*8*128 = 65536
    "meta-llama/Llama-3.1-8B-Instruct": Expected(
        kinds={"full": 32},
        attention="GQA",
        elements_per_token=65_536,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=131072,
    ),
    # meta-llama/Llama-3.1-70B-Instruct: 80 layers x 8 KV heads x head_dim 8192/64=128
    #   -> 80*2*8*128 = 163840
    "meta-llama/Llama-3.1-70B-Instruct": Expected(
        kinds={"full": 80},
        attention="GQA",
        elements_per_token=163_840,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=131072,
    ),
    # meta-llama/Meta-Llama-3.1-405B: 126 layers x 8 KV heads x head_dim 16384/128=128
    #   -> 126*2*8*128 = 126*2048 = 258048
    "meta-llama/Meta-Llama-3.1-405B": Expected(
        kinds={"full": 126},
        attention="GQA",
        elements_per_token=258_048,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=131072,
    ),
    # meta-llama/Llama-3.3-70B-Instruct: no head_dim key; 80 layers x 8 KV heads x 8192/64=128
    #   -> 80*2*8*128 = 163840
    "meta-llama/Llama-3.3-70B-Instruct": Expected(
        kinds={"full": 80},
        attention="GQA",
        elements_per_token=163_840,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=131072,
    ),
    # ------------------------------------------------------------------ Llama 3.2
    # meta-llama/Llama-3.2-1B-Instruct: 16 layers x 8 KV heads x explicit head_dim 64 (=2048/32)
    #   -> 16*2*8*64 = 16384
    "meta-llama/Llama-3.2-1B-Instruct": Expected(
        kinds={"full": 16},
        attention="GQA",
        elements_per_token=16_384,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=131072,
    ),
    # meta-llama/Llama-3.2-3B: 28 layers x 8 KV heads x explicit head_dim 128 (=3072/24)
    #   -> 28*2*8*128 = 57344
    "meta-llama/Llama-3.2-3B": Expected(
        kinds={"full": 28},
        attention="GQA",
        elements_per_token=57_344,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=131072,
    ),
    # meta-llama/Llama-3.2-3B-Instruct: same dims -> 28*2*8*128 = 57344
    "meta-llama/Llama-3.2-3B-Instruct": Expected(
        kinds={"full": 28},
        attention="GQA",
        elements_per_token=57_344,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=131072,
    ),
    # meta-llama/Llama-3.2-90B-Vision-Instruct (mllama, text_config): 100 layers, of which 20 are
    #   cross_attention_layers [3,8,...,98]; 100-20 = 80 self-attention layers.
    #   head_dim 8192/64=128, 8 KV heads -> per layer 8*2*128 = 2048
    #   self: 80*2048 = 163840 elements/token
    #   cross: 20*8*2*128 = 40960 elements per encoder token
    #   encoder_tokens = max_num_tiles 4 * ((560//14)**2 + 1) = 4 * (40*40 + 1) = 4*1601 = 6404
    "meta-llama/Llama-3.2-90B-Vision-Instruct": Expected(
        kinds={"full": 80, "cross": 20},
        attention="GQA",
        elements_per_token=163_840,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=40_960,
        encoder_tokens=6404,
        max_context=131072,
    ),
    # ------------------------------------------------------------------ Llama 4
    # meta-llama/Llama-4-Scout-17B-16E-Instruct (text_config): 48 layers, no no_rope_layers ->
    #   layer i chunked when (i+1) % 4 != 0 -> full layers i = 3,7,...,47 = 48/4 = 12; chunked 48-12 = 36
    #   attention_chunk_size 8192. per layer 8 KV heads * 2 * head_dim 128 = 2048
    #   -> 48*2048 = 98304 (36*2048 chunked + 12*2048 full = 73728 + 24576)
    #   max_position_embeddings 10485760 (chunk << context)
    "meta-llama/Llama-4-Scout-17B-16E-Instruct": Expected(
        kinds={"chunked": 36, "full": 12},
        attention="GQA",
        elements_per_token=98_304,
        windows={"chunked:8192": 36},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=10485760,
    ),
    # meta-llama/Llama-4-Maverick-17B-128E-Instruct: same attention layout as Scout:
    #   36 chunked (8192) + 12 full, 8 KV heads x 128 -> 48*2*8*128 = 98304; max 1048576
    "meta-llama/Llama-4-Maverick-17B-128E-Instruct": Expected(
        kinds={"chunked": 36, "full": 12},
        attention="GQA",
        elements_per_token=98_304,
        windows={"chunked:8192": 36},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=1048576,
    ),
    # ------------------------------------------------------------------ LLaVA
    # llava-hf/llava-1.5-7b-hf: text_config is a LlamaConfig giving only max_position_embeddings 4096;
    #   LlamaConfig defaults: 32 layers, 32 heads, hidden 4096, kv heads = heads = 32 (MHA)
    #   head_dim 4096/32 = 128 -> 32*2*32*128 = 262144
    "llava-hf/llava-1.5-7b-hf": Expected(
        kinds={"full": 32},
        attention="MHA",
        elements_per_token=262_144,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=4096,
    ),
    # ------------------------------------------------------------------ Llama-architecture others
    # 01-ai/Yi-1.5-6B: 32 layers x 4 KV heads x head_dim 4096/32=128 -> 32*2*4*128 = 32768
    "01-ai/Yi-1.5-6B": Expected(
        kinds={"full": 32},
        attention="GQA",
        elements_per_token=32_768,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=4096,
    ),
    # HuggingFaceTB/SmolLM2-135M-Instruct: 30 layers x 3 KV heads x head_dim 576/9=64
    #   -> 30*2*3*64 = 11520
    "HuggingFaceTB/SmolLM2-135M-Instruct": Expected(
        kinds={"full": 30},
        attention="GQA",
        elements_per_token=11_520,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=8192,
    ),
    # HuggingFaceTB/SmolLM2-360M-Instruct: 32 layers x 5 KV heads x head_dim 960/15=64
    #   -> 32*2*5*64 = 20480
    "HuggingFaceTB/SmolLM2-360M-Instruct": Expected(
        kinds={"full": 32},
        attention="GQA",
        elements_per_token=20_480,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=8192,
    ),
    # HuggingFaceTB/SmolLM3-3B: 36 layers x 4 KV heads x head_dim 2048/16=128, layer_types all full_attention
    #   (no_rope_layers marks NoPE layers; they still cache every token) -> 36*2*4*128 = 36864
    "HuggingFaceTB/SmolLM3-3B": Expected(
        kinds={"full": 36},
        attention="GQA",
        elements_per_token=36_864,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=65536,
    ),
    # TinyLlama/TinyLlama-1.1B-Chat-v1.0: 22 layers x 4 KV heads x head_dim 2048/32=64
    #   -> 22*2*4*64 = 11264
    "TinyLlama/TinyLlama-1.1B-Chat-v1.0": Expected(
        kinds={"full": 22},
        attention="GQA",
        elements_per_token=11_264,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=2048,
    ),
    # deepseek-ai/deepseek-llm-7b-base: Llama arch, 30 layers x 32 KV heads (MHA) x 4096/32=128
    #   -> 30*2*32*128 = 245760
    "deepseek-ai/deepseek-llm-7b-base": Expected(
        kinds={"full": 30},
        attention="MHA",
        elements_per_token=245_760,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=4096,
    ),
    # ------------------------------------------------------------------ Mistral / Mixtral
    # mistralai/Mistral-7B-Instruct-v0.3: sliding_window null -> all full;
    #   32 layers x 8 KV heads x 4096/32=128 -> 32*2*8*128 = 65536
    "mistralai/Mistral-7B-Instruct-v0.3": Expected(
        kinds={"full": 32},
        attention="GQA",
        elements_per_token=65_536,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=32768,
    ),
    # mistralai/Ministral-8B-Instruct-2410: plain sliding_window 32768 -> every layer slides (Mistral rule);
    #   window 32768 == max_context 32768, still listed as sliding (engine caps it).
    #   36 layers x 8 KV heads x explicit head_dim 128 -> 36*2*8*128 = 73728
    "mistralai/Ministral-8B-Instruct-2410": Expected(
        kinds={"sliding": 36},
        attention="GQA",
        elements_per_token=73_728,
        windows={"sliding:32768": 36},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=32768,
    ),
    # mistralai/Mixtral-8x7B-v0.1: sliding_window null; 32 layers x 8 KV heads x 4096/32=128
    #   -> 32*2*8*128 = 65536
    "mistralai/Mixtral-8x7B-v0.1": Expected(
        kinds={"full": 32},
        attention="GQA",
        elements_per_token=65_536,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=32768,
    ),
    # mistralai/Mixtral-8x22B-v0.1: sliding_window null; 56 layers x 8 KV heads x 6144/48=128
    #   -> 56*2*8*128 = 114688
    "mistralai/Mixtral-8x22B-v0.1": Expected(
        kinds={"full": 56},
        attention="GQA",
        elements_per_token=114_688,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=65536,
    ),
    # ------------------------------------------------------------------ Mamba2 (pure SSM)
    # mistralai/Mamba-Codestral-7B-v0.1: 64 Mamba2 layers, no attention, no max_position_embeddings.
    #   d_inner = expand 2 * hidden 4096 = 8192 (= num_heads 128 * head_dim 64)
    #   conv_channels = 8192 + 2*n_groups 8*state_size 128 = 8192 + 2048 = 10240
    #   conv = 10240 * (conv_kernel 4 - 1) = 30720
    #   ssm = num_heads 128 * head_dim 64 * state_size 128 = 1048576
    #   per layer 30720 + 1048576 = 1079296; x64 layers = 69074944
    "mistralai/Mamba-Codestral-7B-v0.1": Expected(
        kinds={"mamba2": 64},
        attention="SSM",
        elements_per_token=0,
        windows={},
        state_elements_per_request=69_074_944,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=None,
    ),
    # ------------------------------------------------------------------ Qwen 1.5 / 2 / 2.5
    # All Qwen2-family configs below have use_sliding_window=false -> sliding_window ignored, all full.
    # Qwen/Qwen1.5-110B: 80 layers x 8 KV heads x 8192/64=128 -> 80*2*8*128 = 163840
    "Qwen/Qwen1.5-110B": Expected(
        kinds={"full": 80},
        attention="GQA",
        elements_per_token=163_840,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=32768,
    ),
    # Qwen/Qwen2-0.5B-Instruct: 24 layers x 2 KV heads x 896/14=64 -> 24*2*2*64 = 6144
    "Qwen/Qwen2-0.5B-Instruct": Expected(
        kinds={"full": 24},
        attention="GQA",
        elements_per_token=6_144,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=32768,
    ),
    # Qwen/Qwen2-1.5B-Instruct: 28 layers x 2 KV heads x 1536/12=128 -> 28*2*2*128 = 14336
    "Qwen/Qwen2-1.5B-Instruct": Expected(
        kinds={"full": 28},
        attention="GQA",
        elements_per_token=14_336,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=32768,
    ),
    # Qwen/Qwen2-7B: 28 layers x 4 KV heads x 3584/28=128 -> 28*2*4*128 = 28672
    "Qwen/Qwen2-7B": Expected(
        kinds={"full": 28},
        attention="GQA",
        elements_per_token=28_672,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=131072,
    ),
    # Qwen/Qwen2-7B-Instruct: same dims -> 28*2*4*128 = 28672; max_position_embeddings 32768
    "Qwen/Qwen2-7B-Instruct": Expected(
        kinds={"full": 28},
        attention="GQA",
        elements_per_token=28_672,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=32768,
    ),
    # Qwen/Qwen2.5-3B: 36 layers x 2 KV heads x 2048/16=128 -> 36*2*2*128 = 18432
    "Qwen/Qwen2.5-3B": Expected(
        kinds={"full": 36},
        attention="GQA",
        elements_per_token=18_432,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=32768,
    ),
    # Qwen/Qwen2.5-3B-Instruct: same dims (max_window_layers 70 > 36 layers, irrelevant: sliding off)
    #   -> 36*2*2*128 = 18432
    "Qwen/Qwen2.5-3B-Instruct": Expected(
        kinds={"full": 36},
        attention="GQA",
        elements_per_token=18_432,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=32768,
    ),
    # Qwen/Qwen2.5-7B: 28 layers x 4 KV heads x 3584/28=128 -> 28*2*4*128 = 28672
    "Qwen/Qwen2.5-7B": Expected(
        kinds={"full": 28},
        attention="GQA",
        elements_per_token=28_672,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=131072,
    ),
    # Qwen/Qwen2.5-7B-Instruct: same dims -> 28672; max_position_embeddings 32768
    "Qwen/Qwen2.5-7B-Instruct": Expected(
        kinds={"full": 28},
        attention="GQA",
        elements_per_token=28_672,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=32768,
    ),
    # Qwen/Qwen2.5-14B: 48 layers x 8 KV heads x 5120/40=128 -> 48*2*8*128 = 98304
    "Qwen/Qwen2.5-14B": Expected(
        kinds={"full": 48},
        attention="GQA",
        elements_per_token=98_304,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=131072,
    ),
    # Qwen/Qwen2.5-32B: 64 layers x 8 KV heads x 5120/40=128 -> 64*2*8*128 = 131072
    "Qwen/Qwen2.5-32B": Expected(
        kinds={"full": 64},
        attention="GQA",
        elements_per_token=131_072,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=131072,
    ),
    # Qwen/Qwen2.5-VL-7B-Instruct: LM at top level; sliding_window null; 28 layers x 4 KV heads x
    #   3584/28=128 -> 28*2*4*128 = 28672; max_position_embeddings 128000
    "Qwen/Qwen2.5-VL-7B-Instruct": Expected(
        kinds={"full": 28},
        attention="GQA",
        elements_per_token=28_672,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=128000,
    ),
    # ------------------------------------------------------------------ Qwen3
    # Qwen/Qwen3-0.6B: 28 layers x 8 KV heads x explicit head_dim 128 (hidden/heads would be 64)
    #   -> 28*2*8*128 = 57344
    "Qwen/Qwen3-0.6B": Expected(
        kinds={"full": 28},
        attention="GQA",
        elements_per_token=57_344,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=40960,
    ),
    # Qwen/Qwen3-1.7B: 28 layers x 8 KV heads x head_dim 128 -> 28*2*8*128 = 57344
    "Qwen/Qwen3-1.7B": Expected(
        kinds={"full": 28},
        attention="GQA",
        elements_per_token=57_344,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=40960,
    ),
    # Qwen/Qwen3-8B: 36 layers x 8 KV heads x head_dim 128 -> 36*2*8*128 = 73728
    "Qwen/Qwen3-8B": Expected(
        kinds={"full": 36},
        attention="GQA",
        elements_per_token=73_728,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=40960,
    ),
    # Qwen/Qwen3-14B: 40 layers x 8 KV heads x head_dim 128 -> 40*2*8*128 = 81920
    "Qwen/Qwen3-14B": Expected(
        kinds={"full": 40},
        attention="GQA",
        elements_per_token=81_920,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=40960,
    ),
    # Qwen/Qwen3-32B: 64 layers x 8 KV heads x explicit head_dim 128 (5120/64 would be 80)
    #   -> 64*2*8*128 = 131072
    "Qwen/Qwen3-32B": Expected(
        kinds={"full": 64},
        attention="GQA",
        elements_per_token=131_072,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=40960,
    ),
    # Qwen/Qwen3-30B-A3B: 48 layers x 4 KV heads x head_dim 128 -> 48*2*4*128 = 49152
    "Qwen/Qwen3-30B-A3B": Expected(
        kinds={"full": 48},
        attention="GQA",
        elements_per_token=49_152,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=40960,
    ),
    # Qwen/Qwen3-Next-80B-A3B-Thinking: 48 layers, no layer_types, full_attention_interval 4:
    #   full at i=3,7,...,47 -> 48/4 = 12 full; 48-12 = 36 gated_deltanet.
    #   full: 2 KV heads * 2 * head_dim 256 = 1024 per layer -> 12*1024 = 12288 elements/token
    #   gated_deltanet per layer:
    #     key_dim = 16*128 = 2048, value_dim = 32*128 = 4096
    #     conv_channels = 2*2048 + 4096 = 8192; conv = 8192*(4-1) = 24576
    #     ssm = 32 value heads * 128 * 128 = 524288
    #     per layer 24576 + 524288 = 548864; x36 = 19759104
    "Qwen/Qwen3-Next-80B-A3B-Thinking": Expected(
        kinds={"full": 12, "gated_deltanet": 36},
        attention="hybrid",
        elements_per_token=12_288,
        windows={},
        state_elements_per_request=19_759_104,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=262144,
    ),
    # ------------------------------------------------------------------ DeepSeek MLA
    # deepseek-ai/DeepSeek-V2: 60 layers MLA, latent kv_lora_rank 512 + qk_rope_head_dim 64 = 576
    #   (num_key_value_heads 128 is a trap) -> 60*576 = 34560
    "deepseek-ai/DeepSeek-V2": Expected(
        kinds={"mla": 60},
        attention="MLA",
        elements_per_token=34_560,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=163840,
    ),
    # deepseek-ai/DeepSeek-V3: 61 layers MLA (the num_nextn_predict_layers=1 MTP layer not counted)
    #   -> 61*(512+64) = 61*576 = 35136
    "deepseek-ai/DeepSeek-V3": Expected(
        kinds={"mla": 61},
        attention="MLA",
        elements_per_token=35_136,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=163840,
    ),
    # deepseek-ai/DeepSeek-V3.2 (deepseek_v32; its NVFP4 copy the same): 61 MLA layers of kv_lora_rank 512 +
    # qk_rope_head_dim 64 = 61 x 576 = 35,136; every layer runs its indexer: index_head_dim 128 x 61 = 7,808
    # (transformers 5.24 DeepseekV32 DynamicIndexedLayer; vLLM DeepseekV32IndexerCache)
    **dict.fromkeys(
        ("deepseek-ai/DeepSeek-V3.2", "nvidia/DeepSeek-V3.2-NVFP4"),
        Expected(
            kinds={"mla": 61},
            attention="MLA",
            elements_per_token=61 * (512 + 64),
            windows={},
            state_elements_per_request=0,
            cross_elements_per_token=0,
            encoder_tokens=0,
            max_context=163840,
            indexer_elements_per_token=61 * 128,
        ),
    ),
    # zai-org/GLM-5, GLM-5.1 and their FP8 / NVFP4 copies (glm_moe_dsa): 78 MLA layers x (512 + 64) = 44,928,
    # an indexer key of index_head_dim 128 on each: 9,984; max_position_embeddings 202,752
    **dict.fromkeys(
        (
            "zai-org/GLM-5",
            "zai-org/GLM-5-FP8",
            "zai-org/GLM-5.1",
            "zai-org/GLM-5.1-FP8",
            "nvidia/GLM-5-NVFP4",
            "nvidia/GLM-5.1-NVFP4",
        ),
        Expected(
            kinds={"mla": 78},
            attention="MLA",
            elements_per_token=78 * 576,
            windows={},
            state_elements_per_request=0,
            cross_elements_per_token=0,
            encoder_tokens=0,
            max_context=202752,
            indexer_elements_per_token=78 * 128,
        ),
    ),
    # zai-org/GLM-5.2 (+ FP8): the same 78 MLA layers; indexer_types lists 21 "full" (layers 0-2, then every 4th
    # from 6: index_topk_freq 4, index_skip_topk_offset 3) and 57 "shared", which keep no key: 21 x 128 = 2,688;
    # max_position_embeddings 1,048,576
    **dict.fromkeys(
        ("zai-org/GLM-5.2", "zai-org/GLM-5.2-FP8"),
        Expected(
            kinds={"mla": 78},
            attention="MLA",
            elements_per_token=78 * 576,
            windows={},
            state_elements_per_request=0,
            cross_elements_per_token=0,
            encoder_tokens=0,
            max_context=1048576,
            indexer_elements_per_token=21 * 128,
        ),
    ),
    # MiniMaxAI/MiniMax-M3 (the hub's flat minimax_m3): 60 full-attention layers of 4 KV heads x head_dim 128 x 2 =
    # 1,024 -> 61,440; sparse_attention_freq marks layers 3-59 sparse, each with an index key of sparse_index_dim
    # 128 (MiniMaxM3VLSparseCacheLayer.update_index): 57 x 128 = 7,296
    "MiniMaxAI/MiniMax-M3": Expected(
        kinds={"full": 60},
        attention="GQA",
        elements_per_token=60 * 4 * 128 * 2,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=1048576,
        indexer_elements_per_token=57 * 128,
    ),
    # ------------------------------------------------------------------ 2026 families (issue 19)
    # google/gemma-4-31B-it and nvidia/Gemma-4-31B-IT-NVFP4 (gemma4 wrapper, gemma4_text): 60 layers by layer_types,
    # 50 sliding (window 1,024) of num_key_value_heads 16 x head_dim 256 x 2 = 8,192; 10 full layers of
    # num_global_key_value_heads 4 (attention_k_eq_v: V is K, still cached as its own tensor) x global_head_dim
    # 512 x 2 = 4,096 (transformers 5.24 Gemma4TextAttention: per_layer_config head_dim / num_key_value_heads)
    **dict.fromkeys(
        ("google/gemma-4-31B-it", "nvidia/Gemma-4-31B-IT-NVFP4"),
        Expected(
            kinds={"sliding": 50, "full": 10},
            attention="GQA",
            elements_per_token=50 * 16 * 256 * 2 + 10 * 4 * 512 * 2,
            windows={"sliding:1024": 50},
            state_elements_per_request=0,
            cross_elements_per_token=0,
            encoder_tokens=0,
            max_context=262144,
        ),
    ),
    # google/gemma-4-26B-A4B and nvidia/Gemma-4-26B-A4B-NVFP4: 30 layers by layer_types, 25 sliding (window 1,024) of
    # 8 KV heads x 256 x 2 = 4,096; 5 full of num_global_key_value_heads 2 x global_head_dim 512 x 2 = 2,048
    # (tests/test_families_round4.py: 225,280 B/token at bf16)
    **dict.fromkeys(
        ("google/gemma-4-26B-A4B", "nvidia/Gemma-4-26B-A4B-NVFP4"),
        Expected(
            kinds={"sliding": 25, "full": 5},
            attention="GQA",
            elements_per_token=25 * 8 * 256 * 2 + 5 * 2 * 512 * 2,
            windows={"sliding:1024": 25},
            state_elements_per_request=0,
            cross_elements_per_token=0,
            encoder_tokens=0,
            max_context=262144,
        ),
    ),
    # google/gemma-4-E2B-it: 35 layers; the last num_kv_shared_layers 20 reuse an earlier layer's KV (kv_sharing
    # "reuse": no k_proj, nothing cached). Of the first 15 (layer_types), 12 sliding (window 512) of 1 KV head x
    # 256 x 2 = 512 and 3 full of 1 KV head (no num_global_key_value_heads: attention_k_eq_v false) x 512 x 2
    "google/gemma-4-E2B-it": Expected(
        kinds={"sliding": 12, "full": 3, "shared": 20},
        attention="MQA",
        elements_per_token=12 * 1 * 256 * 2 + 3 * 1 * 512 * 2,
        windows={"sliding:512": 12},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=131072,
    ),
    # nvidia/DeepSeek-V4-Flash-NVFP4 (deepseek_v4): compress_ratios cut to num_hidden_layers 43 (the 44th is the MTP
    # layer): ratio 0 -> 2 sliding layers, 4 -> 21 CSA, 128 -> 20 HCA; one KV head of head_dim 512 with K = V
    # stored once: 512 per sliding-layer token. Every layer keeps a window of sliding_window 128 raw tokens; the
    # compressed entries (floor(T / ratio), CSA with an index key of index_head_dim 128) are hand-worked in
    # tests/test_deepseek_v4.py, not per-token elements
    "nvidia/DeepSeek-V4-Flash-NVFP4": Expected(
        kinds={"sliding": 2, "compressed/4": 21, "compressed/128": 20},
        attention="MQA",
        elements_per_token=2 * 512,
        windows={"sliding:128": 2, "compressed:128": 41},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=1048576,
    ),
    # nvidia/DeepSeek-V4-Pro-NVFP4 (deepseek_v4): compress_ratios cut to num_hidden_layers 61 (the 62nd, 0, is the
    # MTP layer): 128, 128, then 4 / 128 alternating to layer 60 -> 31 HCA (128) and 30 CSA (4), no sliding layer;
    # one KV head of head_dim 512, K = V stored once: 512 per windowed token, window sliding_window 128 everywhere
    "nvidia/DeepSeek-V4-Pro-NVFP4": Expected(
        kinds={"compressed/4": 30, "compressed/128": 31},
        attention="MQA",
        elements_per_token=0,
        windows={"compressed:128": 61},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=1048576,
    ),
    # XiaomiMiMo/MiMo-V2-Flash: 48 layers by hybrid_layer_pattern (0 full, 1 sliding): 9 full of 4 KV heads x
    # (K head_dim 192 + V v_head_dim 128) = 1,280; 39 sliding of swa_num_key_value_heads 8 x (192 + 128) = 2,560, window
    # sliding_window_size 128 + 1 (transformers 5.24 MiMoV2FlashConfig; vLLM mimo_v2_flash.py)
    "XiaomiMiMo/MiMo-V2-Flash": Expected(
        kinds={"full": 9, "sliding": 39},
        attention="GQA",
        elements_per_token=9 * 4 * (192 + 128) + 39 * 8 * (192 + 128),
        windows={"sliding:129": 39},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=262144,
    ),
    # LiquidAI/LFM2.5-VL-1.6B (lfm2_vl; text_config lfm2, LFM2-1.2B): 16 layer_types, 6 full_attention of 8 KV
    # heads x head_dim 2,048 / 32 = 64 x 2 = 1,024; 10 conv layers, each a short-convolution state of
    # conv_dim 2,048 (= hidden_size) x (conv_L_cache 3 - 1) = 4,096 (vLLM 0.19 models/lfm2.py
    # short_conv_state_shape)
    "LiquidAI/LFM2.5-VL-1.6B": Expected(
        kinds={"short_conv": 10, "full": 6},
        attention="hybrid",
        elements_per_token=6 * 8 * 64 * 2,
        windows={},
        state_elements_per_request=10 * 2048 * (3 - 1),
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=128000,
    ),
    # THUDM/cogvlm2-llama3-caption (no model_type): 32 layers; num_multi_query_heads 8 KV heads (read by its
    # modeling_cogvlm.py as the KV head count) x head_dim 4,096 / 32 = 128 x 2 = 2,048; max_position_embeddings 2,048
    "THUDM/cogvlm2-llama3-caption": Expected(
        kinds={"full": 32},
        attention="GQA",
        elements_per_token=32 * 8 * 128 * 2,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=2048,
    ),
    # nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B (BF16, FP8, NVFP4; nemotron_h given as layers_block_type): 108 blocks,
    # 48 'mamba', 12 'attention', 48 'moe' (no cache). Attention: 2 KV heads x 128 x 2 = 512 -> 12 x 512 = 6,144.
    # Mamba-2 (NemotronHMamba2Mixer): intermediate = mamba_num_heads 256 x mamba_head_dim 64 = 16,384; conv
    # channels = 16,384 + 2 x n_groups 8 x ssm_state_size 128 = 18,432, x (conv_kernel 4 - 1) = 55,296; SSM state
    # 256 x 64 x 128 = 2,097,152; per layer 2,152,448, x 48 = 103,317,504
    **dict.fromkeys(
        (
            "nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16",
            "nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-FP8",
            "nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B-NVFP4",
        ),
        Expected(
            kinds={"mamba2": 48, "none": 48, "full": 12},
            attention="hybrid",
            elements_per_token=12 * 2 * 128 * 2,
            windows={},
            state_elements_per_request=48 * ((256 * 64 + 2 * 8 * 128) * 3 + 256 * 64 * 128),
            cross_elements_per_token=0,
            encoder_tokens=0,
            max_context=262144,
        ),
    ),
    # deepseek-ai/DeepSeek-R1: identical attention to V3 -> 61*576 = 35136
    "deepseek-ai/DeepSeek-R1": Expected(
        kinds={"mla": 61},
        attention="MLA",
        elements_per_token=35_136,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=163840,
    ),
    # ------------------------------------------------------------------ Gemma
    # google/gemma-2b: 18 layers x 1 KV head (MQA) x head_dim 256 -> 18*2*1*256 = 9216
    "google/gemma-2b": Expected(
        kinds={"full": 18},
        attention="MQA",
        elements_per_token=9_216,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=8192,
    ),
    # google/gemma-2-2b: 26 layers, no layer_types -> even i slide (13: 0,2,...,24), odd full (13);
    #   4 KV heads x head_dim 256 -> 2048 per layer; 26*2048 = 53248
    "google/gemma-2-2b": Expected(
        kinds={"sliding": 13, "full": 13},
        attention="GQA",
        elements_per_token=53_248,
        windows={"sliding:4096": 13},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=8192,
    ),
    # google/gemma-2-2b-it: same as gemma-2-2b -> 13 sliding(4096) + 13 full, 26*2*4*256 = 53248
    "google/gemma-2-2b-it": Expected(
        kinds={"sliding": 13, "full": 13},
        attention="GQA",
        elements_per_token=53_248,
        windows={"sliding:4096": 13},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=8192,
    ),
    # google/gemma-3-1b-it: 26 layers, pattern 6: full when (i+1)%6==0 -> i=5,11,17,23 = 4 full;
    #   26-4 = 22 sliding (window 512). 1 KV head (4 q heads) x head_dim 256 -> 512 per layer;
    #   26*512 = 13312
    "google/gemma-3-1b-it": Expected(
        kinds={"sliding": 22, "full": 4},
        attention="MQA",
        elements_per_token=13_312,
        windows={"sliding:512": 22},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=32768,
    ),
    # google/gemma-3-4b-it: text_config gives 34 layers, hidden 2560, sliding_window 1024 only;
    #   Gemma3TextConfig defaults: 8 heads, 4 KV heads, head_dim 256, pattern 6, max_pos 131072.
    #   full when (i+1)%6==0 -> i=5,11,17,23,29 = 5 full; 34-5 = 29 sliding (1024).
    #   per layer 4*2*256 = 2048; 34*2048 = 69632
    "google/gemma-3-4b-it": Expected(
        kinds={"sliding": 29, "full": 5},
        attention="GQA",
        elements_per_token=69_632,
        windows={"sliding:1024": 29},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=131072,
    ),
    # google/gemma-3-27b-it: text_config gives 62 layers, 32 heads, 16 KV heads, head_dim 128, sliding_window 1024;
    #   Gemma3TextConfig defaults (transformers configuration_gemma3.py): sliding_window_pattern 6, max_pos 131072.
    #   full when (i+1)%6==0 -> i=5,11,...,59 = 10 full; 62-10 = 52 sliding (1024).
    #   per layer 2*16*128 = 4096; 62*4096 = 253952
    "google/gemma-3-27b-it": Expected(
        kinds={"sliding": 52, "full": 10},
        attention="GQA",
        elements_per_token=253_952,
        windows={"sliding:1024": 52},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=131072,
    ),
    # ------------------------------------------------------------------ Granite / Falcon
    # ibm-granite/granite-3.1-1b-a400m-instruct (granitemoe: GraniteMoeAttention is plain GQA, transformers
    #   modeling_granitemoe.py): 24 layers x 8 KV heads x head_dim 1024/16 = 64 -> 24*2*8*64 = 24576; max_pos 131072
    "ibm-granite/granite-3.1-1b-a400m-instruct": Expected(
        kinds={"full": 24},
        attention="GQA",
        elements_per_token=24_576,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=131072,
    ),
    # tiiuae/falcon-7b-instruct: multi_query true, new_decoder_architecture false -> FalconAttention keeps ONE
    #   KV head (transformers modeling_falcon.py: num_kv_heads = 1 when multi_query and not new_decoder_architecture;
    #   the config's num_kv_heads 71 is unused); head_dim 4544/71 = 64; 32*2*1*64 = 4096; no max_position_embeddings
    "tiiuae/falcon-7b-instruct": Expected(
        kinds={"full": 32},
        attention="MQA",
        elements_per_token=4_096,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=None,
    ),
    # ------------------------------------------------------------------ Phi
    # microsoft/phi-1_5 (legacy phi-msft keys): n_layer 24, n_head 32, n_head_kv null -> MHA,
    #   head_dim n_embd 2048/32 = 64 -> 24*2*32*64 = 98304; n_positions 2048
    "microsoft/phi-1_5": Expected(
        kinds={"full": 24},
        attention="MHA",
        elements_per_token=98_304,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=2048,
    ),
    # microsoft/Phi-3-mini-4k-instruct: plain sliding_window 2047 -> all 32 layers slide;
    #   32 KV heads (MHA) x head_dim 3072/32=96 -> 32*2*32*96 = 196608
    "microsoft/Phi-3-mini-4k-instruct": Expected(
        kinds={"sliding": 32},
        attention="MHA",
        elements_per_token=196_608,
        windows={"sliding:2047": 32},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=4096,
    ),
    # microsoft/Phi-4-mini-instruct: plain sliding_window 262144 -> all 32 layers "sliding",
    #   window 262144 >= max_context 131072 (engine caps it; effectively full).
    #   8 KV heads x head_dim 3072/24=128 (partial_rotary_factor does not change head_dim)
    #   -> 32*2*8*128 = 65536
    "microsoft/Phi-4-mini-instruct": Expected(
        kinds={"sliding": 32},
        attention="GQA",
        elements_per_token=65_536,
        windows={"sliding:262144": 32},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=131072,
    ),
    # microsoft/phi-4: sliding_window null; 40 layers x 10 KV heads x 5120/40=128
    #   -> 40*2*10*128 = 102400
    "microsoft/phi-4": Expected(
        kinds={"full": 40},
        attention="GQA",
        elements_per_token=102_400,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=16384,
    ),
    # ------------------------------------------------------------------ GPT-2 / NeoX / StarCoder2
    # openai-community/gpt2: n_layer 12 x n_head 12 (MHA) x 768/12=64 -> 12*2*12*64 = 18432
    "openai-community/gpt2": Expected(
        kinds={"full": 12},
        attention="MHA",
        elements_per_token=18_432,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=1024,
    ),
    # openai-community/gpt2-medium: 24 layers x 16 heads x 1024/16=64 -> 24*2*16*64 = 49152
    "openai-community/gpt2-medium": Expected(
        kinds={"full": 24},
        attention="MHA",
        elements_per_token=49_152,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=1024,
    ),
    # openai-community/gpt2-xl: 48 layers x 25 heads x 1600/25=64 -> 48*2*25*64 = 153600; n_positions 1024
    "openai-community/gpt2-xl": Expected(
        kinds={"full": 48},
        attention="MHA",
        elements_per_token=153_600,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=1024,
    ),
    # EleutherAI/pythia-6.9b-deduped: GPT-NeoX (num_attention_heads only -> MHA), 32 layers x 32 heads x 4096/32=128
    #   -> 32*2*32*128 = 262144; max_pos 2048
    "EleutherAI/pythia-6.9b-deduped": Expected(
        kinds={"full": 32},
        attention="MHA",
        elements_per_token=262_144,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=2048,
    ),
    # EleutherAI/pythia-12b-deduped: GPT-NeoX, 36 layers x 40 heads x 5120/40=128 -> 36*2*40*128 = 368640; max_pos 2048
    "EleutherAI/pythia-12b-deduped": Expected(
        kinds={"full": 36},
        attention="MHA",
        elements_per_token=368_640,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=2048,
    ),
    # facebook/opt-125m: OPT (transformers modeling_opt.py OPTAttention: MHA, head_dim hidden/heads),
    #   12 layers x 12 heads x 768/12=64 -> 12*2*12*64 = 18432; max_pos 2048
    "facebook/opt-125m": Expected(
        kinds={"full": 12},
        attention="MHA",
        elements_per_token=18_432,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=2048,
    ),
    # bigscience/bloom-560m: BLOOM (transformers modeling_bloom.py BloomAttention: MHA, head_dim hidden/n_head, ALiBi),
    #   24 layers x 16 heads x 1024/16=64 -> 24*2*16*64 = 49152; no max_position_embeddings (ALiBi) -> None
    "bigscience/bloom-560m": Expected(
        kinds={"full": 24},
        attention="MHA",
        elements_per_token=49_152,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=None,
    ),
    # togethercomputer/RedPajama-INCITE-Chat-3B-v1: GPT-NeoX, 32 layers x 32 heads (MHA) x
    #   2560/32=80 -> 32*2*32*80 = 163840
    "togethercomputer/RedPajama-INCITE-Chat-3B-v1": Expected(
        kinds={"full": 32},
        attention="MHA",
        elements_per_token=163_840,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=2048,
    ),
    # bigcode/starcoder2-7b: plain sliding_window 4096 on every layer; 32 layers x 4 KV heads x
    #   4608/36=128 -> 32*2*4*128 = 32768
    "bigcode/starcoder2-7b": Expected(
        kinds={"sliding": 32},
        attention="GQA",
        elements_per_token=32_768,
        windows={"sliding:4096": 32},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=16384,
    ),
    # ------------------------------------------------------------------ EXAONE 4 / gpt-oss
    # LGAI-EXAONE/EXAONE-4.0-32B: layer_types: 48 sliding_attention + 16 full_attention (i=3,7,...,63);
    #   window 4096; 8 KV heads x head_dim 128 -> 2048 per layer; 64*2048 = 131072
    "LGAI-EXAONE/EXAONE-4.0-32B": Expected(
        kinds={"sliding": 48, "full": 16},
        attention="GQA",
        elements_per_token=131_072,
        windows={"sliding:4096": 48},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=131072,
    ),
    # openai/gpt-oss-20b: layer_types 12 sliding (even i) + 12 full (odd i); window 128;
    #   8 KV heads x head_dim 64 -> 1024 per layer; 24*1024 = 24576
    "openai/gpt-oss-20b": Expected(
        kinds={"sliding": 12, "full": 12},
        attention="GQA",
        elements_per_token=24_576,
        windows={"sliding:128": 12},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=131072,
    ),
    # openai/gpt-oss-120b: layer_types 18 sliding + 18 full; window 128; 8 KV x 64 -> 1024/layer;
    #   36*1024 = 36864
    "openai/gpt-oss-120b": Expected(
        kinds={"sliding": 18, "full": 18},
        attention="GQA",
        elements_per_token=36_864,
        windows={"sliding:128": 18},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=131072,
    ),
    # ------------------------------------------------------------------ NVIDIA Nemotron
    # nvidia/Nemotron-H-56B-Base-8K: hybrid_override_pattern (118 chars) = 54 'M' + 54 '-' + 10 '*'
    #   ('*' at 7,18,29,...,106).
    #   attention: 8 KV heads x attention_head_dim 128 (= 8192/64) -> 2048/layer; 10*2048 = 20480
    #   mamba2: d_inner = mamba_num_heads 256 * mamba_head_dim 64 = 16384 (= expand 2 * 8192;
    #     NOT intermediate_size 32768, which is the MLP width)
    #     conv_channels = 16384 + 2*8*256 = 16384 + 4096 = 20480; conv = 20480*(4-1) = 61440
    #     ssm = 256 * 64 * 256 = 4194304
    #     per layer 61440 + 4194304 = 4255744; x54 = 229810176
    "nvidia/Nemotron-H-56B-Base-8K": Expected(
        kinds={"mamba2": 54, "none": 54, "full": 10},
        attention="hybrid",
        elements_per_token=20_480,
        windows={},
        state_elements_per_request=229_810_176,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=8192,
    ),
    # nvidia/Llama-3_3-Nemotron-Super-49B-v1: 80 block_configs; attention.no_op at
    #   6,7,11, 42-51 (10), 53-70 (18) -> 3+10+18 = 31 "none"; 80-31 = 49 attention blocks,
    #   all n_heads_in_group 8 -> 64//8 = 8 KV heads; head_dim 8192/64 = 128
    #   -> 49*2*8*128 = 49*2048 = 100352
    "nvidia/Llama-3_3-Nemotron-Super-49B-v1": Expected(
        kinds={"full": 49, "none": 31},
        attention="GQA",
        elements_per_token=100_352,
        windows={},
        state_elements_per_request=0,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=131072,
    ),
    # ------------------------------------------------------------------ Zamba2
    # Zyphra/Zamba2-7B: layers_block_type 81 = 68 "mamba" + 13 "hybrid" (6,11,17,...,77).
    #   Every layer holds a Mamba2 state:
    #     d_inner = expansion_factor 2 * 3584 = 7168; heads = 7168/mamba_headdim 64 = 112
    #     conv_channels = 7168 + 2*mamba_ngroups 2*state_size 64 = 7168 + 256 = 7424
    #     conv = 7424*(conv_dimension 4 - 1) = 22272
    #     ssm = 112 * 64 * 64 = 458752
    #     per layer 22272 + 458752 = 481024; x81 = 38962944
    #   Hybrid layers also hold attention: 32 KV heads x head_dim 2*3584/32 = 224
    #     -> 32*2*224 = 14336 per layer; 13*14336 = 186368
    "Zyphra/Zamba2-7B": Expected(
        kinds={"mamba2": 68, "mamba2+full": 13},
        attention="hybrid",
        elements_per_token=186_368,
        windows={},
        state_elements_per_request=38_962_944,
        cross_elements_per_token=0,
        encoder_tokens=0,
        max_context=4096,
    ),
}


# ======================================================================================================
# Bulk entries: an independent field-reading calculator (test code, written apart from kvsize/config.py).
#
# The configs added with the registry's growth (issue 14) are derived here from their raw fields, read
# straight from kvsize/models/registry.jsonl with `json` (kvsize's parser is not used). Each family's rule,
# with its source in transformers 5.24 (src/transformers/models/<family>/...) and the engines:
#   * Decoder attention (llama, gemma, mistral, mixtral, qwen2/qwen2_moe/qwen3/qwen3_moe, qwen3_vl(_moe)_text,
#     ministral3, olmo2, cohere, internlm/internlm2, baichuan, mimo, minimax_m2, glm4_moe, phi, phi3, gptj,
#     gpt_bigcode, openai-gpt, deepseek (v1 MoE), chatglm): per layer 2 x kv_heads x head_dim, where
#     kv_heads = num_key_value_heads (None or absent -> num_attention_heads, LlamaConfig.__init__);
#     gpt_bigcode multi_query -> 1 (GPTBigCodeAttention kv_heads = 1 if multi_query);
#     chatglm multi_query_attention -> multi_query_group_num (THUDM modeling_chatglm.py SelfAttention);
#     head_dim = head_dim | kv_channels (chatglm) | hidden // heads (hidden = hidden_size | n_embd).
#   * Sliding windows: qwen2/qwen2_moe/qwen3/qwen3_moe/mimo only when use_sliding_window is true (Qwen2Config:
#     layer_types "sliding_attention" only if use_sliding_window); gemma2 without layer_types: layer i sliding
#     when (i + 1) % 2 (Gemma2Config.__init__ default layer_types); phi3, mistral, mixtral: an integer
#     sliding_window applies to every layer (Phi3Config, MistralConfig; a window >= the context is listed);
#     an explicit layer_types list (olmo3) counts as is; sliding_window null (mistral3 text, minimax_m2, phi-4) -> none.
#   * MLA (deepseek_v2/v3/v32, kimi_k2, kimi_k25 text, glm4_moe_lite, glm_moe_dsa): kv_lora_rank +
#     qk_rope_head_dim per layer (one latent; DeepSeek-V2 paper 2.1.2, vLLM MLAAttentionSpec); the MTP layers
#     (num_nextn_predict_layers) are not decoder layers. The DSA indexer key of deepseek_v32 / glm_moe_dsa
#     (index_head_dim per token, transformers 5.24 DynamicIndexedLayer) is counted apart
#     (indexer_elements_per_token), none on GLM-5.2's "shared" layers.
#   * nemotron_h: hybrid_override_pattern 'M' -> mamba2, '*' -> full attention, '-'/'E' -> no cache
#     (configuration_nemotron_h.py; its layers_block_type list form: mamba / attention / moe, mlp); mamba2
#     state per layer: conv = (H*P + 2*G*N) * (conv_kernel - 1) with H*P = mamba_num_heads * mamba_head_dim
#     (NemotronHMamba2Mixer.intermediate_size), ssm = H*P*N.
#   * qwen3_5 / qwen3_5_moe text: layer_types "linear_attention" -> gated deltanet: conv =
#     (2*Hk*Dk + Hv*Dv) * (linear_conv_kernel_dim - 1), ssm = Hv*Dk*Dv (Qwen3_5GatedDeltaNet conv_dim and
#     recurrent state, as for Qwen3-Next above); "full_attention" -> 2 x kv_heads x head_dim.
#   * Mamba-1 (mamba, falcon_mamba): every layer conv = d_inner * (conv_kernel - 1), ssm = d_inner * state_size,
#     d_inner = intermediate_size when stored (MambaConfig/FalconMambaConfig keep the kwarg over expand x hidden;
#     vLLM mamba.py reads config.intermediate_size), else expand x hidden; no position limit (max_context None).
#   * jamba: layer i attention when i % attn_layer_period == attn_layer_offset, else Mamba-1 with
#     d_inner = mamba_expand x hidden, conv kernel mamba_d_conv, state mamba_d_state (JambaConfig
#     layers_block_type, JambaMambaMixer).
#   * Encoder-decoder (t5, bart, whisper): decoder layers = num_decoder_layers | decoder_layers | num_layers,
#     each full self-attention plus cross-attention over the encoder of the same width; encoder tokens =
#     whisper max_source_positions (30 s = 1500 frames), t5 n_positions, bart max_position_embeddings.
#   * Nested configs (qwen3_vl, mistral3, kimi_k25): the language model is text_config.
#   * max_context: max_position_embeddings | n_positions | seq_length (chatglm); whisper max_target_positions.
# ======================================================================================================

_REGISTRY = _Path(__file__).resolve().parents[1] / "kvsize" / "models" / "registry.jsonl"
_PLAIN = {
    "llama",
    "gemma",
    "mistral",
    "mixtral",
    "qwen2",
    "qwen2_moe",
    "qwen3",
    "qwen3_moe",
    "qwen3_vl_text",
    "qwen3_vl_moe_text",
    "ministral3",
    "olmo2",
    "olmo3",
    "cohere",
    "internlm",
    "internlm2",
    "baichuan",
    "mimo",
    "minimax_m2",
    "glm4_moe",
    "phi",
    "phi3",
    "gptj",
    "gpt_bigcode",
    "openai-gpt",
    "deepseek",
    "chatglm",
    "gemma2",
}
_MLA = {"deepseek_v2", "deepseek_v3", "deepseek_v32", "kimi_k2", "glm4_moe_lite", "glm_moe_dsa"}
_ENC_DEC = {"t5", "bart", "whisper"}
_SSM = {"mamba", "falcon_mamba", "jamba"}


def _first(c: dict[str, object], *keys: str) -> object:
    for key in keys:
        if c.get(key) is not None:
            return c[key]
    return None


def _i(c: dict[str, object], *keys: str) -> int:
    value = _first(c, *keys)
    assert isinstance(value, int), (keys, value)
    return value


def _label(kv_heads: set[int], heads: int, mla: bool, state: bool) -> str:
    if mla:
        return "MLA"
    if state:
        return "hybrid"
    if kv_heads == {1}:
        return "MQA"
    return "MHA" if kv_heads == {heads} else "GQA"


def derive(raw: dict[str, object]) -> Expected | None:
    """Expected shapes from a raw config, or None for a family this calculator does not cover."""
    c: dict[str, object] = raw["text_config"] if isinstance(raw.get("text_config"), dict) else raw  # type: ignore[assignment]
    model_type = c.get("model_type") or raw.get("model_type")
    if model_type in _MLA:
        layers = _i(c, "num_hidden_layers")
        per = _i(c, "kv_lora_rank") + _i(c, "qk_rope_head_dim")
        # DSA (deepseek_v32, glm_moe_dsa): index_head_dim per token on each layer with its own indexer; GLM-5.2's
        # indexer_types "shared" layers keep none (transformers 5.24 GlmMoeDsaAttention sets no indexer there)
        types = c.get("indexer_types")
        keyed = layers if not isinstance(types, list) else sum(1 for t in types if t != "shared")
        indexer = keyed * _i(c, "index_head_dim") if model_type in ("deepseek_v32", "glm_moe_dsa") else 0
        return Expected(
            {"mla": layers}, "MLA", layers * per, {}, 0, 0, 0, _i(c, "max_position_embeddings"), indexer
        )
    if model_type in ("mamba", "falcon_mamba"):
        d_inner = _first(c, "intermediate_size") or _i(c, "expand") * _i(c, "hidden_size")
        assert isinstance(d_inner, int)
        state = d_inner * (_i(c, "conv_kernel") - 1) + d_inner * _i(c, "state_size")
        layers = _i(c, "num_hidden_layers")
        return Expected({"mamba": layers}, "SSM", 0, {}, layers * state, 0, 0, None)
    if model_type == "jamba":
        layers, period, offset = _i(c, "num_hidden_layers"), _i(c, "attn_layer_period"), _i(c, "attn_layer_offset")
        n_attn = sum(1 for i in range(layers) if i % period == offset)
        d_inner = _i(c, "mamba_expand") * _i(c, "hidden_size")
        state = d_inner * (_i(c, "mamba_d_conv") - 1) + d_inner * _i(c, "mamba_d_state")
        heads = _i(c, "num_attention_heads")
        attn = 2 * _i(c, "num_key_value_heads") * (_i(c, "hidden_size") // heads)
        return Expected(
            {"full": n_attn, "mamba": layers - n_attn},
            "hybrid",
            n_attn * attn,
            {},
            (layers - n_attn) * state,
            0,
            0,
            _i(c, "max_position_embeddings"),
        )
    if model_type not in _PLAIN | _ENC_DEC | {"nemotron_h", "qwen3_5_text", "qwen3_5_moe_text"} | _SSM:
        return None
    heads = _i(c, "num_attention_heads", "n_head", "decoder_attention_heads", "num_heads")
    hidden = _i(c, "hidden_size", "n_embd", "d_model")
    head_dim = _first(c, "head_dim", "kv_channels", "d_kv") or hidden // heads
    assert isinstance(head_dim, int)
    kv = _first(c, "num_key_value_heads") or heads
    if model_type == "gpt_bigcode" and c.get("multi_query"):
        kv = 1
    if model_type == "chatglm" and c.get("multi_query_attention"):
        kv = _i(c, "multi_query_group_num")
    assert isinstance(kv, int)
    attn = 2 * kv * head_dim
    if model_type in _ENC_DEC:
        layers = _i(c, "num_decoder_layers", "decoder_layers", "num_layers")
        encoder = _i(c, "max_source_positions", "n_positions", "max_position_embeddings")
        ctx = _i(c, "max_target_positions", "n_positions", "max_position_embeddings")
        return Expected(
            {"full+cross": layers}, _label({kv}, heads, False, False), layers * attn, {}, 0, layers * attn, encoder, ctx
        )
    ctx_value = _first(c, "max_position_embeddings", "n_positions", "seq_length")
    ctx = ctx_value if isinstance(ctx_value, int) else None
    if model_type == "nemotron_h":
        blocks = c.get("layers_block_type")  # the newer form of the pattern: a list of block names
        symbol = {"mamba": "M", "attention": "*"}
        pattern = (
            "".join(symbol.get(b, "-") for b in blocks)
            if isinstance(blocks, list)
            else str(c["hybrid_override_pattern"])
        )
        hp = _i(c, "mamba_num_heads") * _i(c, "mamba_head_dim")
        n_state, groups = _i(c, "ssm_state_size"), _i(c, "n_groups")
        state = (hp + 2 * groups * n_state) * (_i(c, "conv_kernel") - 1) + hp * n_state
        counts = _Counter(pattern)
        kinds = {"mamba2": counts["M"], "full": counts["*"], "none": counts["-"] + counts["E"]}
        return Expected(
            {k: n for k, n in kinds.items() if n}, "hybrid", counts["*"] * attn, {}, counts["M"] * state, 0, 0, ctx
        )
    if model_type in ("qwen3_5_text", "qwen3_5_moe_text"):
        types = _Counter(c["layer_types"])  # type: ignore[arg-type]
        hk, dk = _i(c, "linear_num_key_heads"), _i(c, "linear_key_head_dim")
        hv, dv = _i(c, "linear_num_value_heads"), _i(c, "linear_value_head_dim")
        state = (2 * hk * dk + hv * dv) * (_i(c, "linear_conv_kernel_dim") - 1) + hv * dk * dv
        return Expected(
            {"full": types["full_attention"], "gated_deltanet": types["linear_attention"]},
            "hybrid",
            types["full_attention"] * attn,
            {},
            types["linear_attention"] * state,
            0,
            0,
            ctx,
        )
    layers = _i(c, "num_hidden_layers", "n_layer", "num_layers")
    window = c.get("sliding_window")
    if isinstance(c.get("layer_types"), list):
        types = _Counter(c["layer_types"])  # type: ignore[arg-type]
        sliding = types["sliding_attention"]
    elif model_type == "gemma2":
        sliding = sum(1 for i in range(layers) if (i + 1) % 2)
    elif model_type in ("phi3", "mistral", "mixtral") and isinstance(window, int):
        sliding = layers
    else:  # qwen2-style configs switch their window off with use_sliding_window false; others have none
        assert not c.get("use_sliding_window"), "no registry config turns Qwen's sliding window on"
        sliding = 0
    kinds = {"sliding": sliding, "full": layers - sliding}
    windows = {f"sliding:{window}": sliding} if sliding else {}
    return Expected(
        {k: n for k, n in kinds.items() if n}, _label({kv}, heads, False, False), layers * attn, windows, 0, 0, 0, ctx
    )


def _bulk() -> dict[str, Expected]:
    out = {}
    for line in _REGISTRY.read_text(encoding="utf-8").splitlines():
        entry = _json.loads(line)
        if entry["hub_id"] not in EXPECTED:
            derived = derive(entry["config"])
            assert derived is not None, f"{entry['hub_id']}: add a hand-worked entry or a rule to derive()"
            out[entry["hub_id"]] = derived
    return out


HAND_WORKED = dict(EXPECTED)
"""The entries worked out by hand above (the calculator is checked against those it covers)."""
EXPECTED.update(_bulk())
