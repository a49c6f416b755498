// common.metal: helpers shared by every llmfs kernel family.
//
// llmfs compiles each op family as ONE source text: this file followed by the family's file
// (see llmfs.tensor.backends.metal.kernel_source). Real Metal cannot #include a sibling file from
// a runtime-compiled source, so the text is joined in Python instead.
#include <metal_stdlib>
using namespace metal;

// A strided view travels to a kernel as one int array, so any view -- transposed, sliced with a
// step, flipped (negative strides) or broadcast (zero strides) -- is read in place:
//   view[0]                     rank
//   view[1]                     base offset, in elements
//   view[2 .. 2+rank)           shape
//   view[2+rank .. 2+2*rank)    strides, in elements (signed)
// The host checks that every reachable offset lies inside the buffer and that counts fit in int.

// Storage offset of the element whose row-major position in the view is `linear`.
// Callers guarantee linear < product(shape), so no extent is zero here.
inline int view_offset(constant int* view, uint linear) {
    int rank = view[0];
    int offset = view[1];
    int rest = int(linear);
    for (int axis = rank - 1; axis >= 0; --axis) {
        int extent = view[2 + axis];
        offset += (rest % extent) * view[2 + rank + axis];
        rest /= extent;
    }
    return offset;
}

// minimum/maximum that propagate NaN (as numpy does) and return the first operand on ties.
// MSL's own min/max follow fmin/fmax, which drop a NaN.
inline float nan_minimum(float a, float b) { return (a <= b || isnan(a)) ? a : b; }
inline float nan_maximum(float a, float b) { return (a >= b || isnan(a)) ? a : b; }
