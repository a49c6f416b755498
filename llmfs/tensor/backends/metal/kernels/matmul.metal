// matmul.metal: batched D = alpha * (A @ B) + beta * C.
//
// A has shape [batch..., M, K], B [batch..., K, N], C and D [batch..., M, N]; the host gives A, B
// and C view descriptors of those shapes (a broadcast batch axis, or a broadcast C, has stride 0)
// and D is a fresh contiguous buffer. One thread per element of D: it locates the start of its
// row of A and its column of B once, then steps along K by the K-axis strides.
//
// Buffers: 0 A, 1 B, 2 C (ignored unless use_c), 3 D, 4 view_a, 5 view_b, 6 view_c,
//          7 dims = [M, N, K, count, use_c] (count = batch * M * N), 8 coeffs = [alpha, beta].

template <typename T>
inline void matmul(device const T* a, device const T* b, device const T* c, device T* d,
                   constant int* view_a, constant int* view_b, constant int* view_c,
                   constant int* dims, constant float* coeffs, uint gid) {
    int m_size = dims[0];
    int n_size = dims[1];
    int k_size = dims[2];
    if (gid >= uint(dims[3])) {
        return;
    }
    int n = int(gid) % n_size;
    int m = (int(gid) / n_size) % m_size;
    int batch = int(gid) / (n_size * m_size);
    float acc = 0.0f;
    if (k_size > 0) {
        int rank = view_a[0];  // all three views share the rank
        int a_at = view_offset(view_a, uint((batch * m_size + m) * k_size));
        int b_at = view_offset(view_b, uint(batch * k_size * n_size + n));
        int a_step = view_a[2 + rank + rank - 1];  // stride of A along K
        int b_step = view_b[2 + rank + rank - 2];  // stride of B along K
        for (int k = 0; k < k_size; ++k) {
            acc += float(a[a_at]) * float(b[b_at]);
            a_at += a_step;
            b_at += b_step;
        }
    }
    float result = coeffs[0] * acc;
    if (dims[4] != 0) {
        result += coeffs[1] * float(c[view_offset(view_c, gid)]);
    }
    d[gid] = T(result);
}

kernel void matmul_f32(device const float* a [[buffer(0)]],
                       device const float* b [[buffer(1)]],
                       device const float* c [[buffer(2)]],
                       device float* d [[buffer(3)]],
                       constant int* view_a [[buffer(4)]],
                       constant int* view_b [[buffer(5)]],
                       constant int* view_c [[buffer(6)]],
                       constant int* dims [[buffer(7)]],
                       constant float* coeffs [[buffer(8)]],
                       uint gid [[thread_position_in_grid]]) {
    matmul(a, b, c, d, view_a, view_b, view_c, dims, coeffs, gid);
}

kernel void matmul_f16(device const half* a [[buffer(0)]],
                       device const half* b [[buffer(1)]],
                       device const half* c [[buffer(2)]],
                       device half* d [[buffer(3)]],
                       constant int* view_a [[buffer(4)]],
                       constant int* view_b [[buffer(5)]],
                       constant int* view_c [[buffer(6)]],
                       constant int* dims [[buffer(7)]],
                       constant float* coeffs [[buffer(8)]],
                       uint gid [[thread_position_in_grid]]) {
    matmul(a, b, c, d, view_a, view_b, view_c, dims, coeffs, gid);
}
