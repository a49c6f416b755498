// copy.metal: the strided copy behind `materialize` and `copying_transpose`.
//
// One thread per element of the view, in row-major order of the view: thread `gid` finds the
// storage offset of its element through the view's (shape, strides, base offset) and writes it to
// position `gid` of a fresh contiguous buffer.
//
// Buffers: 0 src (storage of the view), 1 dst (count elements), 2 view descriptor, 3 count.
// One kernel per element type: float32 (f32), float16 (f16), int32 (i32) and bool (b8).

template <typename T>
inline void strided_copy(device const T* src, device T* dst, constant int* view, uint count,
                         uint gid) {
    if (gid >= count) {
        return;  // the grid may be rounded up to whole threadgroups
    }
    dst[gid] = src[view_offset(view, gid)];
}

kernel void strided_copy_f32(device const float* src [[buffer(0)]],
                             device float* dst [[buffer(1)]],
                             constant int* view [[buffer(2)]],
                             constant uint& count [[buffer(3)]],
                             uint gid [[thread_position_in_grid]]) {
    strided_copy(src, dst, view, count, gid);
}

kernel void strided_copy_f16(device const half* src [[buffer(0)]],
                             device half* dst [[buffer(1)]],
                             constant int* view [[buffer(2)]],
                             constant uint& count [[buffer(3)]],
                             uint gid [[thread_position_in_grid]]) {
    strided_copy(src, dst, view, count, gid);
}

kernel void strided_copy_i32(device const int* src [[buffer(0)]],
                             device int* dst [[buffer(1)]],
                             constant int* view [[buffer(2)]],
                             constant uint& count [[buffer(3)]],
                             uint gid [[thread_position_in_grid]]) {
    strided_copy(src, dst, view, count, gid);
}

kernel void strided_copy_b8(device const bool* src [[buffer(0)]],
                            device bool* dst [[buffer(1)]],
                            constant int* view [[buffer(2)]],
                            constant uint& count [[buffer(3)]],
                            uint gid [[thread_position_in_grid]]) {
    strided_copy(src, dst, view, count, gid);
}
