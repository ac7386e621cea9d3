"""vLLM's scheduler defaults per GPU and version: the batch budget, the running-request cap and the tokens in
flight. Pure: the device comes in as a `Device` (what vLLM's platform layer reports), nothing is probed.

Read from each release's source:

- 0.33: vllm/engine/arg_utils.py EngineArgs.get_batch_defaults and
  _set_default_max_num_seqs_and_batched_tokens_args; vllm/config/vllm.py VllmConfig.max_concurrent_batches
  and max_in_flight_tokens (async scheduling with the V2 model runner, both on by default: pp + 1 batches).
- 0.19: the same two arg_utils.py functions without the 160 GiB tier and the GB10 exclusion;
  v1/executor/multiproc_executor.py max_concurrent_batches (2 with async scheduling at pp 1, else pp);
  SlidingWindowSpec / ChunkedLocalAttentionSpec.max_memory_usage_bytes reserve one batch in flight.
- 0.11: EngineArgs._set_default_args (same tiers as 0.19; max_num_batched_tokens is not clamped to
  max_num_seqs x max_model_len there, because SchedulerConfig.__post_init__ only clamps its own default);
  async scheduling off by default (config/scheduler.py), so pp batches; one batch in flight for admission.
"""

from __future__ import annotations

import msgspec

from kvsize.engines.context import Device, UsageContext
from kvsize.engines.vllm_releases import VLLM_RELEASES, VllmRules

GIB = 1024**3

# SchedulerConfig.DEFAULT_MAX_NUM_BATCHED_TOKENS / DEFAULT_MAX_NUM_SEQS (vllm/config/scheduler.py): the values
# for a usage context outside get_batch_defaults' tables (engine-core clients, tests).
DEFAULT_MAX_NUM_BATCHED_TOKENS = 2048
DEFAULT_MAX_NUM_SEQS = 128


class SchedulerSettings(msgspec.Struct, frozen=True):
    """The scheduler vLLM runs with, defaults resolved."""

    version: str
    max_num_batched_tokens: int
    max_num_seqs: int
    """The cap on running requests (Scheduler: len(self.running) == self.max_num_seqs stops admission)."""
    max_concurrent_batches: int
    """Batches in flight at once (the engine core's batch queue)."""
    in_flight_tokens: int
    """Tokens scheduled but not settled that sliding-window and chunked-local layers reserve per request:
    max_concurrent_batches x max_num_batched_tokens in 0.33 (VllmConfig.max_in_flight_tokens); one batch of
    max_num_batched_tokens in 0.19 and 0.11 (SlidingWindowSpec.max_memory_usage_bytes)."""
    max_num_encoder_input_tokens: int
    """SchedulerConfig.max_num_encoder_input_tokens: max_num_batched_tokens (0.33, 0.19); 0.11 sets the
    encoder length for encoder-decoder models (VllmConfig.__post_init__), applied by the caller."""
    source: str
    """Where each default came from, in words."""


def _rules(release: str | VllmRules | None) -> VllmRules:
    """The switches of the era that sizes `release` (a release number, or the rules themselves)."""
    return release if isinstance(release, VllmRules) else VLLM_RELEASES.resolve(release).era.rules


def _reads_no_total(rules: VllmRules, device: Device | None) -> bool:
    """vLLM's NVML platform raises reading this device's total (NVML answers NOT_SUPPORTED, and the release
    has no fallback to torch's total_memory)."""
    return (
        device is not None
        and device.platform == "cuda"
        and not device.nvml_memory_info
        and not rules.nvml_total_fallback
    )


def batch_defaults(
    release: str | VllmRules | None, device: Device | None, usage: UsageContext, world_size: int = 1
) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) before any clamping, as EngineArgs.get_batch_defaults (0.12+)
    or _set_default_args(_v1) pick them for `device`.

    Tiers (device memory as get_device_total_memory reports it), by the era's switches:
    - >= 160 GiB (VllmRules.tier_160gib, 0.28+): 16384 / 1024 for both contexts;
    - >= 70 GiB, not named "a100" (tier_a100_excluded, 0.9+) and not GB10 (capability 12.1, gb10_small_tier,
      0.33): API server 8192, LLM class 16384, 1024 sequences;
    - otherwise API 2048, LLM 8192, 256 sequences.
    - TPU chips override the batched tokens (V6E 1024/2048, V5E 512/1024, V5P 256/512 for API/LLM); the CPU
      platform scales with the world size (2048 / 4096 tokens, 128 / 256 sequences per rank).
    - No device (vLLM could not query one): the small tier. So is a CUDA device whose NVML memory query
      fails (GB10: NOT_SUPPORTED) before 0.33: NvmlCudaPlatform.get_device_total_memory raises and the
      defaults' `except Exception` sets device_memory = 0 (arg_utils.py, 0.8.5-0.32.0); 0.33 falls back to
      torch's total (nvml_total_fallback) and keeps GB10 small by its capability instead.
    """
    rules = _rules(release)
    memory = device.total_memory_bytes if device is not None else 0
    if _reads_no_total(rules, device):
        memory = 0
    name = device.name.lower() if device is not None else ""
    api = usage is UsageContext.API_SERVER
    is_gb10 = rules.gb10_small_tier and device is not None and device.capability == (12, 1)
    if rules.tier_160gib and memory >= 160 * GIB:
        tokens, seqs = 16384, 1024
    elif memory >= 70 * GIB and not (rules.tier_a100_excluded and "a100" in name) and not is_gb10:
        tokens, seqs = (8192 if api else 16384), 1024
    else:
        tokens, seqs = (2048 if api else 8192), 256
    platform = device.platform if device is not None else "cuda"
    if platform == "tpu":
        chips = {"V6E": (1024, 2048), "V5E": (512, 1024), "V5P": (256, 512)}
        chip = chips.get(device.name.upper() if device is not None else "")
        if chip is not None:
            tokens = chip[0] if api else chip[1]
    if platform == "cpu":
        tokens = (2048 if api else 4096) * world_size
        seqs = (128 if api else 256) * world_size
    return tokens, seqs


def max_concurrent_batches(
    release: str | VllmRules | None, pp: int = 1, *, async_scheduling: bool | None = None, v2_runner: bool = True
) -> int:
    """Batches the engine keeps in flight: pp + 1 with async scheduling on the V2 model runner
    (VllmConfig.max_concurrent_batches, 0.23+); on the V1 runner 2 with async scheduling (0.10-0.14.1:
    executors' `2 if async else pp`; 0.16+: 2 at pp 1, else pp); pp without it. Async scheduling is on by
    default from 0.14 (VllmRules.async_scheduling_default). `v2_runner`: the model would run on the V2 runner
    where the era runs some models there (VllmRules.v2_runner)."""
    rules = _rules(release)
    on = rules.async_scheduling_default if async_scheduling is None else async_scheduling
    if not on:
        return pp
    if rules.v2_runner == "all" or (rules.v2_runner == "dense" and v2_runner):
        return pp + 1
    return 2 if rules.async_batches == "two" or pp <= 1 else pp


def scheduler_settings(
    release: str | None,
    device: Device | None,
    *,
    max_model_len: int,
    usage: UsageContext = UsageContext.API_SERVER,
    tp: int = 1,
    pp: int = 1,
    max_num_batched_tokens: int | None = None,
    max_num_seqs: int | None = None,
    chunked_prefill: bool = True,
    async_scheduling: bool | None = None,
    throughput_mode: bool = False,
    v2_runner: bool = True,
) -> SchedulerSettings:
    """vLLM `version`'s scheduler for a model served at `max_model_len` on `device`, with the user's
    --max-num-batched-tokens / --max-num-seqs (None: the default) and --performance-mode throughput (0.19+).

    _set_default_max_num_seqs_and_batched_tokens_args (0.12+; before, _set_default_args(_v1)), in order, each
    where the era has it: the tier defaults; x2 each in throughput mode (0.17+); without chunked prefill
    max_model_len (0.9.2-0.11.0) or at least max_model_len (0.11.1+); at most max_num_seqs x max_model_len
    (0.11.1+); then max_num_seqs at most max_num_batched_tokens (0.10.1+). Only defaults are adjusted: a value
    the user gave is kept.
    """
    resolved = VLLM_RELEASES.resolve(release)
    rules, version = resolved.era.rules, resolved.release
    if throughput_mode and not rules.throughput_mode:
        from kvsize.errors import UsageError

        raise UsageError(f"vLLM {version} has no --performance-mode (added in 0.17)", hint="Drop it.")
    default_tokens, default_seqs = batch_defaults(rules, device, usage, tp * pp)
    tokens = max_num_batched_tokens if max_num_batched_tokens is not None else default_tokens
    seqs = max_num_seqs if max_num_seqs is not None else default_seqs
    notes = []
    if throughput_mode:
        tokens *= 2 if max_num_batched_tokens is None else 1
        seqs *= 2 if max_num_seqs is None else 1
    if max_num_batched_tokens is None:
        if not chunked_prefill and rules.no_chunked_tokens == "max_model_len":
            tokens = max_model_len
        elif not chunked_prefill and rules.no_chunked_tokens == "at_least_max_model_len":
            tokens = max(max_model_len, tokens)
        if rules.seqs_x_len_clamp:
            tokens = min(seqs * max_model_len, tokens)
    if max_num_seqs is None and rules.seqs_capped_by_tokens:
        seqs = min(seqs, tokens)
    tier = f"{default_tokens} tokens / {default_seqs} sequences for {usage.value}"
    notes.append(
        f"vLLM {version} defaults {tier} on "
        + (f"{device.name or 'a custom card'} ({device.total_memory_bytes / GIB:.1f} GiB)" if device else "no GPU")
        + (" (NVML reports no memory total there, so vLLM reads 0 GiB)" if _reads_no_total(rules, device) else "")
    )
    batches = max_concurrent_batches(rules, pp, async_scheduling=async_scheduling, v2_runner=v2_runner)
    in_flight = batches * tokens if rules.sliding_reserve == "in_flight_batches" else tokens
    return SchedulerSettings(
        version=version,
        max_num_batched_tokens=tokens,
        max_num_seqs=seqs,
        max_concurrent_batches=batches,
        in_flight_tokens=in_flight,
        max_num_encoder_input_tokens=tokens,
        source="; ".join(notes),
    )
