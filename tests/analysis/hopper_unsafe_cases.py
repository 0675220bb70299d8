"""Safe Hopper kernels (docs/hopper.md, docs/language.md) and adversarial twins, each
with one deliberate bug an expert could make.  tests/analysis/test_hopper_unsafe.py
asserts that check() proves every base and refuses every twin with the right kind."""
from __future__ import annotations

GEMM_TMA = '''
def gemm_tma(m: size, n: size, k: size, a: f16[m, k], bt: f16[n, k], c: f32[m, n]):
    assert k % 8 == 0
    for bm in par(0, (m + 63) // 64) @ BLOCKS:
        for bn in par(0, (n + 63) // 64) @ BLOCKS:
            acc: f32[128, 32] @ REGISTER
            a_s: f16[8, 64, 8] @ SHARED
            b_s: f16[8, 64, 8] @ SHARED
            full: barrier[4] @ SHARED
            empty: barrier[4] @ SHARED
            for t in par(0, 128) @ THREADS:
                for i in seq(0, 32):
                    acc[t, i] = 0.0
            for j in seq(0, 4):
                arrive(empty[j], 0, 128)
            for ks in seq(0, (k + 15) // 16):
                wait(empty[ks % 4], 128, 129)
                for t in par(128, 129) @ THREADS:
                    for h in seq(0, 2):
                        tma_load(a_s[2 * (ks % 4) + h, 0:64, 0:8], a[64 * bm:64 * bm + 64, 16 * ks + 8 * h:16 * ks + 8 * h + 8], bar=full[ks % 4])
                        tma_load(b_s[2 * (ks % 4) + h, 0:64, 0:8], bt[64 * bn:64 * bn + 64, 16 * ks + 8 * h:16 * ks + 8 * h + 8], bar=full[ks % 4])
                arrive(full[ks % 4], 128, 129)
                wait(full[ks % 4], 0, 128)
                for t in par(0, 128) @ THREADS:
                    wgmma(acc[t, 0:32], a_s[2 * (ks % 4):2 * (ks % 4) + 2, 0:64, 0:8],
                          b_s[2 * (ks % 4):2 * (ks % 4) + 2, 0:64, 0:8])
                wgmma_commit()
                wgmma_wait(0)
                arrive(empty[ks % 4], 0, 128)
            for t in par(0, 128) @ THREADS:
                for i in seq(0, 32):
                    if 64 * bm + 16 * (t // 32) + t % 32 // 4 + 8 * (i // 2 % 2) < m and 64 * bn + 8 * (i // 4) + 2 * (t % 4) + i % 2 < n:
                        c[64 * bm + 16 * (t // 32) + t % 32 // 4 + 8 * (i // 2 % 2), 64 * bn + 8 * (i // 4) + 2 * (t % 4) + i % 2] = acc[t, i]
'''

GEMM_SWZ = '''
def gemm_swz(m: size, n: size, k: size, a: f16[m, k], bt: f16[n, k], c: f32[m, n]):
    assert k % 8 == 0
    for bm in par(0, (m + 63) // 64) @ BLOCKS:
        for bn in par(0, (n + 63) // 64) @ BLOCKS:
            acc: f32[128, 32] @ REGISTER
            a_s: f16[4, 64, 64] @ SHARED(swizzle=128)
            b_s: f16[4, 64, 64] @ SHARED(swizzle=128)
            full: barrier[4] @ SHARED
            empty: barrier[4] @ SHARED
            for t in par(0, 128) @ THREADS:
                for i in seq(0, 32):
                    acc[t, i] = 0.0
            for j in seq(0, 4):
                arrive(empty[j], 0, 128)
            for ks in seq(0, (k + 63) // 64):
                wait(empty[ks % 4], 128, 129)
                for t in par(128, 129) @ THREADS:
                    tma_load(a_s[ks % 4, 0:64, 0:64], a[64 * bm:64 * bm + 64, 64 * ks:64 * ks + 64], bar=full[ks % 4])
                    tma_load(b_s[ks % 4, 0:64, 0:64], bt[64 * bn:64 * bn + 64, 64 * ks:64 * ks + 64], bar=full[ks % 4])
                arrive(full[ks % 4], 128, 129)
                wait(full[ks % 4], 0, 128)
                for t in par(0, 128) @ THREADS:
                    for kk in seq(0, 4):
                        wgmma(acc[t, 0:32], a_s[ks % 4, 0:64, 16 * kk:16 * kk + 16], b_s[ks % 4, 0:64, 16 * kk:16 * kk + 16])
                wgmma_commit()
                wgmma_wait(0)
                arrive(empty[ks % 4], 0, 128)
            for t in par(0, 128) @ THREADS:
                for i in seq(0, 32):
                    if 64 * bm + 16 * (t // 32) + t % 32 // 4 + 8 * (i // 2 % 2) < m and 64 * bn + 8 * (i // 4) + 2 * (t % 4) + i % 2 < n:
                        c[64 * bm + 16 * (t // 32) + t % 32 // 4 + 8 * (i // 2 % 2), 64 * bn + 8 * (i // 4) + 2 * (t % 4) + i % 2] = acc[t, i]
'''

RING4 = '''
def ring4(n: size, x: f32[n, 32], y: f32[n, 32]):
    for b in par(0, 1) @ BLOCKS:
        buf: f32[4, 32] @ SHARED
        full: barrier[4] @ SHARED
        empty: barrier[4] @ SHARED
        for j in seq(0, 4):
            arrive(empty[j], 32, 64)
        for i in seq(0, n):
            wait(empty[i % 4], 0, 32)
            for t in par(0, 32) @ THREADS:
                buf[i % 4, t] = x[i, t]
            arrive(full[i % 4], 0, 32)
            wait(full[i % 4], 32, 64)
            for t in par(32, 64) @ THREADS:
                y[i, t - 32] = buf[i % 4, t - 32] * 2.0
            arrive(empty[i % 4], 32, 64)
'''

RING_COPY = '''
def ring_copy(n: size, x: f32[n, 64], y: f32[n, 64]):
    for b in par(0, 1) @ BLOCKS:
        full: barrier[2] @ SHARED
        empty: barrier[2] @ SHARED
        s: f32[2, 64] @ SHARED
        for j in seq(0, 2):
            arrive(empty[j], 32, 33, count=64)
        for i in seq(0, n):
            wait(empty[i % 2], 0, 16)
            for t in par(0, 16) @ THREADS:
                async_copy(s[i % 2, 4 * t:4 * t + 4], x[i, 4 * t:4 * t + 4], bar=full[i % 2])
            arrive(full[i % 2], 0, 16)
            wait(full[i % 2], 32, 96)
            for t in par(32, 96) @ THREADS:
                y[i, t - 32] = s[i % 2, t - 32] * 2.0
            sync(32, 96)
            arrive(empty[i % 2], 32, 33, count=64)
'''

SCALE_STORE = '''
def scale(m: size, n: size, x: f32[m, n], y: f32[m, n]):
    assert n % 4 == 0
    for b in par(0, (m + 15) // 16) @ BLOCKS:
        s: f32[16, 32] @ SHARED
        for t in par(0, 32) @ THREADS:
            for r in seq(0, 16):
                if 16 * b + r < m and t < n:
                    s[r, t] = 2.0 * x[16 * b + r, t]
                else:
                    s[r, t] = 0.0
        sync()
        for t in par(0, 1) @ THREADS:
            tma_store(y[16 * b:16 * b + 16, 0:32], s[0:16, 0:32])
            tma_commit()
            tma_wait(0)
'''

EXCHANGE = '''
def exchange(n: size, x: f32[n] @ GLOBAL, y: f32[n] @ GLOBAL):
    assert n % 256 == 0
    for b in par(0, n // 256) @ BLOCKS:
        for r in par(0, 2) @ CLUSTERS:
            for t in par(0, 128) @ THREADS:
                x[b * 256 + r * 128 + t] = 1.0 * r
            sync_cluster()
            for t in par(0, 128) @ THREADS:
                y[b * 256 + r * 128 + t] = x[b * 256 + (1 - r) * 128 + t]
'''

SPECIALIZED = '''
def specialized(n: size, x: f32[n, 256], y: f32[n, 256]):
    for b in par(0, n) @ BLOCKS:
        s: f32[256] @ SHARED
        setmaxnreg(40, 0, 128)
        setmaxnreg(232, 128, 384)
        for t in par(0, 128) @ THREADS:
            s[t] = x[b, t]
            s[t + 128] = x[b, t + 128]
        sync()
        for t in par(128, 384) @ THREADS:
            y[b, t - 128] = s[383 - t] * 2.0
'''

GEMM_WG = '''
def gemm(k: size, a: f16[64, k], bt: f16[64, k], c: f32[64, 64]):
    assert k % 32 == 0
    for blk in par(0, 1) @ BLOCKS:
        acc: f32[128, 32] @ REGISTER
        for t in par(0, 128) @ THREADS:
            for i in seq(0, 32):
                acc[t, i] = 0.0
        a_s: f16[4, 64, 8] @ SHARED
        b_s: f16[4, 64, 8] @ SHARED
        for ks in seq(0, k // 32):
            for t in par(0, 128) @ THREADS:
                for h in seq(0, 2):
                    for j in seq(0, 8):
                        a_s[2 * h + t % 2, t // 2, j] = a[t // 2, 32 * ks + 16 * h + 8 * (t % 2) + j]
                        b_s[2 * h + t % 2, t // 2, j] = bt[t // 2, 32 * ks + 16 * h + 8 * (t % 2) + j]
            sync()
            for t in par(0, 128) @ THREADS:
                for s in seq(0, 2):
                    wgmma(acc[t, 0:32], a_s[2 * s:2 * s + 2, 0:64, 0:8],
                          b_s[2 * s:2 * s + 2, 0:64, 0:8])
            wgmma_commit()
            wgmma_wait(0)
            sync()
        for t in par(0, 128) @ THREADS:
            for i in seq(0, 32):
                c[16 * (t // 32) + t % 32 // 4 + 8 * (i // 2 % 2),
                  8 * (i // 4) + 2 * (t % 4) + i % 2] = acc[t, i]
'''

BASES = {"gemm_tma": GEMM_TMA, "gemm_swz": GEMM_SWZ, "ring4": RING4, "ring_copy": RING_COPY,
         "scale": SCALE_STORE, "exchange": EXCHANGE, "specialized": SPECIALIZED,
         "gemm_wg": GEMM_WG}


def _m(name, base, old, new, kind, count=1):
    return (name, base, old, new, kind, count)


# (name, base, text replaced, replacement, the kind check() must report, occurrences)
MUTANTS = [
    # rings of split barriers
    _m("ring_read_before_full", "ring4", "            wait(full[i % 4], 32, 64)\n", "", "race"),
    _m("ring_wait_stage_behind", "ring4", "wait(full[i % 4], 32, 64)", "wait(full[(i + 3) % 4], 32, 64)", "divergence"),
    _m("ring_refill_before_empty", "ring4", "            wait(empty[i % 4], 0, 32)\n", "", "race"),
    _m("ring_three_slots_primed", "ring4", "for j in seq(0, 4):", "for j in seq(0, 3):", "divergence"),
    _m("ring_five_primes", "ring4", "for j in seq(0, 4):\n            arrive(empty[j]", "for j in seq(0, 5):\n            arrive(empty[j % 4]", "divergence"),
    _m("ring_release_before_read", "ring4",
       "            for t in par(32, 64) @ THREADS:\n                y[i, t - 32] = buf[i % 4, t - 32] * 2.0\n            arrive(empty[i % 4], 32, 64)\n",
       "            arrive(empty[i % 4], 32, 64)\n            for t in par(32, 64) @ THREADS:\n                y[i, t - 32] = buf[i % 4, t - 32] * 2.0\n", "race"),
    _m("ring_consumer_next_slot", "ring4", "buf[i % 4, t - 32]", "buf[(i + 1) % 4, t - 32]", "race"),
    _m("ring_two_buffers_four_barriers", "ring4", "buf[i % 4", "buf[i % 2", "race", 2),
    _m("ring_wait_half_warp", "ring4", "wait(full[i % 4], 32, 64)", "wait(full[i % 4], 32, 48)", "race"),
    _m("ring_prime_other_range", "ring4", "arrive(empty[j], 32, 64)", "arrive(empty[j], 32, 48)", "divergence"),
    _m("ring_wait_on_data", "ring4", "            wait(full[i % 4], 32, 64)\n",
       "            if x[i, 0] > 0.0:\n                wait(full[i % 4], 32, 64)\n", "unknown"),
    _m("ring_wait_on_index", "ring4", "            wait(full[i % 4], 32, 64)\n",
       "            if i % 2 == 0:\n                wait(full[i % 4], 32, 64)\n", "unknown"),
    # counted arrivals and async copies completing on a barrier
    _m("copy_ranged_sync_short", "ring_copy", "sync(32, 96)", "sync(32, 64)", "race"),
    _m("copy_count_mismatch", "ring_copy", "arrive(empty[i % 2], 32, 33, count=64)", "arrive(empty[i % 2], 32, 33, count=32)", "divergence"),
    _m("copy_arrive_before_copies", "ring_copy",
       "            for t in par(0, 16) @ THREADS:\n                async_copy(s[i % 2, 4 * t:4 * t + 4], x[i, 4 * t:4 * t + 4], bar=full[i % 2])\n            arrive(full[i % 2], 0, 16)\n",
       "            arrive(full[i % 2], 0, 16)\n            for t in par(0, 16) @ THREADS:\n                async_copy(s[i % 2, 4 * t:4 * t + 4], x[i, 4 * t:4 * t + 4], bar=full[i % 2])\n", "race"),
    _m("copy_wrong_barrier", "ring_copy", "bar=full[i % 2]", "bar=empty[i % 2]", "race"),
    _m("copy_arrive_other_thread", "ring_copy", "arrive(empty[i % 2], 32, 33, count=64)", "arrive(empty[i % 2], 95, 96, count=64)", "divergence"),
    # TMA loads
    _m("tma_wrong_ring_element", "gemm_tma", "bar=full[ks % 4])", "bar=full[(ks + 1) % 4])", "race", 2),
    _m("tma_issue_after_arrive", "gemm_tma",
       "                arrive(full[ks % 4], 128, 129)\n                wait(full[ks % 4], 0, 128)\n",
       "                wait(full[ks % 4], 0, 128)\n", "race"),
    _m("tma_wgmma_wait1_release", "gemm_tma", "wgmma_wait(0)", "wgmma_wait(1)", "race"),
    _m("tma_box_rows_unaligned", "gemm_tma", "    assert k % 8 == 0\n", "", "bounds"),
    _m("tma_dst_unaligned", "gemm_tma", "a_s: f16[8, 64, 8] @ SHARED", "a_s: f16[8, 65, 8] @ SHARED", "bounds"),
    _m("tma_two_boxes_one_slot", "gemm_tma", "tma_load(b_s[2 * (ks % 4) + h, 0:64, 0:8]", "tma_load(a_s[2 * (ks % 4) + h, 0:64, 0:8]", "race"),
    _m("tma_consumer_wait_other_slot", "gemm_tma", "wait(full[ks % 4], 0, 128)", "wait(full[(ks + 1) % 4], 0, 128)", "divergence"),
    _m("swz_slot_off_period", "gemm_swz", "a_s: f16[4, 64, 64] @ SHARED(swizzle=128)", "a_s: f16[4, 68, 64] @ SHARED(swizzle=128)", "bounds"),
    _m("swz_k_unaligned", "gemm_swz", "    assert k % 8 == 0\n", "", "bounds"),
    _m("swz_wgmma_wait1_release", "gemm_swz", "wgmma_wait(0)", "wgmma_wait(1)", "race"),
    # wgmma
    _m("wg_no_fence_sync", "gemm_wg", "            sync()\n            for t in par(0, 128) @ THREADS:\n                for s in",
       "            for t in par(0, 128) @ THREADS:\n                for s in", "race"),
    _m("wg_refill_in_flight", "gemm_wg", "            wgmma_commit()\n            wgmma_wait(0)\n            sync()\n",
       "            wgmma_commit()\n            wgmma_wait(1)\n            sync()\n", "race"),
    _m("wg_half_warpgroup", "gemm_wg", "for t in par(0, 128) @ THREADS:\n                for s in seq(0, 2):",
       "for t in par(0, 64) @ THREADS:\n                for s in seq(0, 2):", "divergence"),
    _m("wg_divergent_issue", "gemm_wg", "                for s in seq(0, 2):\n                    wgmma(",
       "                for s in seq(0, 1 + t // 64):\n                    wgmma(", "divergence"),
    _m("wg_no_wait_final", "gemm_wg", "            wgmma_commit()\n            wgmma_wait(0)\n            sync()\n",
       "            wgmma_commit()\n            sync()\n", "race"),
    # TMA stores
    _m("store_overwrite_before_wait", "scale", "            tma_commit()\n            tma_wait(0)\n",
       "            tma_commit()\n            s[0, 0] = 0.0\n            tma_wait(0)\n", "race"),
    _m("store_never_waited", "scale", "            tma_wait(0)\n", "", "race"),
    _m("store_no_sync", "scale", "        sync()\n", "", "race"),
    _m("store_rows_unaligned", "scale", "    assert n % 4 == 0\n", "", "bounds"),
    _m("store_blocks_overlap", "scale", "tma_store(y[16 * b:16 * b + 16, 0:32]", "tma_store(y[8 * b:8 * b + 16, 0:32]", "race"),
    # clusters
    _m("cluster_rank_loop", "exchange", "            sync_cluster()\n",
       "            for q in seq(0, r + 1):\n                sync_cluster()\n", "divergence"),
    _m("cluster_block_sync_only", "exchange", "sync_cluster()", "sync()", "race"),
    _m("cluster_reads_other_cluster", "exchange", "x[b * 256 + (1 - r) * 128 + t]", "x[(b * 256 + 256 + (1 - r) * 128 + t) % n]", "race"),
    _m("cluster_rewrite_after_read", "exchange", "                y[b * 256 + r * 128 + t] = x[b * 256 + (1 - r) * 128 + t]\n",
       "                y[b * 256 + r * 128 + t] = x[b * 256 + (1 - r) * 128 + t]\n            for t in par(0, 128) @ THREADS:\n                x[b * 256 + r * 128 + t] = 2.0\n", "race"),
    _m("cluster_tail_blocks", "exchange", "    assert n % 256 == 0\n    for b in par(0, n // 256)", "    for b in par(0, (n + 255) // 256)", "bounds"),
    # setmaxnreg
    _m("regs_over_file", "specialized", "setmaxnreg(232, 128, 384)", "setmaxnreg(240, 128, 384)", "resource"),
    _m("regs_half_warpgroup", "specialized", "setmaxnreg(40, 0, 128)", "setmaxnreg(40, 0, 64)", "divergence"),
    _m("regs_divergent", "specialized", "        setmaxnreg(40, 0, 128)\n", "        if n > 2:\n            setmaxnreg(40, 0, 128)\n", "unknown"),
    _m("regs_raise_behind_barrier", "specialized", "        setmaxnreg(40, 0, 128)\n        setmaxnreg(232, 128, 384)\n",
       "        setmaxnreg(232, 128, 384)\n        sync()\n        setmaxnreg(40, 0, 128)\n", "divergence"),
    _m("regs_odd_count", "specialized", "setmaxnreg(40, 0, 128)", "setmaxnreg(44, 0, 128)", "resource"),
    _m("regs_past_block", "specialized", "setmaxnreg(232, 128, 384)", "setmaxnreg(232, 128, 512)", "divergence"),
]

MUTANTS += [
    _m("ring_no_empty_n5", "ring4", "            wait(empty[i % 4], 0, 32)\n", "", "race"),
    _m("ring_arrive_short_of_writers", "ring4", "arrive(full[i % 4], 0, 32)", "arrive(full[i % 4], 0, 16)", "race"),
    _m("tma_wgmma_next_slot", "gemm_swz", "wgmma(acc[t, 0:32], a_s[ks % 4, 0:64", "wgmma(acc[t, 0:32], a_s[(ks + 1) % 4, 0:64", "race"),
    _m("tma_two_issuers", "gemm_swz", "                wait(empty[ks % 4], 128, 129)\n                for t in par(128, 129) @ THREADS:",
       "                wait(empty[ks % 4], 128, 160)\n                for t in par(128, 160) @ THREADS:", "race"),
    _m("store_tile_rewritten_unsynced", "scale", "            tma_wait(0)\n",
       "            tma_wait(0)\n        for t in par(0, 32) @ THREADS:\n            s[1, t] = 3.0\n", "race"),
    _m("cluster_loop_one_sync", "exchange_loop", "                    y[i, r * 256 + t] = x[(1 - r) * 256 + t]\n                sync_cluster()\n",
       "                    y[i, r * 256 + t] = x[(1 - r) * 256 + t]\n", "race"),
    _m("regs_blocks_per_sm", "specialized", "for b in par(0, n) @ BLOCKS:", "for b in par(0, n, blocks_per_sm=2) @ BLOCKS:", "resource"),
]

EXCHANGE_LOOP = '''
def exchange_loop(n: size, x: f32[512] @ GLOBAL, y: f32[n, 512] @ GLOBAL):
    for b in par(0, 1) @ BLOCKS:
        for r in par(0, 2) @ CLUSTERS:
            for i in seq(0, n):
                for t in par(0, 128) @ THREADS:
                    x[r * 256 + t] = 1.0 * (r + i)
                sync_cluster()
                for t in par(0, 128) @ THREADS:
                    y[i, r * 256 + t] = x[(1 - r) * 256 + t]
                sync_cluster()
'''
BASES["exchange_loop"] = EXCHANGE_LOOP

MUTANTS += [
    _m("ring_index_past_ring", "ring4", "full: barrier[4]", "full: barrier[2]", "bounds"),
    _m("ring_double_wait", "ring4", "            wait(full[i % 4], 32, 64)\n",
       "            wait(full[i % 4], 32, 64)\n            wait(full[i % 4], 32, 64)\n", "divergence"),
    _m("wg_acc_other_lane", "gemm_wg", "wgmma(acc[t, 0:32]", "wgmma(acc[(t + 1) % 128, 0:32]", "mapping"),
    _m("wg_acc_read_in_flight", "gemm_wg", "            wgmma_commit()\n            wgmma_wait(0)\n",
       "            wgmma_commit()\n            for t in par(0, 128) @ THREADS:\n                c[0, 0] = acc[t, 0]\n            wgmma_wait(0)\n", "race"),
    _m("swz_empty_wait_other_slot", "gemm_swz", "wait(empty[ks % 4], 128, 129)", "wait(empty[(ks + 1) % 4], 128, 129)", "divergence"),
    _m("swz_release_every_other", "gemm_swz", "                arrive(empty[ks % 4], 0, 128)\n",
       "                if ks % 2 == 0:\n                    arrive(empty[ks % 4], 0, 128)\n", "race"),
    _m("cluster_sync_only_some_sizes", "exchange", "            sync_cluster()\n",
       "            if n > 256:\n                sync_cluster()\n", "race"),
]



# remote arrives (docs/hopper.md#remote-arrives): every block of a cluster arrives on each
RELAY = '''
def relay(n: size, x: f32[n] @ GLOBAL, y: f32[n] @ GLOBAL):
    assert n % 256 == 0
    for b in par(0, n // 256) @ BLOCKS:
        for r in par(0, 2) @ CLUSTERS:
            done: barrier @ SHARED
            for t in par(0, 128) @ THREADS:
                x[b * 256 + r * 128 + t] = 1.0 * r
            arrive(done, 0, 128, cluster=True)
            wait(done, 0, 128)
            for t in par(0, 128) @ THREADS:
                y[b * 256 + r * 128 + t] = x[b * 256 + (1 - r) * 128 + t]
'''

RELAY_LOOP = '''
def relay_loop(m: size, x: f32[256] @ GLOBAL, y: f32[m, 256] @ GLOBAL):
    for b in par(0, 1) @ BLOCKS:
        for r in par(0, 2) @ CLUSTERS:
            done: barrier @ SHARED
            for i in seq(0, m):
                for t in par(0, 128) @ THREADS:
                    x[r * 128 + t] = 1.0 * (r + i)
                arrive(done, 0, 128, cluster=True)
                wait(done, 0, 128)
                for t in par(0, 128) @ THREADS:
                    y[i, r * 128 + t] = x[(1 - r) * 128 + t]
                sync_cluster()
'''
BASES.update(relay=RELAY, relay_loop=RELAY_LOOP)

MUTANTS += [
    _m("relay_arrive_half", "relay", "arrive(done, 0, 128, cluster=True)", "arrive(done, 0, 64, cluster=True)", "race"),
    _m("relay_rank_arrive", "relay", "            arrive(done, 0, 128, cluster=True)\n",
       "            if r == 0:\n                arrive(done, 0, 128, cluster=True)\n", "divergence"),
    _m("relay_write_after_arrive", "relay",
       "                x[b * 256 + r * 128 + t] = 1.0 * r\n            arrive(done, 0, 128, cluster=True)\n",
       "                x[b * 256 + r * 128 + t] = 1.0 * r\n            arrive(done, 0, 128, cluster=True)\n"
       "            for t in par(0, 128) @ THREADS:\n                x[b * 256 + r * 128 + t] = 2.0\n", "race"),
    _m("relay_wait_fewer", "relay", "wait(done, 0, 128)", "wait(done, 0, 64)", "race"),
    _m("relay_loop_no_sync_cluster", "relay_loop", "                sync_cluster()\n", "", "race"),
]


# each slot filled once: no empty barrier is needed while n <= 4 (symbolic n)
RING_ONCE = '''
def ring_once(n: size, x: f32[n, 32], y: f32[n, 32]):
    assert n <= 4
    for b in par(0, 1) @ BLOCKS:
        buf: f32[4, 32] @ SHARED
        full: barrier[4] @ SHARED
        for i in seq(0, n):
            for t in par(0, 32) @ THREADS:
                buf[i % 4, t] = x[i, t]
            arrive(full[i % 4], 0, 32)
            wait(full[i % 4], 32, 64)
            for t in par(32, 64) @ THREADS:
                y[i, t - 32] = buf[i % 4, t - 32] * 2.0
'''
BASES["ring_once"] = RING_ONCE
MUTANTS += [_m("ring_once_fifth_fill", "ring_once", "assert n <= 4", "assert n <= 5", "race")]


# warpgroup 0's wgmma reads a_s; warpgroup 1 overwrites a_s after the block barrier
TWO_WG = '''
def two(a: f16[2, 64, 8], b: f16[2, 8, 8], c: f32[128, 4]):
    for blk in par(0, 1) @ BLOCKS:
        acc: f32[128, 4] @ REGISTER
        a_s: f16[2, 64, 8] @ SHARED
        b_s: f16[2, 8, 8] @ SHARED
        for t in par(0, 256) @ THREADS:
            if t < 128:
                for i in seq(0, 4):
                    acc[t, i] = 0.0
                for j in seq(0, 8):
                    a_s[t % 2, t // 2, j] = a[t % 2, t // 2, j]
                if t < 16:
                    for j in seq(0, 8):
                        b_s[t % 2, t // 2, j] = b[t % 2, t // 2, j]
        sync()
        for t in par(0, 128) @ THREADS:
            wgmma(acc[t, 0:4], a_s, b_s)
        wgmma_commit()
        wgmma_wait(0)
        sync()
        for t in par(128, 256) @ THREADS:
            for j in seq(0, 8):
                a_s[t % 2, (t - 128) // 2, j] = 0.0
        for t in par(0, 128) @ THREADS:
            for i in seq(0, 4):
                c[t, i] = acc[t, i]
'''
BASES["two_wg"] = TWO_WG
MUTANTS += [
    _m("two_wg_overwrite_in_flight", "two_wg", "        wgmma_wait(0)\n        sync()\n", "        sync()\n", "race"),
]

# twins refused when read (ProcError matching the last field)
PARSE_REFUSED = [
    _m("swz_swizzle_mismatch", "gemm_swz", "a_s: f16[4, 64, 64] @ SHARED(swizzle=128)", "a_s: f16[4, 64, 64] @ SHARED(swizzle=64)", r"not a \[2, 64, 8\] or \[64, 16\] window"),
    _m("swz_plain_tile", "gemm_swz", "b_s: f16[4, 64, 64] @ SHARED(swizzle=128)", "b_s: f16[4, 64, 64] @ SHARED", r"not a \[2, 64, 8\] or \[64, 16\] window"),
    _m("ring_barrier_never_allocated", "ring4", "        full: barrier[4] @ SHARED\n", "", "not a split barrier"),
]
