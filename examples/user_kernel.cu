// The user kernel of user_kernel.json: y = a * x + y over n float32
// elements. `extern "C"` keeps the symbol name `saxpy`, which the graph's
// node names in kernel.kernel. Parameters follow the node's args in order:
// f32, buffer (as float*), buffer (as float*), i64 (as long long).
extern "C" __global__ void saxpy(float a, const float* x, float* y,
                                 long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
