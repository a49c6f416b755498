// reduce.metal: sum and max over one or more axes.
//
// The host splits the input view into two views over the same storage: `kept` (the axes that stay,
// with the input's base offset) and `reduced` (the axes that are summed away, base offset 0).
// One thread per output element: it finds where its kept position starts, then walks every
// reduced position, so any strided, flipped or broadcast input is read in place.
//
// Buffers: 0 src, 1 dst (count elements), 2 kept view, 3 reduced view, 4 count (outputs),
//          5 reduced_count (elements per output; at least 1 for max, checked by the host).
// Sums accumulate in float with Kahan compensation (fast math is off, so the compensation is
// kept) while the running total is finite. Once it is not (an inf or NaN was read, or float
// overflowed), the compensation would compute inf - inf = NaN, so plain IEEE addition takes
// over: inf + finite stays inf, inf + -inf and anything + NaN give NaN -- numpy's results.
// max propagates NaN like numpy.

template <typename T>
inline void reduce_sum(device const T* src, device T* dst, constant int* kept,
                       constant int* reduced, uint count, uint reduced_count, uint gid) {
    if (gid >= count) {
        return;
    }
    int start = view_offset(kept, gid);
    float total = 0.0f;
    float compensation = 0.0f;
    for (uint r = 0; r < reduced_count; ++r) {
        float term = float(src[start + view_offset(reduced, r)]) - compensation;
        float next = total + term;
        compensation = isfinite(next) ? (next - total) - term : 0.0f;
        total = next;
    }
    dst[gid] = T(total);
}

template <typename T>
inline void reduce_max(device const T* src, device T* dst, constant int* kept,
                       constant int* reduced, uint count, uint reduced_count, uint gid) {
    if (gid >= count) {
        return;
    }
    int start = view_offset(kept, gid);
    float best = float(src[start + view_offset(reduced, 0)]);
    for (uint r = 1; r < reduced_count; ++r) {
        best = nan_maximum(best, float(src[start + view_offset(reduced, r)]));
    }
    dst[gid] = T(best);
}

kernel void reduce_sum_f32(device const float* src [[buffer(0)]],
                           device float* dst [[buffer(1)]],
                           constant int* kept [[buffer(2)]],
                           constant int* reduced [[buffer(3)]],
                           constant uint& count [[buffer(4)]],
                           constant uint& reduced_count [[buffer(5)]],
                           uint gid [[thread_position_in_grid]]) {
    reduce_sum(src, dst, kept, reduced, count, reduced_count, gid);
}

kernel void reduce_sum_f16(device const half* src [[buffer(0)]],
                           device half* dst [[buffer(1)]],
                           constant int* kept [[buffer(2)]],
                           constant int* reduced [[buffer(3)]],
                           constant uint& count [[buffer(4)]],
                           constant uint& reduced_count [[buffer(5)]],
                           uint gid [[thread_position_in_grid]]) {
    reduce_sum(src, dst, kept, reduced, count, reduced_count, gid);
}

kernel void reduce_max_f32(device const float* src [[buffer(0)]],
                           device float* dst [[buffer(1)]],
                           constant int* kept [[buffer(2)]],
                           constant int* reduced [[buffer(3)]],
                           constant uint& count [[buffer(4)]],
                           constant uint& reduced_count [[buffer(5)]],
                           uint gid [[thread_position_in_grid]]) {
    reduce_max(src, dst, kept, reduced, count, reduced_count, gid);
}

kernel void reduce_max_f16(device const half* src [[buffer(0)]],
                           device half* dst [[buffer(1)]],
                           constant int* kept [[buffer(2)]],
                           constant int* reduced [[buffer(3)]],
                           constant uint& count [[buffer(4)]],
                           constant uint& reduced_count [[buffer(5)]],
                           uint gid [[thread_position_in_grid]]) {
    reduce_max(src, dst, kept, reduced, count, reduced_count, gid);
}
