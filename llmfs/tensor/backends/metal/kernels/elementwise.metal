// elementwise.metal: unary ops, binary ops with broadcasting, and scale.
//
// Every kernel reads its inputs in place through view descriptors (a broadcast input simply has
// stride 0 on the broadcast axes) and writes a fresh contiguous output in row-major order of the
// output shape. Arithmetic is done in float for both float and half storage; a half result is
// rounded once, on the store. Math functions are spelled precise:: so that they are precise
// whatever the compile options (macOS 15 made the fast variants the default for exp, log, sin,
// cos and tanh even with fast math off).
//
// unary_*   buffers: 0 src, 1 dst, 2 view, 3 count, 4 op
//           op: 0 neg, 1 abs, 2 sqrt, 3 exp, 4 log, 5 sin, 6 cos, 7 tanh, 8 sigmoid, 9 relu,
//               10 reciprocal
// binary_*  buffers: 0 a, 1 b, 2 dst, 3 view_a, 4 view_b, 5 count, 6 op
//           (both views have the output's shape; op: 0 add, 1 sub, 2 mul, 3 div, 4 minimum,
//           5 maximum)
// scale_*   buffers: 0 src, 1 dst, 2 view, 3 count, 4 alpha (float): dst = alpha * src
//
// int32 (unary_i32, binary_i32) computes in int with NumPy's wrap-around on overflow (done in
// uint, where wrapping is defined): unary neg and abs, binary add, sub, mul, minimum, maximum.
// The host sends no other op for int32 (NumPy computes those in float64, which Metal lacks).

inline float apply_unary(int op, float x) {
    switch (op) {
        case 0: return -x;
        case 1: return fabs(x);
        case 2: return precise::sqrt(x);
        case 3: return precise::exp(x);
        case 4: return precise::log(x);
        case 5: return precise::sin(x);
        case 6: return precise::cos(x);
        case 7: return precise::tanh(x);
        case 8: return 1.0f / (1.0f + precise::exp(-x));
        case 9: return (x > 0.0f || isnan(x)) ? x : 0.0f;
        case 10: return 1.0f / x;
        default: return NAN;  // the host never sends an unknown op
    }
}

inline float apply_binary(int op, float a, float b) {
    switch (op) {
        case 0: return a + b;
        case 1: return a - b;
        case 2: return a * b;
        case 3: return a / b;
        case 4: return nan_minimum(a, b);
        case 5: return nan_maximum(a, b);
        default: return NAN;
    }
}

inline int apply_unary_int(int op, int x) {
    uint negated = 0u - uint(x);
    switch (op) {
        case 0: return int(negated);
        case 1: return x < 0 ? int(negated) : x;  // abs(INT_MIN) wraps to INT_MIN, as in NumPy
        default: return 0;  // the host never sends another op for int32
    }
}

inline int apply_binary_int(int op, int a, int b) {
    switch (op) {
        case 0: return int(uint(a) + uint(b));
        case 1: return int(uint(a) - uint(b));
        case 2: return int(uint(a) * uint(b));
        case 4: return a < b ? a : b;
        case 5: return a > b ? a : b;
        default: return 0;
    }
}

template <typename T>
inline void unary(device const T* src, device T* dst, constant int* view, uint count, int op,
                  uint gid) {
    if (gid >= count) {
        return;
    }
    dst[gid] = T(apply_unary(op, float(src[view_offset(view, gid)])));
}

template <typename T>
inline void binary(device const T* a, device const T* b, device T* dst, constant int* view_a,
                   constant int* view_b, uint count, int op, uint gid) {
    if (gid >= count) {
        return;
    }
    float x = float(a[view_offset(view_a, gid)]);
    float y = float(b[view_offset(view_b, gid)]);
    dst[gid] = T(apply_binary(op, x, y));
}

template <typename T>
inline void scale(device const T* src, device T* dst, constant int* view, uint count, float alpha,
                  uint gid) {
    if (gid >= count) {
        return;
    }
    dst[gid] = T(alpha * float(src[view_offset(view, gid)]));
}

kernel void unary_f32(device const float* src [[buffer(0)]],
                      device float* dst [[buffer(1)]],
                      constant int* view [[buffer(2)]],
                      constant uint& count [[buffer(3)]],
                      constant int& op [[buffer(4)]],
                      uint gid [[thread_position_in_grid]]) {
    unary(src, dst, view, count, op, gid);
}

kernel void unary_f16(device const half* src [[buffer(0)]],
                      device half* dst [[buffer(1)]],
                      constant int* view [[buffer(2)]],
                      constant uint& count [[buffer(3)]],
                      constant int& op [[buffer(4)]],
                      uint gid [[thread_position_in_grid]]) {
    unary(src, dst, view, count, op, gid);
}

kernel void binary_f32(device const float* a [[buffer(0)]],
                       device const float* b [[buffer(1)]],
                       device float* dst [[buffer(2)]],
                       constant int* view_a [[buffer(3)]],
                       constant int* view_b [[buffer(4)]],
                       constant uint& count [[buffer(5)]],
                       constant int& op [[buffer(6)]],
                       uint gid [[thread_position_in_grid]]) {
    binary(a, b, dst, view_a, view_b, count, op, gid);
}

kernel void binary_f16(device const half* a [[buffer(0)]],
                       device const half* b [[buffer(1)]],
                       device half* dst [[buffer(2)]],
                       constant int* view_a [[buffer(3)]],
                       constant int* view_b [[buffer(4)]],
                       constant uint& count [[buffer(5)]],
                       constant int& op [[buffer(6)]],
                       uint gid [[thread_position_in_grid]]) {
    binary(a, b, dst, view_a, view_b, count, op, gid);
}

kernel void scale_f32(device const float* src [[buffer(0)]],
                      device float* dst [[buffer(1)]],
                      constant int* view [[buffer(2)]],
                      constant uint& count [[buffer(3)]],
                      constant float& alpha [[buffer(4)]],
                      uint gid [[thread_position_in_grid]]) {
    scale(src, dst, view, count, alpha, gid);
}

kernel void scale_f16(device const half* src [[buffer(0)]],
                      device half* dst [[buffer(1)]],
                      constant int* view [[buffer(2)]],
                      constant uint& count [[buffer(3)]],
                      constant float& alpha [[buffer(4)]],
                      uint gid [[thread_position_in_grid]]) {
    scale(src, dst, view, count, alpha, gid);
}

kernel void unary_i32(device const int* src [[buffer(0)]],
                      device int* dst [[buffer(1)]],
                      constant int* view [[buffer(2)]],
                      constant uint& count [[buffer(3)]],
                      constant int& op [[buffer(4)]],
                      uint gid [[thread_position_in_grid]]) {
    if (gid >= count) {
        return;
    }
    dst[gid] = apply_unary_int(op, src[view_offset(view, gid)]);
}

kernel void binary_i32(device const int* a [[buffer(0)]],
                       device const int* b [[buffer(1)]],
                       device int* dst [[buffer(2)]],
                       constant int* view_a [[buffer(3)]],
                       constant int* view_b [[buffer(4)]],
                       constant uint& count [[buffer(5)]],
                       constant int& op [[buffer(6)]],
                       uint gid [[thread_position_in_grid]]) {
    if (gid >= count) {
        return;
    }
    dst[gid] = apply_binary_int(op, a[view_offset(view_a, gid)], b[view_offset(view_b, gid)]);
}
